//! Whether the nodes around a product can run inside its mat-vec
//! dispatch (a residual add after it, a norm, soft_max or silu x up
//! before it), and how many repeated activation loads such a fold may cost.

use super::{casts, plan, Kind, VEC_ROWS};
use crate::backend::wgpu::tunable::Tunable;
use crate::backend::wgpu::Device;
use crate::graph::{Graph, Op, TensorId};
use crate::DType;

/// Whether `add`, reading the product `mm` as its first source, can be
/// folded into the product's store: the residual has the sum's type,
/// shape and strides (so it is addressed like the destination), and the
/// product runs as a mat-vec or on cooperative matrices.
pub fn residual_fits(dev: &Device, graph: &Graph, mm: TensorId, add: TensorId) -> bool {
    let residual = graph.node(add).src[1];
    let (lr, ld) = (graph.layout(residual), graph.layout(add));
    lr.dtype == DType::F32
        && lr.ne == ld.ne
        && lr.nb == ld.nb
        && *graph.layout(mm) == *ld
        && matches!(
            plan(dev, graph, mm),
            Some((Kind::Vec(_) | Kind::Coop { .. }, _, _))
        )
}

/// Whether the rms_norm `norm` of `y` (the result of a mat-vec plus
/// residual, `producer` its product), times the weight in `mul`, can be run
/// ahead by that mat-vec for the mat-vec `mm` reading the product: one f32
/// column, an f32 weight, both products mat-vecs, room in the device's
/// scratch, and bindings for the producer's five sources and their views.
pub fn ahead_fits(
    dev: &Device,
    graph: &Graph,
    producer: TensorId,
    y: TensorId,
    [norm, mul, mm]: [TensorId; 3],
) -> bool {
    let (n, w, p) = (graph.node(norm), graph.node(mul), graph.node(mm));
    let ly = graph.layout(y);
    let len = ly.ne[0];
    let weight = graph.layout(w.src[1]);
    let (squares, count) = super::ahead_layout(len);
    matches!(n.op, Op::RmsNorm { .. })
        && n.src[0] == y
        && w.src[0] == norm
        && w.src[1] != norm
        && p.src[1] == mul
        && p.src[0] != mul
        && ly.dtype == DType::F32
        && ly.ne == [len, 1, 1, 1]
        && ly.is_contiguous()
        && graph.layout(mul).ne == ly.ne
        && weight.dtype == DType::F32
        && weight.ne == ly.ne
        && weight.is_contiguous()
        && ((squares + 4 * count) as u64) <= crate::backend::wgpu::SCRATCH_BYTES
        && dev.gpu.limits.max_storage_buffers_per_shader_stage >= 10
        && [producer, mm]
            .iter()
            .all(|&t| matches!(plan(dev, graph, t), Some((Kind::Vec(0), _, _))))
}

/// Most activation values a folded mat-vec may load beyond its own (each
/// workgroup of four rows recomputes its columns' activations): up to here
/// a saved dispatch is worth more than the repeated loads (an H200 decodes
/// the 135M shape, whose largest fold loads 2^19, 8% faster with folds; the
/// 8B shape, at 2^23 to 2^25, 7% slower). `WGINFER_FOLD_MAX_LOADS` tunes it.
static FOLD_MAX_LOADS: Tunable = Tunable::new("WGINFER_FOLD_MAX_LOADS", 1 << 22);

/// Whether the activations of the mat-vec `mm` are cheap enough to
/// recompute in each of its workgroups. A `deferred` norm's fold loads
/// only the norm's weight beyond its own activations, so it may load 1.4x
/// as many (on an H100, folding the 1B shape's gate/up norm at 5.8M loads
/// decoded 5% faster; the 8B shape's q/k/v norm at 6.3M, 2-4% slower).
fn fold_is_cheap(graph: &Graph, mm: TensorId, deferred: bool) -> bool {
    let [k, m, _, _] = graph.layout(graph.node(mm).src[0]).ne;
    let loads = m.div_ceil(VEC_ROWS).saturating_mul(k);
    let limit = FOLD_MAX_LOADS.get();
    let limit = if deferred {
        limit.saturating_mul(7) / 5
    } else {
        limit
    };
    loads <= limit
}

