//! add, mul (with broadcast), scale, silu, relu, gelu, diag_mask_inf and
//! cpy: one invocation per destination element over strided tensors, so
//! the seed's add/addrow, mul/mulrow and the four cpy kernels are each one
//! kernel body specialised by type.

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const UNARY: &[&str] = &[include_str!("../../../../wgsl/unary.wgsl")];
const BINARY: &[&str] = &[include_str!("../../../../wgsl/binary.wgsl")];

fn is_float(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16)
}

pub fn supports_binary(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    node.src.iter().all(|&s| is_float(graph.layout(s).dtype)) && is_float(node.layout.dtype)
}

pub fn supports_unary(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let ints = (graph.layout(node.src[0]).dtype, node.layout.dtype);
    let int_copy = matches!(
        ints,
        (DType::I32, DType::I32) | (DType::I32, DType::F32) | (DType::F32, DType::I32)
    );
    supports_binary(graph, id) || (node.op == Op::Cpy && int_copy)
}

/// i32 to i32 copies move the words as they are (an f32 round trip would
/// round values past 2^24).
const WORDS: &[&str] = &[include_str!("../../../../wgsl/cpy_words.wgsl")];

/// The unary function of each op (its name and WGSL), and its parameter,
/// which the kernel reads as `p.x.x`; `None` for ops that are not unary.
fn unary_defs(op: Op) -> Option<(&'static str, &'static str, u32)> {
    Some(match op {
        Op::Scale(s) => ("scale", "fn unop(x: f32, i: vec4<u32>) -> f32 { return x * bitcast<f32>(p.x.x); }\n", s.to_bits()),
        Op::Silu => ("silu", "fn unop(x: f32, i: vec4<u32>) -> f32 { return x / (1.0 + exp(-x)); }\n", 0),
        Op::Relu => ("relu", "fn unop(x: f32, i: vec4<u32>) -> f32 { return max(x, 0.0); }\n", 0),
        // Clamped for the same reason as GELU's; tanh(10) is 1 in f32.
        Op::Tanh => ("tanh", "fn unop(x: f32, i: vec4<u32>) -> f32 { return tanh(clamp(x, -10.0, 10.0)); }\n", 0),
        // tanh of a large argument can come out as inf/inf on some devices.
        Op::Gelu => (
            "gelu",
            "fn unop(x: f32, i: vec4<u32>) -> f32 {\n\
             \x20   let t = clamp(0.7978845608 * x * (1.0 + 0.044715 * x * x), -10.0, 10.0);\n\
             \x20   return 0.5 * x * (1.0 + tanh(t));\n}\n",
            0,
        ),
        Op::DiagMaskInf { n_past } => (
            "diag_mask_inf",
            "fn unop(x: f32, i: vec4<u32>) -> f32 { return select(x, bitcast<f32>(0xff800000u), i.x > p.x.x + i.y); }\n",
            u32::try_from(n_past).unwrap_or(u32::MAX),
        ),
        Op::Cpy => ("cpy", "fn unop(x: f32, i: vec4<u32>) -> f32 { return x; }\n", 0),
        Op::Input
        | Op::View
        | Op::Empty
        | Op::Transfer
        | Op::Add
        | Op::Mul
        | Op::Norm { .. }
        | Op::RmsNorm { .. }
        | Op::SoftMax { .. }
        | Op::MulMat
        | Op::MulMatId
        | Op::GetRows
        | Op::Rope(_)
        | Op::SetRows
        | Op::FlashAttn { .. }
        | Op::Argmax
        | Op::TopK { .. }
        | Op::SampleTopK => return None,
    })
}

/// The binary function of each op; `None` for ops that are not binary.
fn binary_defs(op: Op) -> Option<(&'static str, &'static str)> {
    Some(match op {
        Op::Add => ("add", "fn binop(x: f32, y: f32) -> f32 { return x + y; }\n"),
        Op::Mul => ("mul", "fn binop(x: f32, y: f32) -> f32 { return x * y; }\n"),
        Op::Input
        | Op::View
        | Op::Empty
        | Op::Transfer
        | Op::Scale(_)
        | Op::Silu
        | Op::Relu
        | Op::Gelu
        | Op::Tanh
        | Op::DiagMaskInf { .. }
        | Op::Cpy
        | Op::Norm { .. }
        | Op::RmsNorm { .. }
        | Op::SoftMax { .. }
        | Op::MulMat
        | Op::MulMatId
        | Op::GetRows
        | Op::Rope(_)
        | Op::SetRows
        | Op::FlashAttn { .. }
        | Op::Argmax
        | Op::TopK { .. }
        | Op::SampleTopK => return None,
    })
}

fn dispatch(
    enc: &OpEncoder,
    op_name: &str,
    srcs: &[TensorId],
    body: &'static [&'static str],
    defs: &'static str,
    param: u32,
) -> Result<Vec<Dispatch>> {
    let (bindings, mut params) = enc.bind_all(srcs)?;
    params.x = [param, 0, 0, 0];
    let wg = enc.workgroup(256);
    let n = enc.graph.layout(enc.id).n_elements() as u32;
    Ok(vec![Dispatch {
        key: key(enc, op_name, srcs, body, defs, false, wg),
        bindings,
        params,
        workgroups: enc.grid(n.div_ceil(wg)),
    }])
}

pub fn encode_unary(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let src = enc.src(0);
    let ints = (enc.graph.layout(src).dtype, enc.graph.layout(enc.id).dtype);
    if enc.op() == Op::Cpy && ints == (DType::I32, DType::I32) {
        return dispatch(enc, "cpy_words", &[src], WORDS, "", 0);
    }
    let (name, defs, param) = unary_defs(enc.op()).ok_or_else(|| {
        enc.device
            .error(format!("{} is not a unary op", enc.op().name()))
    })?;
    dispatch(enc, name, &[enc.src(0)], UNARY, defs, param)
}

/// `silu(src) * b` into `enc`'s node, a mul whose first source was `silu(src)`.
pub fn encode_silu_mul(enc: &OpEncoder, src: TensorId) -> Result<Vec<Dispatch>> {
    let defs = "fn binop(x: f32, y: f32) -> f32 { return x / (1.0 + exp(-x)) * y; }\n";
    dispatch(enc, "silu_mul", &[src, enc.src(1)], BINARY, defs, 0)
}

pub fn encode_binary(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let (name, defs) = binary_defs(enc.op()).ok_or_else(|| {
        enc.device
            .error(format!("{} is not a binary op", enc.op().name()))
    })?;
    dispatch(enc, name, &[enc.src(0), enc.src(1)], BINARY, defs, 0)
}
