//! add, mul (with broadcast), scale, silu, relu, gelu, diag_mask_inf and
//! cpy: one invocation per destination element over strided tensors, so
//! the seed's add/addrow, mul/mulrow and the four cpy kernels are each one
//! kernel body specialised by type.

use super::{key, Ctx};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const UNARY: &[&str] = &[include_str!("../../../../wgsl/unary.wgsl")];
const BINARY: &[&str] = &[include_str!("../../../../wgsl/binary.wgsl")];

fn is_float(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16)
}

pub fn supports_binary(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    node.src.iter().all(|&s| is_float(graph.layout(s).dtype)) && is_float(node.layout.dtype)
}

pub fn supports_unary(graph: &Graph, id: TensorId) -> bool {
    supports_binary(graph, id)
}

/// The unary function of each op; `p.x` carries its parameter.
fn unary_defs(op: Op) -> (&'static str, &'static str) {
    match op {
        Op::Scale(_) => ("scale", "fn unop(x: f32, i: vec4<u32>) -> f32 { return x * bitcast<f32>(p.x.x); }\n"),
        Op::Silu => ("silu", "fn unop(x: f32, i: vec4<u32>) -> f32 { return x / (1.0 + exp(-x)); }\n"),
        Op::Relu => ("relu", "fn unop(x: f32, i: vec4<u32>) -> f32 { return max(x, 0.0); }\n"),
        // tanh of a large argument can come out as inf/inf on some devices.
        Op::Gelu => (
            "gelu",
            "fn unop(x: f32, i: vec4<u32>) -> f32 {\n\
             \x20   let t = clamp(0.7978845608 * x * (1.0 + 0.044715 * x * x), -10.0, 10.0);\n\
             \x20   return 0.5 * x * (1.0 + tanh(t));\n}\n",
        ),
        Op::DiagMaskInf { .. } => (
            "diag_mask_inf",
            "fn unop(x: f32, i: vec4<u32>) -> f32 { return select(x, bitcast<f32>(0xff800000u), i.x > p.x.x + i.y); }\n",
        ),
        _ => ("cpy", "fn unop(x: f32, i: vec4<u32>) -> f32 { return x; }\n"),
    }
}

fn dispatch(
    ctx: &Ctx,
    op_name: &str,
    srcs: &[TensorId],
    body: &'static [&'static str],
    defs: &'static str,
) -> Result<Vec<Dispatch>> {
    let (bindings, mut params) = ctx.bind_all(srcs)?;
    params.x = match ctx.op() {
        Op::Scale(s) => [s.to_bits(), 0, 0, 0],
        Op::DiagMaskInf { n_past } => [u32::try_from(n_past).unwrap_or(u32::MAX), 0, 0, 0],
        _ => [0; 4],
    };
    let wg = ctx.workgroup(256);
    let n = ctx.graph.layout(ctx.id).n_elements() as u32;
    Ok(vec![Dispatch {
        key: key(ctx, op_name, srcs, body, defs, false, wg),
        bindings,
        params,
        workgroups: ctx.grid(n.div_ceil(wg)),
    }])
}

pub fn encode_unary(ctx: &Ctx) -> Result<Vec<Dispatch>> {
    let (name, defs) = unary_defs(ctx.op());
    dispatch(ctx, name, &[ctx.src(0)], UNARY, defs)
}

/// `silu(src) * b` into `ctx`'s node, a mul whose first source was `silu(src)`.
pub fn encode_silu_mul(ctx: &Ctx, src: TensorId) -> Result<Vec<Dispatch>> {
    let defs = "fn binop(x: f32, y: f32) -> f32 { return x / (1.0 + exp(-x)) * y; }\n";
    dispatch(ctx, "silu_mul", &[src, ctx.src(1)], BINARY, defs)
}

pub fn encode_binary(ctx: &Ctx) -> Result<Vec<Dispatch>> {
    let (name, defs) = match ctx.op() {
        Op::Mul => ("mul", "fn binop(x: f32, y: f32) -> f32 { return x * y; }\n"),
        _ => ("add", "fn binop(x: f32, y: f32) -> f32 { return x + y; }\n"),
    };
    dispatch(ctx, name, &[ctx.src(0), ctx.src(1)], BINARY, defs)
}
