//! rope, normal and neox pairing, with YaRN: one invocation per rotated pair
//! (plus one per value past n_dims). The YaRN corr dims and magnitude scale
//! come from [`RopeParams`]' methods, as the reference's do, so the kernel
//! only evaluates per-pair angles.

use super::{key, OpEncoder};
use crate::backend::wgpu::params::TensorParams;
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, RopeMode, RopeParams, TensorId};
use crate::tensor::Layout;
use crate::{DType, Result};

const BODY: &[&str] = &[include_str!("../../../../wgsl/rope.wgsl")];
/// Results stored where the destination's strides put them.
const STORE_STRIDED: &str = "fn dst_addr(i: vec4<u32>) -> u32 { return addr(p.d, i); }\n";
/// Results stored in the cache row named by the token's position (`b`);
/// an index past the rows (`p.d.ne.z`) is clamped to the last one, since a
/// kernel cannot fail (the reference reports it).
const STORE_AT_POSITION: &str = "fn dst_addr(i: vec4<u32>) -> u32 {\n\
    \x20   let row = u32(max(bitcast<i32>(b_word(addr(p.b, vec4<u32>(i.z, 0u, 0u, 0u)))), 0));\n\
    \x20   return addr(p.d, vec4<u32>(i.x, i.y, min(row, p.d.ne.z - 1u), i.w));\n}\n";

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
    let corr = p.yarn_corr_dims();
    let mscale = p.yarn_mscale();
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

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let Op::Rope(rope) = enc.op() else {
        return Err(enc.device.error("rope encoder got another op"));
    };
    dispatch(enc, rope, [enc.src(0), enc.src(1)], None)
}

/// Whether `set_rows` stores the rope `rope_node` by its own positions, so
/// rope can write the rows itself: the rows are the rope's heads of one
/// token each, and the indices are the rope's positions.
pub fn set_rows_fits(graph: &Graph, rope_node: TensorId, set_rows: TensorId) -> bool {
    let (r, s) = (graph.node(rope_node), graph.node(set_rows));
    let (lr, ls) = (r.layout, s.layout);
    s.src[1] == r.src[1]
        && lr.is_contiguous()
        && lr.ne[3] == 1
        && ls.ne[0] == lr.ne[0] * lr.ne[1]
        && u32::try_from(ls.nb[1]).is_ok()
}

/// The rope node `rope_node` written straight into the rows of `enc`'s
/// node, a set_rows at the rope's positions (see [`set_rows_fits`]).
pub fn encode_set_rows(enc: &OpEncoder, rope_node: TensorId) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(rope_node);
    let Op::Rope(rope) = node.op else {
        return Err(enc.device.error("rope encoder got another op"));
    };
    let [hd, heads, _, _] = node.layout.ne;
    let dst = enc.graph.layout(enc.id);
    let es = dst.dtype.block_bytes();
    let rows = Layout {
        dtype: dst.dtype,
        ne: [hd, heads, dst.ne[1], 1],
        nb: [es, es * hd, dst.nb[1], dst.nb[1] * dst.ne[1]],
    };
    dispatch(enc, rope, [node.src[0], node.src[1]], Some(rows))
}

/// The rope node `rope_node` written straight into `enc`'s node, a
/// contiguous copy of its result (converted to the copy's type).
pub fn encode_into(enc: &OpEncoder, rope_node: TensorId) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(rope_node);
    let Op::Rope(rope) = node.op else {
        return Err(enc.device.error("rope encoder got another op"));
    };
    let dst = Layout::contiguous(enc.graph.layout(enc.id).dtype, node.layout.ne)?;
    dispatch(enc, rope, [node.src[0], node.src[1]], Some(dst))
}

/// Rotates `srcs[0]` at the positions `srcs[1]` into `enc`'s node, whose
/// bytes are addressed as `dst` when given.
fn dispatch(
    enc: &OpEncoder,
    rope: RopeParams,
    srcs: [TensorId; 2],
    dst: Option<Layout>,
) -> Result<Vec<Dispatch>> {
    let defs = match dst {
        Some(_) if enc.graph.node(enc.id).op == Op::SetRows => STORE_AT_POSITION,
        _ => STORE_STRIDED,
    };
    let (bindings, mut params) = enc.bind_all(&srcs)?;
    if let Some(dst) = dst {
        params.d = TensorParams::new(&dst, params.d.offset as usize)
            .ok_or_else(|| enc.device.error("rope's copy is too large to address"))?;
    }
    (params.x, params.y) =
        words(&rope).ok_or_else(|| enc.device.error(format!("rope n_dims {}", rope.n_dims)))?;
    let layout = enc.graph.layout(srcs[0]);
    let items = (layout.ne[0] - rope.n_dims / 2) * layout.n_rows();
    let items = u32::try_from(items).map_err(|_| enc.device.error("rope is too large"))?;
    let wg = enc.workgroup(256);
    Ok(vec![Dispatch {
        key: key(enc, "rope", &srcs, BODY, defs, false, wg),
        bindings,
        params,
        workgroups: enc.grid(items.div_ceil(wg)),
    }])
}
