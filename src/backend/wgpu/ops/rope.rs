//! rope, normal and neox pairing, with YaRN: one invocation per rotated pair
//! (plus one per value past n_dims). The YaRN corr dims and magnitude scale
//! come from [`RopeParams`]' methods, as the reference's do, so the kernel
//! only evaluates per-pair angles. Frequency factors, where the node has
//! them, are one more source, read at the byte offset in `p.z.z`.

use super::{key, max_binding_bytes, supports as device_supports, Device, OpEncoder};
use crate::backend::wgpu::params::{Params, TensorParams};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, RopeMode, RopeParams, TensorId};
use crate::tensor::Layout;
use crate::{DType, Result};

const ROPE: &str = include_str!("../../../../wgsl/rope.wgsl");
/// Results stored where the destination's strides put them.
const STORE_STRIDED: &str = "fn rotated(row: vec4<u32>) -> bool { return true; }\n\
    fn store_out(i: vec4<u32>, v: f32) { store_d(addr(p.d, i), v); }\n";
/// Cache row `row` named by token `i.z`'s position (`b`); an index past the
/// rows (`p.d.ne.z`) is clamped to the last one, since a kernel cannot fail
/// (the reference reports it).
const K_ROW_ADDR: &str = "fn k_row_addr(i: vec4<u32>) -> u32 {\n\
    \x20   let row = u32(max(bitcast<i32>(b_word(addr(p.b, vec4<u32>(i.z, 0u, 0u, 0u)))), 0));\n\
    \x20   return addr(p.d, vec4<u32>(i.x, i.y, min(row, p.d.ne.z - 1u), i.w));\n}\n";
/// Results stored in the cache row of the token's position.
const STORE_AT_POSITION: &str = "fn rotated(row: vec4<u32>) -> bool { return true; }\n\
    fn store_out(i: vec4<u32>, v: f32) { store_d(k_row_addr(i), v); }\n";
/// The fused q/k rope and K/V store over the heads `[q | k | v]` of `a`:
/// q rotated in place (f32), k rotated into its cache row, v copied to
/// the V cache elements the i32 indices `c` name. The rows of `d` are K's
/// (`p.d.ne.y` heads), so `a` holds `p.a.ne.y - 2 p.d.ne.y` q heads. p.z:
/// the V cache's byte offset in d's binding, the indices' byte offset in
/// c's, the frequency factors' offset in e's, the V cache's element count
/// (an index past it is skipped, as set_rows does).
const STORE_Q_K_V: &str = "fn rotated(row: vec4<u32>) -> bool { return row.y < p.a.ne.y - p.d.ne.y; }\n\
    fn store_out(i: vec4<u32>, v: f32) {\n\
    \x20   let n_head_kv = p.d.ne.y;\n\
    \x20   let n_head = p.a.ne.y - 2u * n_head_kv;\n\
    \x20   if (i.y < n_head) {\n\
    \x20       a[addr(p.a, i) >> 2u] = bitcast<u32>(v);\n\
    \x20   } else if (i.y < n_head + n_head_kv) {\n\
    \x20       store_d(k_row_addr(i - vec4<u32>(0u, n_head, 0u, 0u)), v);\n\
    \x20   } else {\n\
    \x20       let channel = (i.y - n_head - n_head_kv) * p.a.ne.x + i.x;\n\
    \x20       let at = bitcast<i32>(c_word(p.z.y + 4u * (i.z * n_head_kv * p.a.ne.x + channel)));\n\
    \x20       if (at >= 0 && u32(at) < p.z.w) {\n\
    \x20           store_d(p.z.x + u32(at) * p.d.nb.x, v);\n\
    \x20       }\n\
    \x20   }\n}\n";
