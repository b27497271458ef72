//! flash_attn_ext: one workgroup per (head, query), an online softmax over
//! tiles of keys (`wgsl/flash_attn.wgsl`). For decode this replaces the
//! scores product, soft_max, the weighted-values product and the copy that
//! merges heads: four dispatches and the score tensor.

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const BODY: &[&str] = &[include_str!("../../../../wgsl/flash_attn.wgsl")];
const NO_MASK: &str = "fn mask_at(key: u32, query: u32) -> f32 { return 0.0; }\n";
const MASK_F32: &str =
    "fn mask_at(key: u32, query: u32) -> f32 { return load_e(p.y.x + query * p.y.y + key * 4u); }\n";
const MASK_F16: &str =
    "fn mask_at(key: u32, query: u32) -> f32 { return load_e(p.y.x + query * p.y.y + key * 2u); }\n";
/// Invocations per workgroup: keys per tile, and half the value dims handled.
const WG: u32 = 128;
/// Query head size the kernel's workgroup array holds (`MAX_D`).
const MAX_D: usize = 256;

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let float = |t: DType| matches!(t, DType::F32 | DType::F16);
    let (q, k, v) = (
        graph.layout(node.src[0]),
        graph.layout(node.src[1]),
        graph.layout(node.src[2]),
    );
    let mask_ok = node.src.get(3).is_none_or(|&m| {
        let l = graph.layout(m);
        float(l.dtype) && l.nb[0] == l.dtype.block_bytes()
    });
    q.ne[0] <= MAX_D && v.ne[0] <= 2 * WG as usize && float(k.dtype) && float(v.dtype) && mask_ok
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let node = enc.graph.node(enc.id);
    let Op::FlashAttn { scale } = node.op else {
        return Err(enc.device.error("flash_attn encoder got another op"));
    };
    let (q, k, v) = (node.src[0], node.src[1], node.src[2]);
    let (mut bindings, mut params) = enc.bind_all(&[q, k])?;
    let mut srcs = vec![q, k, v];
    let (v_binding, vp) = enc.bind(v)?;
    bindings.insert(2, v_binding);
    params.x = [vp.offset, vp.nb[0], vp.nb[1], vp.nb[2]];
    let (n_head, n_head_kv) = (enc.graph.layout(q).ne[2], enc.graph.layout(k).ne[2]);
    let group = u32::try_from(n_head / n_head_kv.max(1))
        .map_err(|_| enc.device.error("flash_attn: too many heads"))?;
    params.y = [0, 0, scale.to_bits(), group];
    let defs = match node.src.get(3) {
        None => NO_MASK,
        Some(&mask) => {
            let (m_binding, mp) = enc.bind(mask)?;
            bindings.insert(3, m_binding);
            params.y[0] = mp.offset;
            params.y[1] = mp.nb[1];
            srcs.push(mask);
            match enc.graph.layout(mask).dtype {
                DType::F16 => MASK_F16,
                _ => MASK_F32,
            }
        }
    };
    let n = enc.graph.layout(enc.id).ne;
    let groups =
        u32::try_from(n[1] * n[2]).map_err(|_| enc.device.error("flash_attn is too large"))?;
    let wg = enc.workgroup(WG);
    if wg != WG {
        return Err(enc
            .device
            .error("flash_attn needs 128-invocation workgroups"));
    }
    Ok(vec![Dispatch {
        key: key(enc, "flash_attn_ext", &srcs, BODY, defs, true, wg),
        bindings,
        params,
        workgroups: enc.grid(groups),
    }])
}
