//! Mat-vecs whose activations are cast to f16 units first: which products
//! take the cast, and its dispatch (the cooperative kernel's cast, see
//! [`super::coop::cast_into`]).

use super::coop;
use super::vec_bodies::Prologue;
use super::OpEncoder;
use crate::backend::wgpu::params::Params;
use crate::backend::wgpu::plan::{Binding, Dispatch};
use crate::backend::wgpu::Device;
use crate::graph::TensorId;
use crate::tensor::Layout;

/// Whether a mat-vec of `weights` reads its activations cast to f16 first
/// ([`WgpuOptions::matvec_cast_from`]): block rows only, whose units the
/// cast writes whole.
///
/// [`WgpuOptions::matvec_cast_from`]: crate::backend::wgpu::WgpuOptions::matvec_cast_from
pub(super) fn vec_casts(dev: &Device, weights: &Layout) -> bool {
    weights.dtype.is_quantized()
        && !coop::cast_off()
        && weights.ne[0].saturating_mul(weights.ne[1]) >= dev.matvec_cast_from
}

/// The cast of a mat-vec's activations (`b`, with `prologue` applied)
/// to f16 units (mul_mm_cast.wgsl), with `bindings[1]` and `params.b`
/// pointed at them; with whether they lie beside a norm run ahead's sums
/// of squares. `None` (nothing changed) for prologues that need the
/// column's statistics, or where no scratch holds them.
pub(super) fn cast_for_vec(
    enc: &OpEncoder,
    [a, b]: [TensorId; 2],
    prologue: Prologue,
    defs: &'static str,
    bindings: &mut [Binding],
    params: &mut Params,
) -> Option<(Dispatch, bool)> {
    let (invocations, bytes) = coop::cast_size(enc.device, enc.graph, b)?;
    let (up, ahead) = match prologue {
        Prologue::None => (None, false),
        Prologue::SiluMul => (Some(params.y[2]), false),
        Prologue::Ahead => (None, true),
        _ => return None,
    };
    let (target, offset) = if ahead {
        // After the weighted values and their sums of squares, in the
        // same binding (which the mat-vec reads the sums from).
        let offset = bindings[1].size.next_multiple_of(16);
        let end = offset.checked_add(bytes)?;
        if end > crate::backend::wgpu::SCRATCH_BYTES {
            return None;
        }
        let target = Binding {
            buffer: enc.device.scratch().clone(),
            offset: 0,
            size: end,
        };
        (target, u32::try_from(offset).ok()?)
    } else {
        let buffer = enc.device.cast_scratch(bytes)?;
        let target = Binding {
            buffer,
            offset: 0,
            size: bytes,
        };
        (target, 0)
    };
    let cast = coop::cast_into(
        enc,
        [a, b],
        (&bindings[1], params.b),
        up,
        defs,
        (&target, offset),
        invocations,
    );
    // Block rows are whole units: k / 8 of them per column.
    let [k, n, b2, _] = params.b.ne;
    let column = k.checked_mul(2)?;
    params.b.nb = [
        2,
        column,
        column.checked_mul(n)?,
        column.checked_mul(n)?.checked_mul(b2)?,
    ];
    params.b.offset = offset;
    bindings[1] = target;
    Some((cast, ahead))
}
