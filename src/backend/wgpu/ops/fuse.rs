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
//!   writes the copy's bytes, converting as the copy would.
//!
//! Each computes what the pair does, operation for operation.

use super::{elementwise, norm, rope, softmax, supports, Ctx, Device};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::Result;

/// A fusable pair, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fusion {
    NormMul,
    CausalSoftMax,
    SiluMul,
    RopeCpy,
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
        _ => return None,
    };
    let feeds_only_a = b.src.first() == Some(&first) && !b.src[1..].contains(&first);
    let shapes_fit = match fusion {
        // The copy's bytes are addressed with the rope's shape.
        Fusion::RopeCpy => a.layout.is_contiguous() && b.layout.is_contiguous(),
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

/// The dispatches of `first` fused into `ctx`'s node.
pub fn encode(ctx: &Ctx, fusion: Fusion, first: TensorId) -> Result<Vec<Dispatch>> {
    let node = ctx.graph.node(first);
    let input = node.src[0];
    match (fusion, node.op) {
        (Fusion::NormMul, op) => norm::encode_rows(ctx, op, input, Some(ctx.src(1))),
        (Fusion::CausalSoftMax, Op::DiagMaskInf { n_past }) => {
            softmax::encode_causal(ctx, input, n_past)
        }
        (Fusion::SiluMul, _) => elementwise::encode_silu_mul(ctx, input),
        (Fusion::RopeCpy, _) => rope::encode_into(ctx, first),
        _ => Err(ctx.dev.error("a fusion of other ops")),
    }
}
