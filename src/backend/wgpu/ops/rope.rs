//! rope, normal and neox pairing, with YaRN: one invocation per rotated pair
//! (plus one per value past n_dims). The YaRN corr dims and magnitude scale
//! are computed here with the reference's own code, so the kernel only
//! evaluates per-pair angles.

use super::{key, Ctx};
use crate::backend::cpu::{yarn_corr_dims, yarn_mscale};
use crate::backend::wgpu::params::TensorParams;
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, RopeMode, RopeParams, TensorId};
use crate::tensor::Layout;
use crate::{DType, Result};

const BODY: &[&str] = &[include_str!("../../../../wgsl/rope.wgsl")];

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let t = graph.layout(node.src[0]).dtype;
    matches!(t, DType::F32 | DType::F16)
        && node.layout.dtype == t
        && u32::try_from(graph.layout(node.src[0]).n_elements()).is_ok()
}

/// The op words: `x` = n_dims, neox, freq_base, freq_scale; `y` = ext_factor,
/// magnitude scale, corr dims.
fn words(p: &RopeParams) -> Option<([u32; 4], [u32; 4])> {
    let corr = yarn_corr_dims(p);
    let mscale = yarn_mscale(p);
    let x = [
        u32::try_from(p.n_dims).ok()?,
        (p.mode == RopeMode::Neox) as u32,
        p.freq_base.to_bits(),
        p.freq_scale.to_bits(),
    ];
    let y = [
        p.ext_factor.to_bits(),
        mscale.to_bits(),
        corr[0].to_bits(),
        corr[1].to_bits(),
    ];
    Some((x, y))
}

pub fn encode(ctx: &Ctx) -> Result<Vec<Dispatch>> {
    let Op::Rope(rope) = ctx.op() else {
        return Err(ctx.dev.error("rope encoder got another op"));
    };
    dispatch(ctx, rope, [ctx.src(0), ctx.src(1)], None)
}

/// The rope node `rope_node` written straight into `ctx`'s node, a
/// contiguous copy of its result (converted to the copy's type).
pub fn encode_into(ctx: &Ctx, rope_node: TensorId) -> Result<Vec<Dispatch>> {
    let node = ctx.graph.node(rope_node);
    let Op::Rope(rope) = node.op else {
        return Err(ctx.dev.error("rope encoder got another op"));
    };
    let dst = Layout::contiguous(ctx.graph.layout(ctx.id).dtype, node.layout.ne)?;
    dispatch(ctx, rope, [node.src[0], node.src[1]], Some(dst))
}

/// Rotates `srcs[0]` at the positions `srcs[1]` into `ctx`'s node, whose
/// bytes are addressed as `dst` when given.
fn dispatch(
    ctx: &Ctx,
    rope: RopeParams,
    srcs: [TensorId; 2],
    dst: Option<Layout>,
) -> Result<Vec<Dispatch>> {
    let (bindings, mut params) = ctx.bind_all(&srcs)?;
    if let Some(dst) = dst {
        params.d = TensorParams::new(&dst, params.d.offset as usize)
            .ok_or_else(|| ctx.dev.error("rope's copy is too large to address"))?;
    }
    (params.x, params.y) =
        words(&rope).ok_or_else(|| ctx.dev.error(format!("rope n_dims {}", rope.n_dims)))?;
    let layout = ctx.graph.layout(srcs[0]);
    let items = (layout.ne[0] - rope.n_dims / 2) * layout.n_rows();
    let items = u32::try_from(items).map_err(|_| ctx.dev.error("rope is too large"))?;
    let wg = ctx.workgroup(256);
    Ok(vec![Dispatch {
        key: key(ctx, "rope", &srcs, BODY, "", false, wg),
        bindings,
        params,
        workgroups: ctx.grid(items.div_ceil(wg)),
    }])
}