/// `freq_factor(pair)`: 1, or the factor the third source (`c`; `e` in the
/// fused q/k/v kernel, whose `c` holds the V indices) gives the pair.
const NO_FACTORS: &str = "fn freq_factor(pair: u32) -> f32 { return 1.0; }\n";
const FACTORS_C: &str = "fn freq_factor(pair: u32) -> f32 { return load_c(p.z.z + 4u * pair); }\n";
const FACTORS_E: &str = "fn freq_factor(pair: u32) -> f32 { return load_e(p.z.z + 4u * pair); }\n";
const BODY_STRIDED: [&[&str]; 2] = [
    &[STORE_STRIDED, NO_FACTORS, ROPE],
    &[STORE_STRIDED, FACTORS_C, ROPE],
];
const BODY_AT_POSITION: [&[&str]; 2] = [
    &[K_ROW_ADDR, STORE_AT_POSITION, NO_FACTORS, ROPE],
    &[K_ROW_ADDR, STORE_AT_POSITION, FACTORS_C, ROPE],
];
const BODY_Q_K_V: [&[&str]; 2] = [
    &[K_ROW_ADDR, STORE_Q_K_V, NO_FACTORS, ROPE],
    &[K_ROW_ADDR, STORE_Q_K_V, FACTORS_E, ROPE],
];

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let t = graph.layout(node.src[0]).dtype;
    matches!(t, DType::F32 | DType::F16)
        && node.layout.dtype == t
        && node
            .src
            .get(2)
            .is_none_or(|&f| graph.layout(f).dtype == DType::F32)
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
    dispatch(enc, rope, &enc.graph.node(enc.id).src, None)
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
    dispatch(enc, rope, &node.src, Some(rows))
}

/// The rope node `rope_node` written straight into `enc`'s node, a
/// contiguous copy of its result (converted to the copy's type).
pub fn encode_into(enc: &OpEncoder, rope_node: TensorId) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(rope_node);
    let Op::Rope(rope) = node.op else {
        return Err(enc.device.error("rope encoder got another op"));
    };
    let dst = Layout::contiguous(enc.graph.layout(enc.id).dtype, node.layout.ne)?;
    dispatch(enc, rope, &node.src, Some(dst))
}

/// Rotates `srcs[0]` at the positions `srcs[1]` (with the frequency
/// factors `srcs[2]`, if there) into `enc`'s node, whose bytes are
/// addressed as `dst` when given.
fn dispatch(
    enc: &OpEncoder,
    rope: RopeParams,
    srcs: &[TensorId],
    dst: Option<Layout>,
) -> Result<Vec<Dispatch>> {
    let factors = srcs.get(2).copied();
    let body = match dst {
        Some(_) if enc.graph.node(enc.id).op == Op::SetRows => BODY_AT_POSITION,
        _ => BODY_STRIDED,
    }[usize::from(factors.is_some())];
    let (mut bindings, mut params) = enc.bind_all(&srcs[..2])?;
    if let Some(f) = factors {
        // Sources come before the destination.
        let (binding, at) = enc.bind(f)?;
        bindings.insert(2, binding);
        params.z[2] = at.offset;
    }
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
        key: key(enc, "rope", srcs, body, "", false, wg),
        bindings,
        params,
        workgroups: enc.grid(items.div_ceil(wg)),
    }])
}

/// Whether the in-place rope of q (`q`), the rope of k (`k`) that `set_k`
/// stores at its positions, and the store `set_v` of v into the V cache
/// run as one dispatch: q, k and v are adjacent runs of heads in one f32
/// tensor (the joined q/k/v projection's result) with one token stride,
/// both ropes have the same parameters and positions, and the K and V
/// caches, like that tensor, live in buffers bound whole.
pub fn kv_store_fits(dev: &Device, graph: &Graph, [q, k, set_k, set_v]: [TensorId; 4]) -> bool {
    let (nq, nk, nsk, nsv) = (
        graph.node(q),
        graph.node(k),
        graph.node(set_k),
        graph.node(set_v),
    );
    let (Op::Rope(pq), Op::Rope(pk), Op::SetRows, Op::SetRows) = (nq.op, nk.op, nsk.op, nsv.op)
    else {
        return false;
    };
    let (q_src, v) = (nq.src[0], nsv.src[0]);
    let (lq, lk, lv) = (
        graph.layout(q_src),
        graph.layout(nk.src[0]),
        graph.layout(v),
    );
    let f32_bytes = DType::F32.block_bytes();
    let [hd, n_head, n, _] = lq.ne;
    let n_head_kv = lk.ne[1];
    let heads_fit = lq.dtype == DType::F32
        && nq.view_of == Some((q_src, 0))
        && pq == pk
        && nk.src[1..] == nq.src[1..]
        && nsk.src[0] == k
        && set_rows_fits(graph, k, set_k)
        && lq.nb[0] == f32_bytes
        && lq.nb[1] == hd * f32_bytes
        && lk.ne == [hd, n_head_kv, n, 1]
        && lk.nb[..3] == lq.nb[..3]
        && lv.ne == [hd * n_head_kv, n, 1, 1]
        && lv.nb[..2] == [f32_bytes, lq.nb[2]]
        && graph.layout(set_v).ne[0] == 1
        && graph.layout(set_v).dtype == graph.layout(set_k).dtype;
    if !heads_fit {
        return false;
    }
    let (Ok(dq), Ok(dk), Ok(dv), Ok(dsk), Ok(dsv)) = (
        graph.data(q_src),
        graph.data(nk.src[0]),
        graph.data(v),
        graph.data(set_k),
        graph.data(set_v),
    ) else {
        return false;
    };
    let same = |a: &crate::backend::BufferHandle, b: &crate::backend::BufferHandle| {
        std::sync::Arc::ptr_eq(a, b)
    };
    let whole = |b: &crate::backend::BufferHandle| b.size() as u64 <= max_binding_bytes(dev);
    same(&dq.buffer, &dk.buffer)
        && same(&dq.buffer, &dv.buffer)
        && dk.offset == dq.offset + n_head * hd * f32_bytes
        && dv.offset == dk.offset + n_head_kv * hd * f32_bytes
        && same(&dsk.buffer, &dsv.buffer)
        && whole(&dq.buffer)
        && whole(&dsk.buffer)
        && u32::try_from(graph.layout(set_v).n_elements()).is_ok()
        && [q, k, set_k, set_v]
            .iter()
            .all(|&t| device_supports(dev, graph, t))
}

