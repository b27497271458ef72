//! Copies of quantized tensors: between two tensors of one block type
//! (blocks moved whole, as ggml does, so nothing is requantized) and
//! dequantizing copies to f32 (with mul_mat's decoders, eight values per
//! invocation). Copies between float types are elementwise kernels.

use super::decoders::{defs, units_per_row};
use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const BLOCKS: &[&str] = &[include_str!("../../../../wgsl/cpy_blocks.wgsl")];
const DEQUANT: &[&str] = &[
    include_str!("../../../../wgsl/quant.wgsl"),
    include_str!("../../../../wgsl/put_unit.wgsl"),
    include_str!("../../../../wgsl/cpy_dequant.wgsl"),
];

/// Whether `id`, a copy, reads a quantized tensor (and so runs here).
pub fn reads_blocks(graph: &Graph, id: TensorId) -> bool {
    graph.layout(graph.node(id).src[0]).dtype.is_quantized()
}

/// Invocations: one per destination block, or per 8-value unit of each
/// source row.
fn invocations(graph: &Graph, id: TensorId) -> Option<u32> {
    let src = graph.layout(graph.node(id).src[0]);
    let dst = graph.layout(id);
    let n = if dst.dtype == src.dtype {
        dst.n_elements() / dst.dtype.block_elems()
    } else {
        units_per_row(src.ne[0]).checked_mul(src.ne[1] * src.ne[2] * src.ne[3])?
    };
    u32::try_from(n).ok()
}

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let src = graph.layout(graph.node(id).src[0]).dtype;
    let dst = graph.layout(id).dtype;
    let kind_fits = dst == src || (dst == DType::F32 && defs(src).is_some());
    kind_fits
        && u32::try_from(graph.layout(id).n_elements()).is_ok()
        && invocations(graph, id).is_some()
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let src = enc.src(0);
    let (from, to) = (enc.graph.layout(src).dtype, enc.graph.layout(enc.id).dtype);
    let (name, body, decoder) = if from == to {
        ("cpy_blocks", BLOCKS, "")
    } else {
        let decoder =
            defs(from).ok_or_else(|| enc.device.error(format!("a copy from {from} to {to}")))?;
        ("cpy_dequant", DEQUANT, decoder)
    };
    let (bindings, mut params) = enc.bind_all(&[src])?;
    // The block geometry, for cpy_blocks.
    params.x = [from.block_elems() as u32, from.block_bytes() as u32, 0, 0];
    let wg = enc.workgroup(256);
    let n = invocations(enc.graph, enc.id)
        .ok_or_else(|| enc.device.error("a copy of too many blocks"))?;
    Ok(vec![Dispatch {
        key: key(enc, name, &[src], body, decoder, false, wg),
        bindings,
        params,
        workgroups: enc.grid(n.div_ceil(wg)),
    }])
}
