//! mul_mat: weights `a` (f32, f16, q4_0, q4_1, q8_0, q6_K) times f32
//! activations `b`, with ggml's broadcast of `a` over dimensions 2 and 3.
//!
//! Two kernels share the block decoders of `wgsl/quant.wgsl`, so the only
//! type-specific WGSL is a three-line `defs` choosing a decoder:
//! - `mul_mat_<T>_f32_f32_<sg|wg>` (`wgsl/mul_mat_vec.wgsl`): four rows of 1, 2
//!   or 4 columns per workgroup and a workgroup reduction per output; for
//!   decode and batches of up to 8 columns.
//! - `mul_mm_<T>_f32_f32` (`wgsl/mul_mm.wgsl`): 64 x 64 output tiles from
//!   shared-memory tiles, each weight block read once per tile of columns;
//!   for prompts.
//!
//! f32/f16 weights may have any element stride (transposed views run, just
//! slower); quantized weights need dense rows (ggml cannot make others).

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::backend::wgpu::Device;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const QUANT: &str = include_str!("../../../../wgsl/quant.wgsl");
const VEC_BODY: &str = include_str!("../../../../wgsl/mul_mat_vec.wgsl");
/// The mat-vec kernel's store: the sum as it is, or plus a residual `c`
/// addressed like the destination (`p.y.x` is its offset in its binding).
const STORE_SUM: &str = "fn epilogue(v: f32, at: u32) -> f32 { return v; }\n";
const STORE_SUM_PLUS_C: &str =
    "fn epilogue(v: f32, at: u32) -> f32 { return v + load_c(at - p.d.offset + p.y.x); }\n";
/// The mat-vec kernel for 1, 2 and 4 columns per workgroup, storing sums
/// (`VEC_COLS[i].1`) or sums plus a residual (`VEC_COLS[i].2`).
type Body = &'static [&'static str];
const VEC_COLS: [(usize, Body, Body); 3] = [
    (
        1,
        &[QUANT, "const COLS: u32 = 1u;\n", STORE_SUM, VEC_BODY],
        &[QUANT, "const COLS: u32 = 1u;\n", STORE_SUM_PLUS_C, VEC_BODY],
    ),
    (
        2,
        &[QUANT, "const COLS: u32 = 2u;\n", STORE_SUM, VEC_BODY],
        &[QUANT, "const COLS: u32 = 2u;\n", STORE_SUM_PLUS_C, VEC_BODY],
    ),
    (
        4,
        &[QUANT, "const COLS: u32 = 4u;\n", STORE_SUM, VEC_BODY],
        &[QUANT, "const COLS: u32 = 4u;\n", STORE_SUM_PLUS_C, VEC_BODY],
    ),
];
/// Rows per workgroup of the mat-vec kernel (fixed in mul_mat_vec.wgsl).
const VEC_ROWS: usize = 4;
const MM: &[&str] = &[QUANT, include_str!("../../../../wgsl/mul_mm.wgsl")];

/// Output tile of the mat-mat kernel (`TM`, `TN` in mul_mm.wgsl) and its
/// fixed invocation count and shared memory (two 32 x 64 f32 tiles).
const MM_TILE: usize = 64;
const MM_WG: u32 = 256;
const MM_SHARED: u32 = 2 * 32 * 64 * 4;
/// Columns up to which the mat-vec kernel runs (as llama.cpp's Vulkan
/// backend does): a few columns re-read the weights from cache, while the
/// tiled kernel would leave most of its 64-column tile idle (on an H200, 4096
/// x 4096 q4_0 took the tiled kernel 0.41 ms at 8 columns and the 4-column
/// mat-vec 0.99 ms at 32; on lavapipe the crossover lies between 8 and 32).
const VEC_MAX_COLS: usize = 8;