/// Whether a folded norm `op` of `columns` columns scales the mat-vec's
/// sums rather than its activations (DEFER in mul_mat_vec_norm.wgsl): then
/// each workgroup loads its column once, as an unfused mat-vec does, and
/// the fold costs only the loads of the norm's weight.
fn scale_is_deferred(op: Op, columns: usize) -> bool {
    matches!(op, Op::RmsNorm { .. }) && columns == 1
}

/// Whether `norm` (norm or rms_norm of a row-major f32 `x`), times the 1-D
/// weight in `mul`, can be folded into the mat-vec `mm` that reads the
/// product as its activations: each workgroup normalises its columns as it
/// loads them.
pub fn norm_fits(dev: &Device, graph: &Graph, norm: TensorId, mul: TensorId, mm: TensorId) -> bool {
    let (n, w, p) = (graph.node(norm), graph.node(mul), graph.node(mm));
    let weight = graph.layout(w.src[1]);
    let x = graph.layout(n.src[0]);
    w.src[0] == norm
        && p.src[1] == mul
        && p.src[0] != mul
        && matches!(weight.dtype, DType::F32 | DType::F16)
        && weight.ne == [x.ne[0], 1, 1, 1]
        && x.dtype == DType::F32
        && x.ne == graph.layout(mul).ne
        && fold_is_cheap(graph, mm, scale_is_deferred(n.op, x.ne[1]))
        && matches!(plan(dev, graph, mm), Some((Kind::Vec(_), _, _)))
}

/// Whether the soft_max `sm` (of f32 scores with one column per head, the
/// scores of a decode step, and an f32 mask of one row or none) can be
/// folded into the mat-vec `mm` that weighs V by it.
pub fn softmax_fits(dev: &Device, graph: &Graph, sm: TensorId, mm: TensorId) -> bool {
    let (s, p) = (graph.node(sm), graph.node(mm));
    let scores = graph.layout(s.src[0]);
    let mask_fits = s.src.get(1).is_none_or(|&mask| {
        let l = graph.layout(mask);
        l.dtype == DType::F32 && l.nb[0] == 4 && l.ne[0] == scores.ne[0]
    });
    p.src[1] == sm
        && p.src[0] != sm
        && scores.dtype == DType::F32
        && scores.ne[1] == 1
        && scores.ne == s.layout.ne
        && mask_fits
        && fold_is_cheap(graph, mm, false)
        && matches!(plan(dev, graph, mm), Some((Kind::Vec(_), _, _)))
}

/// Whether `silu` of a gate, the `mul` by up and the product `mm` reading
/// their result can run as one mat-vec that computes `silu(gate) * up` as
/// it loads its activations, or (a prompt's product on cooperative
/// matrices) as the cast of its activations computing it: gate and up are
/// f32 views of one buffer with the same shape and strides (the halves of
/// a joined gate/up product).
pub fn silu_mul_fits(
    dev: &Device,
    graph: &Graph,
    silu: TensorId,
    mul: TensorId,
    mm: TensorId,
) -> bool {
    let (s, m, p) = (graph.node(silu), graph.node(mul), graph.node(mm));
    let (gate, up) = (s.src[0], m.src[1]);
    let (lg, lu) = (graph.layout(gate), graph.layout(up));
    // One buffer, bound whole, so the kernel reaches up from gate's binding.
    let same_buffer = match (graph.data(gate), graph.data(up)) {
        (Ok(g), Ok(u)) => {
            std::sync::Arc::ptr_eq(&g.buffer, &u.buffer)
                && g.buffer.size() as u64 <= super::super::max_binding_bytes(dev)
        }
        _ => false,
    };
    m.src[0] == silu
        && p.src[1] == mul
        && p.src[0] != mul
        && lg.dtype == DType::F32
        && lu.dtype == DType::F32
        && lg.ne == lu.ne
        && lg.nb == lu.nb
        && same_buffer
        && match plan(dev, graph, mm) {
            Some((Kind::Vec(_), _, _)) => fold_is_cheap(graph, mm, false),
            // The cast computes each activation once.
            Some((Kind::Coop { .. }, _, _)) => casts(dev, graph, gate),
            _ => false,
        }
}
