//! mul_mat: weights `a` (f32, f16 or any block type) times f32
//! activations `b`, with ggml's broadcast of `a` over dimensions 2 and 3.
//!
//! Three kernels share the block decoders of `wgsl/quant.wgsl`, so the only
//! type-specific WGSL is a few lines of `defs` choosing a decoder
//! (`decoders.rs`):
//! - `mul_mat_<T>_f32_f32_<sg|wg>` (`wgsl/mul_mat_vec.wgsl`): four rows of 1, 2
//!   or 4 columns per workgroup and a workgroup reduction per output; for
//!   decode and batches of up to 8 columns. Its activations may be cast to
//!   f16 units first by the cooperative kernel's cast (below), which halves
//!   their loads (`WgpuOptions::matvec_cast_from`).
//! - `mul_mm_<T>_f32_f32` (`wgsl/mul_mm.wgsl`): 64 x 64 output tiles from
//!   shared-memory tiles, each weight block read once per tile of columns;
//!   for prompts.
//! - `mul_mm_coop_<T>_f32_f32_sg` (`wgsl/mul_mm_coop.wgsl`): 128 x 128 tiles
//!   on cooperative matrices, where the device has them; its activations
//!   are first cast to f16 in the tiles' order by `mul_mm_cast_<T>`
//!   (`wgsl/mul_mm_cast.wgsl`) into a scratch buffer of the device, once
//!   for all row tiles (on an H100, pp512 of the 8B / 1B / 135M shapes
//!   4,851 / 19,623 / 42,471 -> 6,514 / 23,463 / 45,799 tok/s).
//!
//! f32/f16 weights may have any element stride (transposed views run, just
//! slower); quantized weights need dense rows (ggml cannot make others).

mod coop;
mod fits;
mod fused;
mod vec_bodies;
mod vec_cast;

use coop::{
    cast_activations, casts, coop_fits, COOP_ENABLES, COOP_NARROW_BELOW, COOP_TILE, COOP_WG,
    MM_COOP,
};
pub use fits::{ahead_fits, norm_fits, residual_fits, silu_mul_fits, softmax_fits};
pub use fused::{
    encode_into, encode_norm_ahead, encode_normed, encode_plus_residual, encode_silu_mul,
    encode_softmaxed, Producer,
};
use fused::{Activation, Fusion, NONE};

use super::decoders::defs;
use super::{key, workgroup_within, OpEncoder};
use crate::backend::wgpu::kernels::KernelKey;
use crate::backend::wgpu::params::{Params, TensorParams};
use crate::backend::wgpu::plan::{Binding, Dispatch};
use crate::backend::wgpu::{Device, Reduction};
use crate::graph::{Graph, Op, TensorId};
use crate::tensor::Layout;
use crate::{DType, Result};
use vec_bodies::{Prologue, Store, QUANT, VEC_BODIES, VEC_COLS};
use vec_cast::{cast_for_vec, vec_casts};

/// Rows per row group of the mat-vec kernel (fixed in mul_mat_vec.wgsl).
const VEC_ROWS: usize = 4;
const MM_TILES: &str = include_str!("../../../../wgsl/mul_mm_tiles.wgsl");
/// The tiled mat-mat kernel by [wide]: 64 x 64 output tiles, each
/// invocation a 4 x 4 block, or 128 x 128 with 8 x 8 blocks (`R` in
/// mul_mm.wgsl; which products take them: `WgpuOptions::tile_wide_from`);
/// both hold two 8 KiB f32 tiles in shared memory.
const MM: [&[&str]; 2] = [
    &[QUANT, "const R: u32 = 4u;\n", MM_TILES, MM_BODY],
    &[QUANT, "const R: u32 = 8u;\n", MM_TILES, MM_BODY],
];
const MM_BODY: &str = include_str!("../../../../wgsl/mul_mm.wgsl");
const MM_TILE: [usize; 2] = [64, 128];
const _: () = assert!(MM_TILE[1] == COOP_TILE);
const MM_WG: u32 = 256;
const MM_SHARED: u32 = 2 * 256 * 8 * 4;
/// Columns up to which the mat-vec kernel runs (as llama.cpp's Vulkan
/// backend does): a few columns re-read the weights from cache, while the
/// tiled kernel would leave most of its 64-column tile idle (on an H200, 4096
/// x 4096 q4_0 took the tiled kernel 0.41 ms at 8 columns and the 4-column
/// mat-vec 0.99 ms at 32; on lavapipe the crossover lies between 8 and 32).
const VEC_MAX_COLS: usize = 8;

