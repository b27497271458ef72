//! The cooperative-matrix tiled kernel's variants (`wgsl/mul_mm_coop.wgsl`)
//! and the cast of its activations to f16 (`wgsl/mul_mm_cast.wgsl`).

use super::{key, OpEncoder, MM_TILES, QUANT};
use crate::backend::wgpu::ops::decoders::units_per_row;
use crate::backend::wgpu::params::Params;
use crate::backend::wgpu::plan::{Binding, Dispatch};
use crate::backend::wgpu::{Device, Reduction};
use crate::graph::TensorId;

const COOP: &str = include_str!("../../../../../wgsl/mul_mm_coop.wgsl");
pub(super) const COOP_ENABLES: &str = "enable f16;\nenable wgpu_cooperative_matrix;\n";

/// The tiled kernel on cooperative matrices: 128 x 128 output tiles (they
/// measured faster than 64 x 64 ones on every llama shape on an H200 but
/// the 135M one, where they lose 10%), or 128 x 64 for small products
/// ([`COOP_NARROW_BELOW`]); eight subgroups of 32. `COOP_SHARED`: the f16
/// tiles, the subgroups' result scratch and the reduction scratch.
macro_rules! coop_body {
    ($cast:literal, $tn:literal) => {
        &[
            QUANT,
            concat!(
                "const CAST: bool = ",
                $cast,
                ";\nconst TN: u32 = ",
                $tn,
                "u;\n"
            ),
            MM_TILES,
            COOP,
        ]
    };
}
/// The cooperative kernel by [cast][narrow]: reading activations cast by
/// `MM_CAST` first or as they are, in tiles of 128 or 64 columns.
pub(super) const MM_COOP: [[&[&str]; 2]; 2] = [
    [coop_body!("false", "128"), coop_body!("false", "64")],
    [coop_body!("true", "128"), coop_body!("true", "64")],
];
const MM_CAST: &[&str] = &[QUANT, include_str!("../../../../../wgsl/mul_mm_cast.wgsl")];
const CAST_WG: u32 = 256;
pub(super) const COOP_TILE: usize = 128;
/// Products with fewer 128 x 128 tiles than this take 128 x 64 ones, so
/// that their workgroups fill more of the GPU; narrow tiles decode each
/// weight for half as many columns, so only small products gain (on an
/// H100, pp512 of the 135M shape 45-47k -> 50-51k tok/s with every
/// product narrow, the 1B shape's unchanged below 264 tiles, the 8B
/// shape's 6,500-6,600 -> 5,470 with its 128- and 192-tile products narrow).
const COOP_NARROW_BELOW: usize = 128;

/// [`COOP_NARROW_BELOW`], or `WGINFER_COOP_NARROW_BELOW` (a tile count),
/// for tuning on new devices.
pub(super) fn coop_narrow_below() -> usize {
    static BELOW: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BELOW.get_or_init(|| {
        std::env::var("WGINFER_COOP_NARROW_BELOW")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(COOP_NARROW_BELOW)
    })
}
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

/// The dispatch casting the activations `b` of a cooperative product with
/// weights `a` into the device's cast scratch (mul_mm_cast.wgsl), with
/// `bindings[1]` and `params.b` pointed there; `None` (nothing changed)
/// when the scratch cannot hold them.
pub(super) fn cast_activations(
    enc: &OpEncoder,
    a: TensorId,
    b: TensorId,
    defs: &'static str,
    bindings: &mut [Binding],
    params: &mut Params,
) -> Option<Dispatch> {
    // `WGINFER_COOP_CAST=0` keeps the activations as they are, to compare.
    static KEEP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *KEEP.get_or_init(|| std::env::var("WGINFER_COOP_CAST").is_ok_and(|v| v.trim() == "0")) {
        return None;
    }
    let lb = enc.graph.layout(b);
    let columns = lb.ne[1..].iter().product::<usize>();
    // At least the decoder's units of a row (exactly, for float rows).
    let units = units_per_row(lb.ne[0]);
    let invocations = units
        .checked_mul(columns)
        .filter(|&n| n <= u32::MAX as usize)?;
    let bytes = invocations as u64 * 16;
    let buffer = enc.device.cast_scratch(bytes)?;
    let scratch = Binding {
        buffer,
        offset: 0,
        size: bytes,
    };
    let mut cast_params = Params {
        a: params.b,
        ..Default::default()
    };
    cast_params.d.offset = 0;
    let mut cast_key = key(enc, "mul_mm_cast", &[b], MM_CAST, defs, false, CAST_WG);
    cast_key.name = format!("mul_mm_cast_{}", enc.graph.layout(a).dtype.name());
    let cast = Dispatch {
        key: cast_key,
        bindings: vec![bindings[1].clone(), scratch.clone()],
        params: cast_params,
        workgroups: enc.grid(invocations.div_ceil(CAST_WG as usize) as u32),
    };
    bindings[1] = scratch;
    params.b.offset = 0;
    Some(cast)
}

#[cfg(test)]
mod tests;