/// The decoder of `a`'s type: `unit_w(row, u)` gives unit `u` of a row as
/// 8 weights, `x_elem(u, i)` the row element of weight `i` and `n_units(k)`
/// the units of a row of `k` values.
fn defs(t: DType) -> Option<&'static str> {
    macro_rules! decoder {
        ($unit:literal, $elem:literal, $units:literal) => {
            concat!(
                "fn unit_w(row: u32, u: u32) -> Unit { return ",
                $unit,
                "; }\n",
                "fn x_elem(u: u32, i: u32) -> u32 { return ",
                $elem,
                "(u, i); }\n",
                "fn n_units(k: u32) -> u32 { return ",
                $units,
                "; }\n"
            )
        };
    }
    Some(match t {
        DType::F32 => decoder!("dq_f32(row, u)", "x_elem_f32", "float_units(k)"),
        DType::F16 => decoder!("dq_f16(row, u)", "x_elem_f16", "float_units(k)"),
        DType::Q4_0 => decoder!(
            "dq_q4_0(row + 18u * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u"
        ),
        DType::Q4_1 => decoder!(
            "dq_q4_1(row + 20u * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u"
        ),
        DType::Q8_0 => decoder!(
            "dq_q8_0(row + 34u * (u >> 2u), u & 3u)",
            "x_elem_linear",
            "k / 8u"
        ),
        DType::Q6K => decoder!(
            "dq_q6_k(row + 210u * (u >> 5u), u & 31u)",
            "x_elem_q6_k",
            "k / 8u"
        ),
        DType::I32 => return None,
    })
}

/// Invocations of the mat-vec kernel: at most 128 (the fastest on an H200
/// for rows of 4096), fewer for short rows so that each has at least four of
/// a row's units (a 576-long row decodes twice as fast on lavapipe with 32
/// as with 64), never fewer than a subgroup or 32.
fn vec_workgroup(enc: &OpEncoder, dtype: DType, k: usize) -> u32 {
    // Units per row, as `n_units` in the WGSL.
    let units = if dtype.is_quantized() {
        k / 8
    } else {
        k.div_ceil(64) * 8
    };
    let subgroup = enc
        .device
        .gpu
        .summary
        .subgroup_sizes
        .map_or(0, |(_, hi)| hi);
    let want = (units / 4).min(128).max(subgroup.max(32) as usize);
    enc.workgroup(u32::try_from(want).unwrap_or(128))
}

/// Whether the tiled kernel fits the device's workgroup limits.
fn tiles_fit(dev: &Device) -> bool {
    let l = &dev.gpu.limits;
    l.max_compute_invocations_per_workgroup >= MM_WG
        && l.max_compute_workgroup_size_x >= MM_WG
        && l.max_compute_workgroup_storage_size >= MM_SHARED
}

/// Which kernel runs a product.
#[derive(Clone, Copy)]
enum Kind {
    /// The mat-vec kernel with `VEC_COLS[i]` columns per workgroup.
    Vec(usize),
    /// The tiled mat-mat kernel.
    Tiled,
}

/// Workgroups of the chosen kernel and its `p.x` words, or `None` when the
/// count does not fit the kernels' 32-bit indices.
fn plan(dev: &Device, graph: &Graph, id: TensorId) -> Option<(Kind, u32, [u32; 4])> {
    let node = graph.node(id);
    let (&a, &b) = (node.src.first()?, node.src.get(1)?);
    let (la, lb) = (graph.layout(a), graph.layout(b));
    let [_, m, a2, a3] = la.ne;
    let [_, n, b2, b3] = lb.ne;
    if a2 == 0 || a3 == 0 || b2 % a2 != 0 || b3 % a3 != 0 {
        return None;
    }
    let (r2, r3) = (u32::try_from(b2 / a2).ok()?, u32::try_from(b3 / a3).ok()?);
    let kind = if n > VEC_MAX_COLS && tiles_fit(dev) {
        Kind::Tiled
    } else {
        // The widest column group that n fills at least once.
        Kind::Vec(VEC_COLS.iter().rposition(|&(c, _, _)| c <= n)?)
    };
    let (gm, gn) = match kind {
        Kind::Tiled => (m.div_ceil(MM_TILE), n.div_ceil(MM_TILE)),
        Kind::Vec(i) => (m.div_ceil(VEC_ROWS), n.div_ceil(VEC_COLS[i].0)),
    };
    let count = gm.checked_mul(gn)?.checked_mul(b2)?.checked_mul(b3)?;
    let words = [u32::try_from(gm).ok()?, u32::try_from(gn).ok()?, r2, r3];
    Some((kind, u32::try_from(count).ok()?, words))
}