/// A tuning override from the environment: a power of two in `range`.
fn forced(var: &str, range: std::ops::RangeInclusive<u32>) -> Option<u32> {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|v| v.is_power_of_two() && range.contains(v))
}

/// `WGINFER_MATVEC_WG` (a power of two from 32 to 256) overrides the
/// mat-vec kernel's invocations, for tuning on new devices (its row groups
/// are [`WgpuOptions::matvec_groups`]).
///
/// [`WgpuOptions::matvec_groups`]: crate::backend::wgpu::WgpuOptions::matvec_groups
fn forced_wg() -> Option<u32> {
    static FORCED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| forced("WGINFER_MATVEC_WG", 32..=256))
}

/// Invocations and row groups of the mat-vec kernel for rows of `k`
/// values. At most 128 invocations (the fastest on an H200 for rows of
/// 4096), fewer for short rows so that each has at least a block, or four
/// units, of a row (a 576-long row decodes twice as fast on lavapipe with
/// 32 as with 64), never fewer than a subgroup or 32. Row groups as asked
/// ([`WgpuOptions::matvec_groups`]), else two on a GPU for q4_0 and q4_1
/// matrices of at least [`TWO_GROUPS_FROM`] rows of as many values, one
/// otherwise; a group holds whole subgroups (its sums are reduced per
/// subgroup).
///
/// [`WgpuOptions::matvec_groups`]: crate::backend::wgpu::WgpuOptions::matvec_groups
fn vec_shape(dev: &Device, weights: &Layout) -> (u32, u32) {
    let (dtype, [k, m, ..]) = (weights.dtype, weights.ne);
    let subgroup = dev.gpu.summary.subgroup_sizes.map_or(0, |(_, hi)| hi);
    let wg = forced_wg().unwrap_or_else(|| {
        // Four units per invocation.
        let lanes = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => k.div_ceil(64) * 2,
            _ => k / 32,
        };
        let want = lanes.min(128).max(subgroup.max(32) as usize);
        u32::try_from(want).unwrap_or(128)
    });
    let wg = workgroup_within(dev, wg);
    let on_gpu = dev.gpu.summary.device_type != "Cpu";
    let groups = dev
        .matvec_groups
        .unwrap_or(
            if on_gpu && two_groups_suit(dtype) && k.min(m) >= TWO_GROUPS_FROM {
                2
            } else {
                1
            },
        )
        .min(wg / subgroup.max(1))
        .max(1);
    (wg, groups)
}

/// Rows and row length from which a GPU's mat-vec workgroups take two row
/// groups of four rows. An H100 (gen128, three rounds, tok/s) decoded the
/// 8B shape, whose matrices all have 4096 rows or more of 4096 values or
/// more, 3% faster with two (205.6-205.8 -> 211.9-212.0); the 1B shape 4%
/// slower with two everywhere (633 -> 608), 2% with two for its 2048 rows
/// of 5632 values (631.3-631.9 -> 620.2-620.9), and unchanged with two for
/// its 11264 gate/up rows of 2048.
const TWO_GROUPS_FROM: usize = 4096;

/// The weight types that took two row groups faster, alone (H100,
/// `backend_ops --mode perf --op mul_mat`, 4096 x 4096 / 4096 x 14336 /
/// 14336 x 4096, µs with two groups against one): q4_1 162 / 106 / 105
/// against 192 / 194 / 100, q8_0 143 / 98 / 96 against 138 / 110 / 97,
/// but f16 227 / 193 / 126 against 141 / 116 / 122 and q6_K 343 / 132 /
/// 127 against 187 / 136 / 133.
fn two_groups_suit(dtype: DType) -> bool {
    matches!(dtype, DType::Q4_0 | DType::Q4_1)
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
    /// The tiled mat-mat kernel, in 128 x 128 tiles where wide.
    Tiled { wide: bool },
    /// The tiled kernel on cooperative matrices.
    Coop { narrow: bool },
}

