//! soft_max with scale and an optional mask broadcast over dims 2 and 3: one
//! workgroup per row, a max and a sum reduction. The mask is a second source
//! when present, so the kernel comes in a one-source and a two-source form;
//! rows short enough to sit in the workgroup's registers are read once.

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const SOFT_MAX: &str = include_str!("../../../../wgsl/softmax.wgsl");
// The kernel calls `causal(x, i)`, which may mask a logit as it is read,
// and `mask_at(i)`, the mask added after scaling.
const READ_AS_IS: &str = "fn causal(x: f32, i: vec4<u32>) -> f32 { return x; }\n";
// diag_mask_inf's rule, applied as the logits are read (p.y.x: n_past).
const READ_CAUSAL: &str = "fn causal(x: f32, i: vec4<u32>) -> f32 {\n\
    \x20   return select(x, bitcast<f32>(0xff800000u), i.x > p.y.x + i.y);\n}\n";
const ADD_NOTHING: &str = "fn mask_at(i: vec4<u32>) -> f32 { return 0.0; }\n";
// Mask rows past the logits' ne1 are ignored; dims 2 and 3 repeat by modulo.
const ADD_MASK: &str = "fn mask_at(i: vec4<u32>) -> f32 {\n\
    \x20   return load_b(addr(p.b, vec4<u32>(i.x, i.y, i.z % p.b.ne.z, i.w % p.b.ne.w)));\n}\n";
const NO_MASK: &[&str] = &[READ_AS_IS, ADD_NOTHING, SOFT_MAX];
const MASK: &[&str] = &[READ_AS_IS, ADD_MASK, SOFT_MAX];
const CAUSAL: &[&str] = &[READ_CAUSAL, ADD_NOTHING, SOFT_MAX];
/// Values each invocation holds of a row read once (`CACHE` in
/// softmax.wgsl); longer rows are read in each of the three passes.
macro_rules! cached_per_invocation {
    () => {
        4
    };
}
const CACHED_PER_INVOCATION: u32 = cached_per_invocation!();
const CACHED: &str = concat!("const CACHE: u32 = ", cached_per_invocation!(), "u;\n");
const LOOPED: &str = "const CACHE: u32 = 0u;\n";

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let float = |t: TensorId| matches!(graph.layout(t).dtype, DType::F32 | DType::F16);
    graph.layout(node.src[0]).dtype == DType::F32
        && node.layout.dtype == DType::F32
        && node.src[1..].iter().all(|&m| float(m))
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(enc.id);
    match node.src.get(1) {
        Some(&mask) => rows(enc, "soft_max", &[node.src[0], mask], MASK, 0),
        None => rows(enc, "soft_max", &[node.src[0]], NO_MASK, 0),
    }
}

/// soft_max of `src` into `enc`'s node with diag_mask_inf(`n_past`) applied
/// first, as the pair computes it.
pub fn encode_causal(enc: &OpEncoder, src: TensorId, n_past: usize) -> Result<Vec<Dispatch>> {
    let n_past = u32::try_from(n_past).unwrap_or(u32::MAX);
    rows(enc, "soft_max_causal", &[src], CAUSAL, n_past)
}

fn rows(
    enc: &OpEncoder,
    name: &str,
    srcs: &[TensorId],
    body: &'static [&'static str],
    n_past: u32,
) -> Result<Vec<Dispatch>> {
    let Op::SoftMax { scale } = enc.op() else {
        return Err(enc.device.error("soft_max encoder got another op"));
    };
    let (bindings, mut params) = enc.bind_all(srcs)?;
    params.x = [scale.to_bits(), 0, 0, 0];
    params.y = [n_past, 0, 0, 0];
    let wg = enc.workgroup(256);
    let layout = enc.graph.layout(srcs[0]);
    let rows = layout.n_rows() as u32;
    let cached = layout.ne[0] <= (CACHED_PER_INVOCATION * wg) as usize;
    let defs = if cached { CACHED } else { LOOPED };
    let mut key = key(enc, name, srcs, body, defs, true, wg);
    if cached {
        key.name.push_str("_cached");
    }
    Ok(vec![Dispatch {
        key,
        bindings,
        params,
        workgroups: enc.grid(rows),
    }])
}
