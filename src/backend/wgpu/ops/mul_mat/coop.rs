//! The cooperative-matrix tiled kernel's variants (`wgsl/mul_mm_coop.wgsl`)
//! and the cast of its activations to f16 (`wgsl/mul_mm_cast.wgsl`), which
//! mat-vecs may read too (`WgpuOptions::matvec_cast_from`).

use super::vec_bodies::{QUANT, STORE_SUM, STORE_SUM_PLUS_C};
use super::{key, OpEncoder, MM_TILES};
use crate::backend::wgpu::ops::decoders::units_per_row;
use crate::backend::wgpu::params::{Params, TensorParams};
use crate::backend::wgpu::plan::{Binding, Dispatch};
use crate::backend::wgpu::tunable::Tunable;
use crate::backend::wgpu::{Device, Reduction};
use crate::graph::{Graph, TensorId};

const COOP: &str = include_str!("../../../../../wgsl/mul_mm_coop.wgsl");
pub(super) const COOP_ENABLES: &str = "enable f16;\nenable wgpu_cooperative_matrix;\n";

/// The tiled kernel on cooperative matrices: 128 x 128 output tiles (they
/// measured faster than 64 x 64 ones on every llama shape on an H200 but
/// the 135M one, where they lose 10%), or 128 x 64 for small products
/// ([`COOP_NARROW_BELOW`]); eight subgroups of 32. `COOP_SHARED`: the f16
/// tiles, the subgroups' result scratch and the reduction scratch.
macro_rules! coop_body {
    ($cast:literal, $tn:literal, $store:expr) => {
        &[
            QUANT,
            concat!(
                "const CAST: bool = ",
                $cast,
                ";\nconst TN: u32 = ",
                $tn,
                "u;\n"
            ),
            $store,
            MM_TILES,
            COOP,
        ]
    };
}
/// The cooperative kernel by [residual][cast][narrow]: storing the sums,
/// or the sums plus a residual (a fused `add`); reading activations cast
/// by `MM_CAST` first or as they are; in tiles of 128 or 64 columns.
pub(super) const MM_COOP: [[[&[&str]; 2]; 2]; 2] = [
    [
        [
            coop_body!("false", "128", STORE_SUM),
            coop_body!("false", "64", STORE_SUM),
        ],
        [
            coop_body!("true", "128", STORE_SUM),
            coop_body!("true", "64", STORE_SUM),
        ],
    ],
    [
        [
            coop_body!("false", "128", STORE_SUM_PLUS_C),
            coop_body!("false", "64", STORE_SUM_PLUS_C),
        ],
        [
            coop_body!("true", "128", STORE_SUM_PLUS_C),
            coop_body!("true", "64", STORE_SUM_PLUS_C),
        ],
    ],
];
const CAST: &str = include_str!("../../../../../wgsl/mul_mm_cast.wgsl");
/// The cast of the activations as they are, and of `silu(gate) * up` (a
/// folded silu x up, in the binary kernel's order; see [`cast_activations`]).
pub(super) const MM_CAST: [&[&str]; 2] = [
    &[
        QUANT,
        "fn cast_load(byte: u32) -> f32 { return load_a(byte); }\n",
        CAST,
    ],
    &[
        QUANT,
        "fn cast_load(byte: u32) -> f32 {\n\
         \x20   let g = load_a(byte);\n\
         \x20   return g / (1.0 + exp(-g)) * load_a(byte + p.y.z);\n}\n",
        CAST,
    ],
];
const CAST_WG: u32 = 256;
pub(super) const COOP_TILE: usize = 128;
/// Products with fewer 128 x 128 tiles than this take 128 x 64 ones, so
/// that their workgroups fill more of the GPU; narrow tiles decode each
/// weight for half as many columns, so only small products gain (on an
/// H100, pp512 of the 135M shape 45-47k -> 50-51k tok/s with every
/// product narrow, the 1B shape's unchanged below 264 tiles, the 8B
/// shape's 6,500-6,600 -> 5,470 with its 128- and 192-tile products narrow).
/// `WGINFER_COOP_NARROW_BELOW` (a tile count) tunes it.
pub(super) static COOP_NARROW_BELOW: Tunable = Tunable::new("WGINFER_COOP_NARROW_BELOW", 128);
pub(super) const COOP_WG: u32 = 256;
const COOP_SHARED: u32 = 2 * 128 * 72 * 2 + 8 * 256 * 4 + COOP_WG * 4;

/// Whether the cooperative-matrix tiled kernel runs on the device: it
/// lists the 16x16x16 f16 shape (with subgroups of 32), the reductions use
/// subgroups (the kernel finds its quadrant by subgroup id) and the tiles fit.
pub(super) fn coop_fits(dev: &Device) -> bool {
    let l = &dev.gpu.limits;
    dev.gpu.coop_f16
        && dev.reduction == Reduction::Subgroup
        && l.max_compute_invocations_per_workgroup >= COOP_WG
        && l.max_compute_workgroup_size_x >= COOP_WG
        && l.max_compute_workgroup_storage_size >= COOP_SHARED
}