/// Workgroups of the chosen kernel and its `p.x` words, or `None` when the
/// count does not fit the kernels' 32-bit indices.
fn plan(dev: &Device, graph: &Graph, id: TensorId) -> Option<(Kind, u32, [u32; 4])> {
    let node = graph.node(id);
    let (&a, &b) = (node.src.first()?, node.src.get(1)?);
    let (la, lb) = (graph.layout(a), graph.layout(b));
    let [_, m, a2, a3] = la.ne;
    let [_, n, b2, b3] = match node.op {
        // One column per slot and token, each its expert's mat-vec.
        Op::MulMatId => [0, 1, node.layout.ne[1], node.layout.ne[2]],
        _ => lb.ne,
    };
    let broadcasts = node.op == Op::MulMatId || (b2 % a2 == 0 && b3 % a3 == 0);
    if a2 == 0 || a3 == 0 || !broadcasts {
        return None;
    }
    let (r2, r3) = match node.op {
        Op::MulMatId => (1, 1),
        _ => (u32::try_from(b2 / a2).ok()?, u32::try_from(b3 / a3).ok()?),
    };
    // Both tiled kernels pick their tile size by the product's count of
    // 128 x 128 tiles.
    let big_tiles = m
        .div_ceil(COOP_TILE)
        .saturating_mul(n.div_ceil(COOP_TILE))
        .saturating_mul(b2)
        .saturating_mul(b3);
    let kind = if n > VEC_MAX_COLS && coop_fits(dev) {
        Kind::Coop {
            narrow: big_tiles < COOP_NARROW_BELOW.get(),
        }
    } else if n > VEC_MAX_COLS && tiles_fit(dev) {
        Kind::Tiled {
            wide: big_tiles >= dev.tile_wide_from,
        }
    } else {
        // The widest column group that n fills at least once.
        Kind::Vec(VEC_COLS.iter().rposition(|&c| c <= n)?)
    };
    let (gm, gn) = match kind {
        Kind::Tiled { wide } => {
            let tile = MM_TILE[usize::from(wide)];
            (m.div_ceil(tile), n.div_ceil(tile))
        }
        Kind::Coop { narrow } => (
            m.div_ceil(COOP_TILE),
            n.div_ceil(if narrow { COOP_TILE / 2 } else { COOP_TILE }),
        ),
        Kind::Vec(i) => {
            let (_, groups) = vec_shape(dev, la);
            (
                m.div_ceil(VEC_ROWS * groups as usize),
                n.div_ceil(VEC_COLS[i]),
            )
        }
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
        DType::F32 | DType::F16 | DType::BF16 => true,
        t => defs(t).is_some() && la.rows_contiguous() && la.ne[0] % t.block_elems() == 0,
    };
    let ids_ok = match node.src.get(2) {
        Some(&ids) => graph.layout(ids).dtype == DType::I32 && graph.layout(ids).nb[0] == 4,
        None => node.op == Op::MulMat,
    };
    weights_ok
        && ids_ok
        && matches!(lb.dtype, DType::F32 | DType::F16 | DType::BF16)
        && node.layout.dtype == DType::F32
        && node.layout.is_contiguous()
        && la.ne[0] == lb.ne[0]
        && plan(dev, graph, id).is_some()
}

/// mul_mat_id as the mat-vec kernel's batches: the destination `[M,
/// n_used, T]` read as `[M, 1, n_used, T]`, the activations `[K, X, T]` as
/// `[K, 1, n_used, T]` (slot s reads column s, or with X = 1 the token's
/// only column), and each batch's weights the expert its id names
/// (`STORE_BY_EXPERT`).
pub fn encode_by_expert(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(enc.id);
    let [a, b, ids] = [node.src[0], node.src[1], node.src[2]];
    let dtype = enc.graph.layout(a).dtype;
    let (Some(defs), Some((Kind::Vec(i), count, words))) =
        (defs(dtype), plan(enc.device, enc.graph, enc.id))
    else {
        return Err(enc
            .device
            .error(format!("mul_mat_id of {dtype:?} weights is not supported")));
    };
    let (mut bindings, mut params) = enc.bind_all(&[a, b])?;
    let (binding, at) = enc.bind(ids)?;
    bindings.insert(2, binding);
    params.x = words;
    let n_used = node.layout.ne[1] as u32;
    let x = params.b.ne[1];
    params.b.ne = [params.b.ne[0], 1, n_used, params.b.ne[2]];
    params.b.nb = [
        params.b.nb[0],
        params.b.nb[1],
        if x == 1 { 0 } else { params.b.nb[1] },
        params.b.nb[2],
    ];
    params.d.ne = [params.d.ne[0], 1, n_used, params.d.ne[2]];
    params.d.nb = [
        params.d.nb[0],
        params.d.nb[1],
        params.d.nb[1],
        params.d.nb[2],
    ];
    params.y = [at.offset, at.nb[1], 0, 0];
    params.y[3] = u32::from(quads_aligned(&params, Prologue::None));
    let (workgroup, groups) = vec_shape(enc.device, enc.graph.layout(a));
    let sums = usize::from(enc.device.reduction != Reduction::Subgroup);
    let key = KernelKey {
        wide: true,
        groups,
        ..key(
            enc,
            "mul_mat_id",
            &[a, b, ids],
            &VEC_BODIES[sums][i][Store::ByExpert as usize][Prologue::None.index()],
            defs,
            true,
            workgroup,
        )
    };
    Ok(dispatch(enc, key, bindings, 3, params, count))
}

