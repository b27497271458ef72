//! argmax of each row (the greedy sampler on the device): one workgroup per
//! row, two max reductions.

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const ARGMAX: &[&str] = &[include_str!("../../../../wgsl/argmax.wgsl")];

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    graph.layout(node.src[0]).dtype == DType::F32 && node.layout.dtype == DType::I32
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let src = enc.src(0);
    let (bindings, params) = enc.bind_all(&[src])?;
    let wg = enc.workgroup(256);
    let rows = enc.graph.layout(src).n_rows() as u32;
    Ok(vec![Dispatch {
        key: key(enc, "argmax", &[src], ARGMAX, "", true, wg),
        bindings,
        params,
        workgroups: enc.grid(rows),
    }])
}
