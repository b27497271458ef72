//! get_rows: gathers rows of an f32, f16, bf16 or quantized table by i32
//! index, as f32. The table's blocks are decoded by mul_mat's decoders
//! (`decoders.rs`, `wgsl/quant.wgsl`), eight values per invocation.
//! Out-of-range indices give zero rows.

use super::decoders::{defs, units_per_row};
use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const BODY: &[&str] = &[
    include_str!("../../../../wgsl/quant.wgsl"),
    include_str!("../../../../wgsl/put_unit.wgsl"),
    include_str!("../../../../wgsl/get_rows.wgsl"),
];

/// Invocations: one per 8-value unit of each output row (float rows
/// round up to 64 values).
fn invocations(graph: &Graph, id: TensorId) -> Option<u32> {
    let out = graph.layout(id);
    let units = units_per_row(out.ne[0]);
    let rows = out.ne[1] * out.ne[2] * out.ne[3];
    u32::try_from(units.checked_mul(rows)?).ok()
}

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    defs(graph.layout(node.src[0]).dtype).is_some()
        && graph.layout(node.src[1]).dtype == DType::I32
        && node.layout.dtype == DType::F32
        && u32::try_from(node.layout.n_elements()).is_ok()
        && invocations(graph, id).is_some()
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let srcs = [enc.src(0), enc.src(1)];
    let table = enc.graph.layout(srcs[0]).dtype;
    let defs =
        defs(table).ok_or_else(|| enc.device.error(format!("get_rows from a {table} table")))?;
    let (bindings, params) = enc.bind_all(&srcs)?;
    let wg = enc.workgroup(256);
    let n = invocations(enc.graph, enc.id)
        .ok_or_else(|| enc.device.error("get_rows: too many rows"))?;
    Ok(vec![Dispatch {
        key: key(enc, "get_rows", &srcs, BODY, defs, false, wg),
        bindings,
        params,
        workgroups: enc.grid(n.div_ceil(wg)),
    }])
}