/// The dispatch of a mul_mat kernel over `count` workgroups, its first
/// `n_srcs` bindings the sources (`a` first) and, for a `wide` key, the
/// vec4 views of those after `a` appended (see KernelKey::wide).
fn dispatch(
    enc: &OpEncoder,
    key: KernelKey,
    mut bindings: Vec<Binding>,
    n_srcs: usize,
    params: Params,
    count: u32,
) -> Vec<Dispatch> {
    if key.wide {
        let views: Vec<_> = bindings[1..n_srcs].to_vec();
        bindings.extend(views);
    }
    vec![Dispatch {
        key,
        bindings,
        params,
        workgroups: enc.grid(count),
    }]
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    encode_product(enc, enc.id, NONE)
}

/// Where a norm run ahead leaves its results in the device's scratch
/// buffer: y times the weight (`len` f32 from byte 0), then the sums of
/// squares of each four values (their byte offset and count).
fn ahead_layout(len: usize) -> (usize, usize) {
    ((4 * len).next_multiple_of(16), len.div_ceil(4))
}

/// Whether the mat-vec may load its activations four at a time (`p.y.w`):
/// b's rows are dense and every column starts 16-byte aligned, and so do
/// the prologue's other operands (an f16 norm weight needs 8).
fn quads_aligned(params: &Params, prologue: Prologue) -> bool {
    let b = &params.b;
    let columns_aligned = b.nb[0] == 4
        && [b.offset, b.nb[1], b.nb[2], b.nb[3]]
            .iter()
            .all(|v| v.is_multiple_of(16));
    let operands_aligned = match prologue {
        Prologue::None => true,
        Prologue::Norm { weight_bytes, .. } => {
            (params.y[0] as usize).is_multiple_of(4 * weight_bytes)
        }
        Prologue::SiluMul => params.y[2].is_multiple_of(16),
        Prologue::SoftMax { masked } => !masked || params.y[0].is_multiple_of(16),
        Prologue::Ahead | Prologue::Cast { .. } => true,
    };
    columns_aligned && operands_aligned
}

