//! norm and rms_norm: one workgroup per row, two reductions (mean, then
//! mean square of the centred values).

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const NORM: &str = concat!(
    include_str!("../../../../wgsl/norm_stats.wgsl"),
    include_str!("../../../../wgsl/norm.wgsl")
);
// Without a weight the scale is 1 (exact); with one, each value is
// multiplied by the weight broadcast over the rows, as a following mul does.
const UNWEIGHTED: &[&str] = &["fn weight_at(i: vec4<u32>) -> f32 { return 1.0; }\n", NORM];
const WEIGHTED: &[&str] = &[
    "fn weight_at(i: vec4<u32>) -> f32 { return load_b(addr(p.b, i % p.b.ne)); }\n",
    NORM,
];

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let src = graph.node(id).src[0];
    graph.layout(src).dtype == DType::F32
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    encode_rows(enc, enc.op(), enc.src(0), None)
}

/// `op` (norm or rms_norm) over the rows of `src` into `enc`'s node, times
/// `weight` (broadcast) when given.
pub fn encode_rows(
    enc: &OpEncoder,
    op: Op,
    src: TensorId,
    weight: Option<TensorId>,
) -> Result<Vec<Dispatch>> {
    let (names, defs, eps) = match op {
        Op::RmsNorm { eps } => (
            ["rms_norm", "rms_norm_mul"],
            "const CENTER: bool = false;\n",
            eps,
        ),
        Op::Norm { eps } => (["norm", "norm_mul"], "const CENTER: bool = true;\n", eps),
        other => {
            return Err(enc
                .device
                .error(format!("norm encoder got {}", other.name())))
        }
    };
    let (name, body) = match weight {
        Some(_) => (names[1], WEIGHTED),
        None => (names[0], UNWEIGHTED),
    };
    let srcs: Vec<TensorId> = std::iter::once(src).chain(weight).collect();
    let (bindings, mut params) = enc.bind_all(&srcs)?;
    params.x = [eps.to_bits(), 0, 0, 0];
    // Up to four elements per invocation: a decode step's few rows then
    // take one pass of loads, not a chain of them.
    let n = enc.graph.layout(src).ne[0] as u32;
    let wg = enc.workgroup(n.div_ceil(4).next_power_of_two().clamp(64, 1024));
    let rows = enc.graph.layout(src).n_rows() as u32;
    Ok(vec![Dispatch {
        key: key(enc, name, &srcs, body, defs, true, wg),
        bindings,
        params,
        workgroups: enc.grid(rows),
    }])
}
