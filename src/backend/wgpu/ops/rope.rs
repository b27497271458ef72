//! rope (not ported yet: declined, so the scheduler keeps it on the CPU).

use super::Ctx;
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::Result;

pub fn supports(_graph: &Graph, _id: TensorId) -> bool {
    false
}

pub fn encode(ctx: &Ctx) -> Result<Vec<Dispatch>> {
    Err(ctx.dev.error("rope is not ported yet"))
}