pub fn supports(dev: &Device, graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let (Some(&a), Some(&b)) = (node.src.first(), node.src.get(1)) else {
        return false;
    };
    let (la, lb) = (graph.layout(a), graph.layout(b));
    let weights_ok = match la.dtype {
        DType::F32 | DType::F16 => true,
        t => defs(t).is_some() && la.rows_contiguous() && la.ne[0] % t.block_elems() == 0,
    };
    weights_ok
        && lb.dtype == DType::F32
        && node.layout.dtype == DType::F32
        && la.ne[0] == lb.ne[0]
        && plan(dev, graph, id).is_some()
}

/// Whether `add`, reading the product `mm` as its first source, can be
/// folded into the mat-vec kernel's store: the residual has the sum's type,
/// shape and strides (so it is addressed like the destination), and the
/// product runs as a mat-vec.
pub fn residual_fits(dev: &Device, graph: &Graph, mm: TensorId, add: TensorId) -> bool {
    let residual = graph.node(add).src[1];
    let (lr, ld) = (graph.layout(residual), graph.layout(add));
    lr.dtype == DType::F32
        && lr.ne == ld.ne
        && lr.nb == ld.nb
        && *graph.layout(mm) == *ld
        && matches!(plan(dev, graph, mm), Some((Kind::Vec(_), _, _)))
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    encode_product(enc, enc.id, None)
}

/// The product `mm` plus `residual` into `enc`'s node (an `add`), in one
/// mat-vec dispatch; see [`residual_fits`].
pub fn encode_plus_residual(
    enc: &OpEncoder,
    mm: TensorId,
    residual: TensorId,
) -> Result<Vec<Dispatch>> {
    encode_product(enc, mm, Some(residual))
}

/// The product of node `mm`'s sources stored into `enc`'s node, plus
/// `residual` when given.
fn encode_product(
    enc: &OpEncoder,
    mm: TensorId,
    residual: Option<TensorId>,
) -> Result<Vec<Dispatch>> {
    let (a, b) = (enc.graph.node(mm).src[0], enc.graph.node(mm).src[1]);
    let dtype = enc.graph.layout(a).dtype;
    let (Some(defs), Some((kind, count, words))) = (defs(dtype), plan(enc.device, enc.graph, mm))
    else {
        return Err(enc
            .device
            .error(format!("mul_mat of {dtype:?} weights is not supported")));
    };
    let (mut bindings, mut params) = enc.bind_all(&[a, b])?;
    params.x = words;
    let mut srcs = vec![a, b];
    if let Some(r) = residual {
        let (binding, at) = enc.bind(r)?;
        // Sources come before the destination in binding order.
        bindings.insert(2, binding);
        params.y = [at.offset, 0, 0, 0];
        srcs.push(r);
    }
    let key = match (kind, residual) {
        (Kind::Tiled, None) => key(enc, "mul_mm", &srcs, MM, defs, false, MM_WG),
        (Kind::Tiled, Some(_)) => {
            return Err(enc
                .device
                .error("a residual add is fused only into the mat-vec kernel"))
        }
        (Kind::Vec(i), r) => key(
            enc,
            if r.is_some() {
                "mul_mat_add"
            } else {
                "mul_mat"
            },
            &srcs,
            if r.is_some() {
                VEC_COLS[i].2
            } else {
                VEC_COLS[i].1
            },
            defs,
            true,
            vec_workgroup(enc, dtype, enc.graph.layout(a).ne[0]),
        ),
    };
    Ok(vec![Dispatch {
        key,
        bindings,
        params,
        workgroups: enc.grid(count),
    }])
}