/// `WGINFER_COOP_CAST=0` keeps a cooperative product's activations as
/// they are, to compare.
pub(super) fn cast_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var("WGINFER_COOP_CAST").is_ok_and(|v| v.trim() == "0"))
}

/// Products with fewer row tiles than this read their activations as
/// they are: each workgroup of a column reads its activations once per
/// row tile, so with one tile (the attention's V times its weights, a
/// head's 64-128 rows) the cast only adds a pass over them.
/// `WGINFER_COOP_CAST_MIN_TILES` tunes it.
static CAST_MIN_ROW_TILES: Tunable = Tunable::new("WGINFER_COOP_CAST_MIN_TILES", 2);

/// The invocations (one per unit and column) and scratch bytes of the
/// cast of activations `b`, when they fit the kernel's indices and a
/// binding of the device.
pub(super) fn cast_size(dev: &Device, graph: &Graph, b: TensorId) -> Option<(u32, u64)> {
    let lb = graph.layout(b);
    let columns = lb.ne[1..].iter().product::<usize>();
    // At least the decoder's units of a row (exactly, for float rows).
    let invocations = units_per_row(lb.ne[0]).checked_mul(columns)?;
    let invocations = u32::try_from(invocations).ok()?;
    let bytes = u64::from(invocations) * 16;
    dev.cast_scratch_size(bytes).map(|_| (invocations, bytes))
}

/// Whether the activations `b` of a cooperative product go through the
/// cast (so that a silu x up may be folded into it).
pub(super) fn casts(dev: &Device, graph: &Graph, b: TensorId) -> bool {
    !cast_off() && cast_size(dev, graph, b).is_some()
}

/// The dispatch casting the activations `b` of a cooperative product with
/// weights `a` into the device's cast scratch (mul_mm_cast.wgsl), with
/// `bindings[1]` and `params.b` pointed there; `None` (nothing changed)
/// when the scratch cannot hold them. With `up`, the cast computes
/// `silu(b) * up` where up lies `up` bytes past b in b's binding.
pub(super) fn cast_activations(
    enc: &OpEncoder,
    a: TensorId,
    b: TensorId,
    up: Option<u32>,
    defs: &'static str,
    bindings: &mut [Binding],
    params: &mut Params,
) -> Option<Dispatch> {
    // A folded silu x up needs the cast; otherwise it pays only where
    // several row tiles read each activation.
    let row_tiles = enc.graph.layout(a).ne[1].div_ceil(COOP_TILE);
    if cast_off() || (up.is_none() && row_tiles < CAST_MIN_ROW_TILES.get()) {
        return None;
    }
    let (invocations, bytes) = cast_size(enc.device, enc.graph, b)?;
    let buffer = enc.device.cast_scratch(bytes)?;
    let scratch = Binding {
        buffer,
        offset: 0,
        size: bytes,
    };
    let cast = cast_into(
        enc,
        [a, b],
        (&bindings[1], params.b),
        up,
        defs,
        (&scratch, 0),
        invocations,
    );
    bindings[1] = scratch;
    params.b.offset = 0;
    Some(cast)
}

/// The cast dispatch (mul_mm_cast.wgsl) of the activations bound by
/// `source` (and described by its params) into `target` from its byte
/// `offset`, for weights `a` and activations of `b`'s type: `invocations`
/// (one per unit and column, see [`cast_size`]) write 16 bytes each.
pub(super) fn cast_into(
    enc: &OpEncoder,
    [a, b]: [TensorId; 2],
    (source, described): (&Binding, TensorParams),
    up: Option<u32>,
    defs: &'static str,
    (target, offset): (&Binding, u32),
    invocations: u32,
) -> Dispatch {
    let mut cast_params = Params {
        a: described,
        ..Default::default()
    };
    cast_params.d.offset = offset;
    cast_params.y[2] = up.unwrap_or(0);
    let body = MM_CAST[usize::from(up.is_some())];
    let mut cast_key = key(enc, "mul_mm_cast", &[b], body, defs, false, CAST_WG);
    let kind = if up.is_some() { "silu_mul_" } else { "" };
    cast_key.name = format!("mul_mm_cast_{kind}{}", enc.graph.layout(a).dtype.name());
    Dispatch {
        key: cast_key,
        bindings: vec![source.clone(), target.clone()],
        params: cast_params,
        workgroups: enc.grid(invocations.div_ceil(CAST_WG)),
    }
}

#[cfg(test)]
mod tests;
