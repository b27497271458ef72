//! norm and rms_norm: one workgroup per row, two reductions (mean, then
//! mean square of the centred values).

use super::{key, Ctx};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const BODY: &[&str] = &[include_str!("../../../../wgsl/norm.wgsl")];

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let src = graph.node(id).src[0];
    graph.layout(src).dtype == DType::F32
}

pub fn encode(ctx: &Ctx) -> Result<Vec<Dispatch>> {
    let (name, defs, eps) = match ctx.op() {
        Op::RmsNorm { eps } => ("rms_norm", "const CENTER: bool = false;\n", eps),
        Op::Norm { eps } => ("norm", "const CENTER: bool = true;\n", eps),
        _ => return Err(ctx.dev.error("norm encoder got another op")),
    };
    let src = ctx.src(0);
    let (bindings, mut params) = ctx.bind_all(&[src])?;
    params.x = [eps.to_bits(), 0, 0, 0];
    let wg = ctx.workgroup(256);
    let rows = ctx.graph.layout(src).n_rows() as u32;
    Ok(vec![Dispatch {
        key: key(ctx, name, &[src], BODY, defs, true, wg),
        bindings,
        params,
        workgroups: ctx.grid(rows),
    }])
}
