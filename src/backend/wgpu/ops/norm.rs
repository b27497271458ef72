//! norm and rms_norm: one workgroup per row, two reductions (mean, then
//! mean square of the centred values). Dense f32 rows of up to 16,384
//! values run `wgsl/norm_dense.wgsl`, which holds the row in registers.

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

const DENSE: &str = include_str!("../../../../wgsl/norm_dense.wgsl");
const DENSE_UNWEIGHTED: &[&str] = &[
    "fn weight_quad(q: u32) -> vec4<f32> { return vec4<f32>(1.0); }\n",
    DENSE,
];
const DENSE_WEIGHTED: &[&str] = &[
    "fn weight_quad(q: u32) -> vec4<f32> {\n\
     \x20   let i = (p.b.offset >> 2u) + 4u * q;\n\
     \x20   return bitcast<vec4<f32>>(vec4<u32>(b[i], b[i + 1u], b[i + 2u], b[i + 3u]));\n}\n",
    DENSE,
];
/// Quads of a row each invocation of the dense kernel holds.
const DENSE_QUADS: usize = 4;

/// Whether `src`'s rows, the destination's and the weight (one row
/// broadcast over all) are contiguous f32 whose length the dense kernel
/// takes.
fn dense(graph: &Graph, src: TensorId, dst: TensorId, weight: Option<TensorId>) -> bool {
    let contiguous_f32 = |t: TensorId| {
        let l = graph.layout(t);
        l.dtype == DType::F32 && l.nb[0] == 4
    };
    let n = graph.layout(src).ne[0];
    n.is_multiple_of(4)
        && contiguous_f32(src)
        && contiguous_f32(dst)
        && weight.is_none_or(|w| {
            let l = graph.layout(w);
            contiguous_f32(w) && l.ne[0] == n && l.ne[1..].iter().all(|&e| e == 1)
        })
}

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
    let (op_name, defs, eps) = match op {
        Op::RmsNorm { eps } => ("rms_norm", "const CENTER: bool = false;\n", eps),
        Op::Norm { eps } => ("norm", "const CENTER: bool = true;\n", eps),
        other => {
            return Err(enc
                .device
                .error(format!("norm encoder got {}", other.name())))
        }
    };
    let n = enc.graph.layout(src).ne[0] as u32;
    let dense_wg = enc.workgroup(
        n.div_ceil(4 * DENSE_QUADS as u32)
            .next_power_of_two()
            .clamp(32, 1024),
    );
    let is_dense =
        n as usize <= 4 * DENSE_QUADS * dense_wg as usize && dense(enc.graph, src, enc.id, weight);
    // Kernel names and bodies by [dense][weighted].
    let names = [["", "_mul"], ["_dense", "_mul_dense"]];
    let bodies = [[UNWEIGHTED, WEIGHTED], [DENSE_UNWEIGHTED, DENSE_WEIGHTED]];
    let (d, w) = (usize::from(is_dense), usize::from(weight.is_some()));
    let name = format!("{op_name}{}", names[d][w]);
    let wg = if is_dense {
        dense_wg
    } else {
        // Up to four elements per invocation: a decode step's few rows
        // then take one pass of loads, not a chain of them.
        enc.workgroup(n.div_ceil(4).next_power_of_two().clamp(64, 1024))
    };
    let srcs: Vec<TensorId> = std::iter::once(src).chain(weight).collect();
    let (bindings, mut params) = enc.bind_all(&srcs)?;
    params.x = [eps.to_bits(), 0, 0, 0];
    let rows = enc.graph.layout(src).n_rows() as u32;
    Ok(vec![Dispatch {
        key: key(enc, &name, &srcs, bodies[d][w], defs, true, wg),
        bindings,
        params,
        workgroups: enc.grid(rows),
    }])
}