/// The product of node `mm`'s sources stored into `enc`'s node, with what
/// `fusion` names.
fn encode_product(enc: &OpEncoder, mm: TensorId, fusion: Fusion) -> Result<Vec<Dispatch>> {
    let Fusion {
        residual,
        activation,
        ahead,
        into,
    } = fusion;
    let a = enc.graph.node(mm).src[0];
    let b = match activation {
        Some(
            Activation::Norm(first, _) | Activation::SiluMul(first, _) | Activation::SoftMax(first),
        ) => enc.graph.node(first).src[0],
        Some(Activation::Ahead(_)) | None => enc.graph.node(mm).src[1],
    };
    let dtype = enc.graph.layout(a).dtype;
    let (Some(defs), Some((kind, count, words))) = (defs(dtype), plan(enc.device, enc.graph, mm))
    else {
        return Err(enc
            .device
            .error(format!("mul_mat of {dtype:?} weights is not supported")));
    };
    let (mut bindings, mut params) = enc.bind_all(&[a, b])?;
    params.x = words;
    if let Some(nb) = into {
        let ne = enc.graph.layout(mm).ne;
        let held = Layout {
            dtype: enc.graph.layout(enc.id).dtype,
            ne,
            nb,
        };
        params.d = TensorParams::new(&held, params.d.offset as usize)
            .ok_or_else(|| enc.device.error("a product too large to address"))?;
    }
    let mut srcs = vec![a, b];
    let mut prologue = Prologue::None;
    // A third source (residual or norm weight) binds before the destination.
    if let Some(r) = residual {
        let (binding, at) = enc.bind(r)?;
        bindings.insert(2, binding);
        params.y = [at.offset, 0, 0, 0];
        srcs.push(r);
    }
    let scratch = |size: usize| Binding {
        buffer: enc.device.scratch().clone(),
        offset: 0,
        size: size as u64,
    };
    let too_large = || {
        enc.device
            .error("a norm run ahead past the kernels' 32-bit offsets")
    };
    let mut store = match residual {
        Some(_) => Store::PlusResidual,
        None => Store::Sum,
    };
    if let Some(weight) = ahead {
        // The norm's weight and the scratch bind after the residual.
        let (binding, at) = enc.bind(weight)?;
        bindings.insert(3, binding);
        let (squares, count) = ahead_layout(enc.graph.layout(mm).ne[0]);
        bindings.insert(4, scratch(squares + 4 * count));
        params.z = [
            at.offset,
            0,
            u32::try_from(squares).map_err(|_| too_large())?,
            0,
        ];
        srcs.push(weight);
        store = Store::NormAhead;
    }
    if let Some(Activation::SiluMul(_, mul)) = activation {
        let (gate, up) = (
            enc.graph.data(b)?,
            enc.graph.data(enc.graph.node(mul).src[1])?,
        );
        // The up value's distance from the gate's, in the shared binding
        // (wrapping: u32 arithmetic in the kernel wraps the same way).
        params.y[2] = (up.offset as u64).wrapping_sub(gate.offset as u64) as u32;
        prologue = Prologue::SiluMul;
    } else if let Some(Activation::SoftMax(sm)) = activation {
        let Op::SoftMax { scale } = enc.graph.node(sm).op else {
            return Err(enc.device.error("a soft_max fold of another op"));
        };
        params.y = [0, scale.to_bits(), 0, 0];
        let mask = enc.graph.node(sm).src.get(1).copied();
        if let Some(mask) = mask {
            let (binding, at) = enc.bind(mask)?;
            bindings.insert(2, binding);
            params.y[0] = at.offset;
            srcs.push(mask);
        }
        prologue = Prologue::SoftMax {
            masked: mask.is_some(),
        };
    } else if let Some(Activation::Ahead(norm)) = activation {
        let Op::RmsNorm { eps } = enc.graph.node(norm).op else {
            return Err(enc.device.error("a norm run ahead of another op"));
        };
        let len = enc.graph.layout(b).ne[0];
        let (squares, count) = ahead_layout(len);
        bindings[1] = scratch(squares + 4 * count);
        let weighted = Layout::contiguous(DType::F32, [len, 1, 1, 1])?;
        params.b = TensorParams::new(&weighted, 0).ok_or_else(too_large)?;
        params.y = [
            u32::try_from(squares).map_err(|_| too_large())?,
            eps.to_bits(),
            u32::try_from(count).map_err(|_| too_large())?,
            0,
        ];
        prologue = Prologue::Ahead;
    } else if let Some(Activation::Norm(norm, mul)) = activation {
        let (center, eps) = match enc.graph.node(norm).op {
            Op::Norm { eps } => (true, eps),
            Op::RmsNorm { eps } => (false, eps),
            other => {
                return Err(enc
                    .device
                    .error(format!("a mat-vec cannot fold {}", other.name())))
            }
        };
        let weight = enc.graph.node(mul).src[1];
        let (binding, at) = enc.bind(weight)?;
        bindings.insert(2, binding);
        params.y = [at.offset, eps.to_bits(), 0, 0];
        srcs.push(weight);
        prologue = Prologue::Norm {
            center,
            weight_bytes: enc.graph.layout(weight).dtype.block_bytes(),
        };
    }
    params.y[3] = u32::from(quads_aligned(&params, prologue));
    let mut name = product_name(residual.is_some(), ahead.is_some(), prologue).to_string();
    let mut cast = None;
    if matches!(kind, Kind::Vec(_)) && vec_casts(enc.device, enc.graph.layout(a)) {
        if let Some((dispatch, ahead)) =
            cast_for_vec(enc, [a, b], prologue, defs, &mut bindings, &mut params)
        {
            cast = Some(dispatch);
            prologue = Prologue::Cast { ahead };
            name.push_str("_cast");
        }
    }
    let name = name.as_str();
    let key = match kind {
        Kind::Tiled { .. } | Kind::Coop { .. } if ahead.is_some() => {
            return Err(enc
                .device
                .error("a norm is run ahead only by the mat-vec kernel"))
        }
        Kind::Tiled { wide } if residual.is_none() && prologue == Prologue::None => {
            let name = if wide { "mul_mm_wide" } else { "mul_mm" };
            key(enc, name, &srcs, MM[usize::from(wide)], defs, false, MM_WG)
        }
        Kind::Coop { narrow } if matches!(prologue, Prologue::None | Prologue::SiluMul) => {
            // A folded silu x up is computed by the cast (silu_mul_fits
            // checked that the product has one).
            let up = (prologue == Prologue::SiluMul).then_some(params.y[2]);
            let cast = cast_activations(enc, a, b, up, defs, &mut bindings, &mut params);
            if up.is_some() && cast.is_none() {
                return Err(enc
                    .device
                    .error("no scratch buffer for the activations of a folded silu x up"));
            }
            let body = MM_COOP[usize::from(residual.is_some())][usize::from(cast.is_some())]
                [usize::from(narrow)];
            let coop = KernelKey {
                enables: COOP_ENABLES,
                // Activations load through vec4 views (cast, or where aligned: p.y.w).
                wide: true,
                ..key(enc, "mul_mm_coop", &srcs, body, defs, true, COOP_WG)
            };
            if let Some(cast) = cast {
                let mut out = vec![cast];
                out.extend(dispatch(enc, coop, bindings, srcs.len(), params, count));
                return Ok(out);
            }
            coop
        }
        Kind::Tiled { .. } | Kind::Coop { .. } => {
            return Err(enc.device.error(
                "a norm or soft_max is fused only into the mat-vec kernel \
                 (a residual add and a silu x up also into cooperative products)",
            ))
        }
        Kind::Vec(i) => {
            let (workgroup, groups) = vec_shape(enc.device, enc.graph.layout(a));
            let mut key = KernelKey {
                // Activations load through vec4 views where aligned (p.y.w).
                wide: true,
                groups,
                ..key(
                    enc,
                    name,
                    &srcs,
                    &VEC_BODIES[usize::from(enc.device.reduction != Reduction::Subgroup)][i]
                        [store as usize][prologue.index()],
                    defs,
                    true,
                    workgroup,
                )
            };
            let mut out: Vec<Dispatch> = cast.into_iter().collect();
            if ahead.is_some() {
                // The scratch, written as f32 words (`f`).
                key.srcs.push(DType::F32);
                out.extend(dispatch(enc, key, bindings, srcs.len() + 1, params, count));
            } else {
                out.extend(dispatch(enc, key, bindings, srcs.len(), params, count));
            }
            return Ok(out);
        }
    };
    Ok(dispatch(enc, key, bindings, srcs.len(), params, count))
}

/// The kernel name of a product with a `residual` add, a norm run `ahead`
/// and `prologue`.
fn product_name(residual: bool, ahead: bool, prologue: Prologue) -> &'static str {
    match (residual, prologue) {
        (true, Prologue::SiluMul) if ahead => "silu_mul_mul_mat_add_rms_norm",
        (true, Prologue::SiluMul) => "silu_mul_mul_mat_add",
        (true, _) if ahead => "mul_mat_add_rms_norm",
        (true, _) => "mul_mat_add",
        (false, Prologue::Ahead) => "rms_norm_ahead_mul_mat",
        (false, Prologue::None | Prologue::Cast { .. }) => "mul_mat",
        (false, Prologue::Norm { center: false, .. }) => "rms_norm_mul_mat",
        (false, Prologue::Norm { center: true, .. }) => "norm_mul_mat",
        (false, Prologue::SiluMul) => "silu_mul_mul_mat",
        (false, Prologue::SoftMax { .. }) => "soft_max_mul_mat",
    }
}
