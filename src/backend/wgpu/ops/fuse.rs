//! Pairs of nodes that one dispatch computes, as llama.cpp's GPU backends
//! fuse them: the first node's only reader is the second, which runs right
//! after it, so the intermediate is never written or read back.
//!
//! - `rms_norm` (or `norm`) then `mul` by a weight: the norm kernel scales
//!   each value by the weight as it stores it;
//! - `diag_mask_inf` then `soft_max` without a mask: soft_max masks as it
//!   reads;
//! - `silu` then `mul`: one binary kernel computes `silu(a) * b`;
//! - `rope` then a contiguous `cpy` (the store into the KV cache): rope
//!   writes the copy's bytes, converting as the copy would;
//! - `rope` then a `set_rows` at the rope's positions (the store into the K
//!   cache): rope writes each token's heads into its cache row;
//! - a mat-vec `mul_mat` then the `add` of a residual (the attention output
//!   and FFN down projections): the mat-vec kernel adds as it stores, and
//!   so does a prompt's product on cooperative matrices;
//! - and one triple: `norm` or `rms_norm`, the `mul` by its weight, and the
//!   mat-vec reading the product: the mat-vec normalises its activations as
//!   it loads them ([`norm_into_mat_vec`]); likewise `silu`, the `mul` by up
//!   and the mat-vec of the product, with the residual add after it when
//!   that fits ([`silu_mul_into_mat_vec`]); a prompt's product on
//!   cooperative matrices computes `silu(gate) * up` in the cast of its
//!   activations instead.
//!
//! And a product stores straight into the contiguous copy of a permuted
//! view of it ([`mul_mat_into_cont`]: the attention's heads merged side by
//! side after V x weights), so the copy's dispatch goes away.
//!
//! Each computes what the pair does, operation for operation.

use super::{elementwise, mul_mat, norm, rope, softmax, supports, Device, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::tensor::MAX_DIMS;
use crate::{DType, Result};

/// A fusable pair, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fusion {
    NormMul,
    CausalSoftMax,
    SiluMul,
    RopeCpy,
    RopeSetRows,
    MulMatAdd,
}

/// Whether `norm`, the `mul` by its weight and the mat-vec `mm` reading
/// the product run as one mat-vec that normalises its activations as it
/// loads them (the q/k/v and gate/up projections after their norms): the
/// norm and the product each have that one reader.
pub fn norm_into_mat_vec(
    dev: &Device,
    graph: &Graph,
    norm: TensorId,
    mul: TensorId,
    mm: TensorId,
    readers: &mut impl FnMut(TensorId) -> u32,
) -> bool {
    let ops = (graph.node(norm).op, graph.node(mul).op, graph.node(mm).op);
    matches!(
        ops,
        (Op::RmsNorm { .. } | Op::Norm { .. }, Op::Mul, Op::MulMat)
    ) && folds_into(dev, graph, [norm, mul, mm], readers, || {
        mul_mat::norm_fits(dev, graph, norm, mul, mm)
    })
}

/// Whether `silu` (of a gate), the `mul` by up and the mat-vec `mm` reading
/// the product run as one mat-vec that computes `silu(gate) * up` as it
/// loads its activations (the FFN down projection); the silu and the
/// product each have that one reader.
pub fn silu_mul_into_mat_vec(
    dev: &Device,
    graph: &Graph,
    silu: TensorId,
    mul: TensorId,
    mm: TensorId,
    readers: &mut impl FnMut(TensorId) -> u32,
) -> bool {
    let ops = (graph.node(silu).op, graph.node(mul).op, graph.node(mm).op);
    matches!(ops, (Op::Silu, Op::Mul, Op::MulMat))
        && folds_into(dev, graph, [silu, mul, mm], readers, || {
            mul_mat::silu_mul_fits(dev, graph, silu, mul, mm)
        })
}

/// Whether the rms_norm `norm` of `y` (a mat-vec `producer` plus its
/// residual), the `mul` by its weight and the mat-vec `mm` reading the
/// product run as two dispatches: `producer` stores y times the weight and
/// y's sums of squares beside y, and `mm` dots its rows with the former and
/// scales its sums by the norm of the latter. Unlike the folds above it
/// costs each workgroup of `mm` a quarter as many extra loads as folding
/// the norm would (one sum per four activations), so it takes no size limit (an H100 decoded the
/// 1B shape 9% and the 8B shape 4% faster than with the norm folded into
/// the mat-vec or run alone, the 135M shape 1.4% slower).
pub fn norm_ahead(
    dev: &Device,
    graph: &Graph,
    producer: TensorId,
    y: TensorId,
    [norm, mul, mm]: [TensorId; 3],
    readers: &mut impl FnMut(TensorId) -> u32,
) -> bool {
    let ops = (graph.node(norm).op, graph.node(mul).op, graph.node(mm).op);
    matches!(ops, (Op::RmsNorm { .. }, Op::Mul, Op::MulMat))
        && folds_into(dev, graph, [norm, mul, mm], readers, || {
            mul_mat::ahead_fits(dev, graph, producer, y, [norm, mul, mm])
        })
}

/// Whether the soft_max `sm` and the mat-vec `mm` weighing V by it run as
/// one mat-vec that computes the weights as it loads them (a decode step's
/// attention): the soft_max has that one reader.
pub fn softmax_into_mat_vec(
    dev: &Device,
    graph: &Graph,
    sm: TensorId,
    mm: TensorId,
    readers: &mut impl FnMut(TensorId) -> u32,
) -> bool {
    let n = graph.node(sm);
    matches!((n.op, graph.node(mm).op), (Op::SoftMax { .. }, Op::MulMat))
        && !n.is_output
        && n.view_of.is_none()
        && mul_mat::softmax_fits(dev, graph, sm, mm)
        && [sm, mm].iter().all(|&t| supports(dev, graph, t))
        && readers(sm) == 1
}