/// The dispatch of [`kv_store_fits`]' four nodes; `enc` encodes `set_v`.
pub fn encode_kv_store(
    enc: &OpEncoder,
    q: TensorId,
    k: TensorId,
    set_k: TensorId,
) -> Result<Vec<Dispatch>> {
    let graph = enc.graph;
    let Op::Rope(rope) = graph.node(q).op else {
        return Err(enc.device.error("rope encoder got another op"));
    };
    let (q_src, positions) = (graph.node(q).src[0], graph.node(q).src[1]);
    let v_rows = enc.src(1);
    let factors = graph.node(q).src.get(2).copied();
    let [hd, n_head, n, _] = graph.layout(q_src).ne;
    let n_head_kv = graph.layout(graph.node(k).src[0]).ne[1];
    let (a, mut params_a) = enc.bind(q_src)?;
    params_a.ne[1] =
        u32::try_from(n_head + 2 * n_head_kv).map_err(|_| enc.device.error("too many heads"))?;
    let (b, params_b) = enc.bind(positions)?;
    let (c, params_c) = enc.bind(v_rows)?;
    let factors = factors.map(|f| enc.bind(f)).transpose()?;
    let (d, params_k) = enc.bind(set_k)?;
    let (d_v, params_v) = enc.bind(enc.id)?;
    if d_v.buffer != d.buffer || d_v.offset != d.offset {
        return Err(enc.device.error("the K and V caches bind apart"));
    }
    let cache = graph.layout(set_k);
    let es = cache.dtype.block_bytes();
    let rows = Layout {
        dtype: cache.dtype,
        ne: [hd, n_head_kv, cache.ne[1], 1],
        nb: [es, es * hd, cache.nb[1], cache.nb[1] * cache.ne[1]],
    };
    let too_large = || enc.device.error("the fused rope and KV store is too large");
    let mut params = Params {
        a: params_a,
        b: params_b,
        d: TensorParams::new(&rows, params_k.offset as usize).ok_or_else(too_large)?,
        ..Params::default()
    };
    (params.x, params.y) =
        words(&rope).ok_or_else(|| enc.device.error(format!("rope n_dims {}", rope.n_dims)))?;
    params.z = [
        params_v.offset,
        params_c.offset,
        factors.as_ref().map_or(0, |(_, at)| at.offset),
        u32::try_from(graph.layout(enc.id).n_elements()).map_err(|_| too_large())?,
    ];
    let items = (hd - rope.n_dims / 2) * (n_head + 2 * n_head_kv) * n;
    let items = u32::try_from(items).map_err(|_| too_large())?;
    let wg = enc.workgroup(256);
    let mut srcs = vec![q_src, positions, v_rows];
    let mut bindings = vec![a, b, c];
    if let Some((e, _)) = factors {
        srcs.extend(graph.node(q).src.get(2));
        bindings.push(e);
    }
    bindings.push(d);
    Ok(vec![Dispatch {
        key: key(
            enc,
            "rope_qk_store_kv",
            &srcs,
            BODY_Q_K_V[usize::from(srcs.len() > 3)],
            "",
            false,
            wg,
        ),
        bindings,
        params,
        workgroups: enc.grid(items.div_ceil(wg)),
    }])
}
