//! Copies of quantized tensors: between two tensors of one block type
//! (blocks moved whole, as ggml does, so nothing is requantized),
//! dequantizing copies to f32 (with mul_mat's decoders, eight values per
//! invocation) and quantizing copies from f32, f16 or bf16 to the 32-value
//! block types (one block per invocation, rounded as the CPU reference
//! rounds). Copies between float types are elementwise kernels.

use super::decoders::{defs, units_per_row};
use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const PUT_BYTE: &str = include_str!("../../../../wgsl/put_byte.wgsl");
const BLOCKS: &[&str] = &[PUT_BYTE, include_str!("../../../../wgsl/cpy_blocks.wgsl")];
const QUANTIZE: &[&str] = &[
    include_str!("../../../../wgsl/quantize.wgsl"),
    PUT_BYTE,
    include_str!("../../../../wgsl/cpy_quant.wgsl"),
];
const DEQUANT: &[&str] = &[
    include_str!("../../../../wgsl/quant.wgsl"),
    include_str!("../../../../wgsl/put_unit.wgsl"),
    include_str!("../../../../wgsl/cpy_dequant.wgsl"),
];

/// Whether `id`, a copy, reads or writes a quantized tensor (and so runs here).
pub fn moves_blocks(graph: &Graph, id: TensorId) -> bool {
    graph.layout(graph.node(id).src[0]).dtype.is_quantized()
        || graph.layout(id).dtype.is_quantized()
}

/// The quantizer of block type `t` (quantize.wgsl), for the defs.
fn quantizer(t: DType) -> Option<&'static str> {
    macro_rules! quantizer {
        ($call:literal) => {
            concat!(
                "fn quantize_block(v: ptr<function, Values>, out: ptr<function, BlockWords>) -> u32 { return ",
                $call,
                "; }\n"
            )
        };
    }
    Some(match t {
        DType::Q4_0 => quantizer!("quantize_centered(v, out, 8.0)"),
        DType::Q4_1 => quantizer!("quantize_affine(v, out, 15.0)"),
        DType::Q5_0 => quantizer!("quantize_centered(v, out, 16.0)"),
        DType::Q5_1 => quantizer!("quantize_affine(v, out, 31.0)"),
        DType::Q8_0 => quantizer!("quantize_q8_0(v, out)"),
        _ => return None,
    })
}

/// Invocations: one per destination block, or per 8-value unit of each
/// source row.
fn invocations(graph: &Graph, id: TensorId) -> Option<u32> {
    let src = graph.layout(graph.node(id).src[0]);
    let dst = graph.layout(id);
    let n = if dst.dtype.is_quantized() {
        dst.n_elements() / dst.dtype.block_elems()
    } else {
        units_per_row(src.ne[0]).checked_mul(src.ne[1] * src.ne[2] * src.ne[3])?
    };
    u32::try_from(n).ok()
}

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let src = graph.layout(graph.node(id).src[0]).dtype;
    let dst = graph.layout(id).dtype;
    let floats = |t| matches!(t, DType::F32 | DType::F16 | DType::BF16);
    let kind_fits = dst == src
        || (dst == DType::F32 && defs(src).is_some())
        || (floats(src) && quantizer(dst).is_some());
    kind_fits
        && u32::try_from(graph.layout(id).n_elements()).is_ok()
        && invocations(graph, id).is_some()
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let src = enc.src(0);
    let (from, to) = (enc.graph.layout(src).dtype, enc.graph.layout(enc.id).dtype);
    let (name, body, decoder) = if from == to {
        ("cpy_blocks", BLOCKS, "")
    } else if to.is_quantized() {
        let quantizer =
            quantizer(to).ok_or_else(|| enc.device.error(format!("a copy from {from} to {to}")))?;
        ("cpy_quant", QUANTIZE, quantizer)
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