/// Where the contiguous copy `cpy` of a permuted view of the product `mm`
/// holds each of `mm`'s elements: the byte strides by `mm`'s dims, when
/// the product may store there itself (f32 both, the view the product's
/// only reader and the copy the view's).
pub fn mul_mat_into_cont(
    dev: &Device,
    graph: &Graph,
    mm: TensorId,
    cpy: TensorId,
    readers: &mut impl FnMut(TensorId) -> u32,
) -> Option<[usize; MAX_DIMS]> {
    let (product, copy) = (graph.node(mm), graph.node(cpy));
    let &[view] = copy.src.as_slice() else {
        return None;
    };
    let v = graph.node(view);
    let plain = product.op == Op::MulMat
        && copy.op == Op::Cpy
        && v.op == Op::View
        && v.view_of == Some((mm, 0))
        && !product.is_output
        && !v.is_output
        && product.layout.dtype == DType::F32
        && copy.layout.dtype == DType::F32
        && product.layout.is_contiguous()
        && copy.layout.is_contiguous()
        && supports(dev, graph, mm);
    // The view reads the product twice over (as its source and as its
    // bytes' owner), and nothing else may.
    if !plain || readers(mm) != 2 || readers(view) != 1 {
        return None;
    }
    // Each dim of the view must be one of the product's, moved.
    let (pl, vl) = (&product.layout, &v.layout);
    let mut strides = [0; MAX_DIMS];
    let mut taken = [false; MAX_DIMS];
    for j in (0..MAX_DIMS).filter(|&j| vl.ne[j] > 1) {
        let i =
            (0..MAX_DIMS).find(|&i| !taken[i] && pl.ne[i] == vl.ne[j] && pl.nb[i] == vl.nb[j])?;
        taken[i] = true;
        strides[i] = copy.layout.nb[j];
    }
    (0..MAX_DIMS)
        .all(|i| taken[i] || pl.ne[i] == 1)
        .then_some(strides)
}

/// What folding `first` and `mul` into the mat-vec `mm` needs beyond the
/// ops' kinds: neither is an output or a view, the kernel `fits`, the device
/// runs all three, and `mm` is the only reader of each.
fn folds_into(
    dev: &Device,
    graph: &Graph,
    [first, mul, mm]: [TensorId; 3],
    readers: &mut impl FnMut(TensorId) -> u32,
    fits: impl FnOnce() -> bool,
) -> bool {
    [first, mul]
        .iter()
        .all(|&t| !graph.node(t).is_output && graph.node(t).view_of.is_none())
        && fits()
        && [first, mul, mm].iter().all(|&t| supports(dev, graph, t))
        && readers(first) == 1
        && readers(mul) == 1
}

/// The fusion of `first` into `second`, if they form one. `readers` counts
/// the nodes that read `first` (called only once the ops match).
pub fn find(
    dev: &Device,
    graph: &Graph,
    first: TensorId,
    second: TensorId,
    readers: impl FnOnce() -> u32,
) -> Option<Fusion> {
    let (a, b) = (graph.node(first), graph.node(second));
    let fusion = match (a.op, b.op) {
        (Op::RmsNorm { .. } | Op::Norm { .. }, Op::Mul) => Fusion::NormMul,
        (Op::DiagMaskInf { .. }, Op::SoftMax { .. }) if b.src.len() == 1 => Fusion::CausalSoftMax,
        (Op::Silu, Op::Mul) => Fusion::SiluMul,
        (Op::Rope(_), Op::Cpy) => Fusion::RopeCpy,
        (Op::Rope(_), Op::SetRows) if rope::set_rows_fits(graph, first, second) => {
            Fusion::RopeSetRows
        }
        (Op::MulMat, Op::Add) if mul_mat::residual_fits(dev, graph, first, second) => {
            Fusion::MulMatAdd
        }
        _ => return None,
    };
    let feeds_only_a = b.src.first() == Some(&first) && !b.src[1..].contains(&first);
    let shapes_fit = match fusion {
        // The copy's bytes are addressed with the rope's shape.
        Fusion::RopeCpy => a.layout.is_contiguous() && b.layout.is_contiguous(),
        // Checked by set_rows_fits: the rows hold the rope's heads.
        Fusion::RopeSetRows => true,
        _ => a.layout.ne == b.layout.ne,
    };
    let fuses = feeds_only_a
        && shapes_fit
        && !a.is_output
        && a.view_of.is_none()
        && supports(dev, graph, first)
        && supports(dev, graph, second)
        && readers() == 1;
    fuses.then_some(fusion)
}

/// The dispatches of `first` fused into `enc`'s node.
pub fn encode(enc: &OpEncoder, fusion: Fusion, first: TensorId) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(first);
    let input = node.src[0];
    match (fusion, node.op) {
        (Fusion::NormMul, op) => norm::encode_rows(enc, op, input, Some(enc.src(1))),
        (Fusion::CausalSoftMax, Op::DiagMaskInf { n_past }) => {
            softmax::encode_causal(enc, input, n_past)
        }
        (Fusion::SiluMul, _) => elementwise::encode_silu_mul(enc, input),
        (Fusion::RopeCpy, _) => rope::encode_into(enc, first),
        (Fusion::RopeSetRows, _) => rope::encode_set_rows(enc, first),
        (Fusion::MulMatAdd, _) => mul_mat::encode_plus_residual(enc, first, enc.src(1)),
        _ => Err(enc.device.error("a fusion of other ops")),
    }
}
