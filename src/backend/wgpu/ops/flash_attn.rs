//! flash_attn_ext: one workgroup per (head, query), an online softmax over
//! tiles of keys (`wgsl/flash_attn.wgsl`). For decode this replaces the
//! scores product, soft_max, the weighted-values product and the copy that
//! merges heads: four dispatches and the score tensor. When there are too
//! few (head, query) pairs to fill the device (a decode step), the keys are
//! also split over workgroups, whose partial results a second dispatch
//! combines (flash decoding). Prompts take `wgsl/flash_attn_tiled.wgsl`
//! instead: a workgroup per 16 or 32 queries of a head, each tile of keys
//! loaded once for all of them.

use super::{key, OpEncoder};
use crate::backend::wgpu::params::{Params, TensorParams};
use crate::backend::wgpu::plan::{Binding, Dispatch};
use crate::backend::wgpu::SCRATCH_BYTES;
use crate::graph::{Graph, Op, TensorId};
use crate::tensor::Layout;
use crate::{DType, Result};

const COMMON: &str = include_str!("../../../../wgsl/flash_attn_common.wgsl");
const ATTEND: &str = include_str!("../../../../wgsl/flash_attn.wgsl");
const BODY: &[&str] = &[
    COMMON,
    ATTEND,
    include_str!("../../../../wgsl/flash_attn_store.wgsl"),
];
const BODY_SPLIT: &[&str] = &[
    COMMON,
    ATTEND,
    include_str!("../../../../wgsl/flash_attn_partial.wgsl"),
];
const MERGE: &[&str] = &[include_str!("../../../../wgsl/flash_attn_merge.wgsl")];
const TILED: &str = include_str!("../../../../wgsl/flash_attn_tiled.wgsl");
/// The tiled kernel by head size: queries per workgroup (`BQ`) and the
/// largest head size (`DMAX`) it holds, with its body.
const TILED_SHAPES: [(usize, usize, &[&str]); 2] = [(32, 64, TILED_64), (16, 128, TILED_128)];
const TILED_64: &[&str] = &[
    "const BQ: u32 = 32u;\nconst DMAX: u32 = 64u;\n",
    COMMON,
    TILED,
];
const TILED_128: &[&str] = &[
    "const BQ: u32 = 16u;\nconst DMAX: u32 = 128u;\n",
    COMMON,
    TILED,
];
/// Keys per tile of the tiled kernel (`BK`).
const TILED_KEYS: usize = 32;
/// Queries from which the tiled kernel runs: fewer are decode steps and
/// small batches, which the per-query kernel (with key splits) keeps.
const TILED_MIN_QUERIES: usize = 8;
const NO_MASK: &str = "fn mask_at(key: u32, query: u32) -> f32 { return 0.0; }\n";
const MASK_F32: &str =
    "fn mask_at(key: u32, query: u32) -> f32 { return load_e(p.y.x + query * p.y.y + key * 4u); }\n";
const MASK_F16: &str =
    "fn mask_at(key: u32, query: u32) -> f32 { return load_e(p.y.x + query * p.y.y + key * 2u); }\n";
/// Invocations per workgroup: keys per tile, and half the value dims handled.
const WG: u32 = 128;
/// Query head size the kernel's workgroup array holds (`MAX_D`).
const MAX_D: usize = 256;
/// Keys are split until about this many workgroups run (two per SM of a
/// large GPU), each split at least [`MIN_SPLIT_TILES`] tiles, at most
/// [`MAX_SPLITS`] splits. Shorter walks are not worth the second dispatch:
/// on an H200, splitting a decode step's 256 keys in two cost 4% of the
/// 135M shape's decode speed.
const TARGET_WORKGROUPS: usize = 256;
const MAX_SPLITS: usize = 32;
const MIN_SPLIT_TILES: usize = 4;

/// Keys per split and splits for `pairs` (head, query) pairs over `n_kv`
/// keys with `dv` value dims: one split when the pairs fill the device
/// already, when the keys are too few to share, or when the splits'
/// results would not fit the scratch buffer.
fn key_splits(pairs: usize, n_kv: usize, dv: usize) -> (usize, usize) {
    let tile = WG as usize;
    let tiles = n_kv.div_ceil(tile).max(1);
    let wanted = TARGET_WORKGROUPS
        .div_ceil(pairs.max(1))
        .min(MAX_SPLITS)
        .min(tiles / MIN_SPLIT_TILES);
    let chunk = tiles.div_ceil(wanted.max(1)) * tile;
    let splits = n_kv.div_ceil(chunk).max(1);
    let scratch = (pairs * splits * (dv + 2) * 4) as u64;
    if splits == 1 || scratch > SCRATCH_BYTES {
        (n_kv.max(1), 1)
    } else {
        (chunk, splits)
    }
}

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

/// The tiled kernel's shape for queries of `d` dims (values of as many) and
/// its workgroup memory in bytes, if it has one.
fn tiled_shape(d: usize, dv: usize) -> Option<(usize, &'static [&'static str], u32)> {
    let (bq, dmax, body) = TILED_SHAPES.into_iter().find(|&(_, dmax, _)| d <= dmax)?;
    let floats =
        bq * dmax + TILED_KEYS * (dmax + 1) + bq * (TILED_KEYS + 1) + WG as usize + 3 * bq + 2;
    (dv == d).then_some((bq, body, (4 * floats) as u32))
}

/// Whether prompt-sized attention of node `id` runs the tiled kernel.
fn tiled(enc: &OpEncoder) -> Option<(usize, &'static [&'static str])> {
    let node = enc.graph.node(enc.id);
    let (q, v) = (enc.graph.layout(node.src[0]), enc.graph.layout(node.src[2]));
    let (bq, body, bytes) = tiled_shape(q.ne[0], v.ne[0])?;
    let fits = bytes <= enc.device.gpu.limits.max_compute_workgroup_storage_size;
    (fits && q.ne[1] >= TILED_MIN_QUERIES && q.ne[3] == 1).then_some((bq, body))
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
    let too_large = || enc.device.error("flash_attn is too large");
    if let Some((bq, body)) = tiled(enc) {
        let wg = enc.workgroup(WG);
        let groups = n[2].div_ceil(bq) * n[1];
        if wg == WG {
            return Ok(vec![Dispatch {
                key: key(enc, "flash_attn_tiled", &srcs, body, defs, false, wg),
                bindings,
                params,
                workgroups: enc.grid(u32::try_from(groups).map_err(|_| too_large())?),
            }]);
        }
    }
    let n_kv = enc.graph.layout(k).ne[1];
    let (chunk, splits) = if enc.device.split_keys {
        key_splits(n[1] * n[2], n_kv, n[0])
    } else {
        (n_kv.max(1), 1)
    };
    let groups = u32::try_from(n[1] * n[2] * splits).map_err(|_| too_large())?;
    // f16 rows of contiguous dims at word-aligned starts load two dims per word.
    let paired = |t: TensorId, at: &TensorParams| {
        enc.graph.layout(t).dtype == DType::F16
            && at.ne[0].is_multiple_of(2)
            && at.nb[0] == 2
            && [at.offset, at.nb[1], at.nb[2]]
                .iter()
                .all(|b| b.is_multiple_of(4))
    };
    // A transposed V's rows of keys are read a tile at a time from the
    // tile's start, a multiple of WG (even), so any key count pairs.
    let v_keys_paired = enc.graph.layout(v).dtype == DType::F16
        && vp.nb[1] == 2
        && [vp.offset, vp.nb[0], vp.nb[2]]
            .iter()
            .all(|b| b.is_multiple_of(4));
    let pairs = if paired(v, &vp) {
        2
    } else if v_keys_paired {
        4
    } else {
        0
    };
    params.z = [
        u32::try_from(chunk).map_err(|_| too_large())?,
        splits as u32,
        u32::from(paired(k, &params.b)) | pairs,
        0,
    ];
    let wg = enc.workgroup(WG);
    if wg != WG {
        return Err(enc
            .device
            .error("flash_attn needs 128-invocation workgroups"));
    }
    if splits == 1 {
        return Ok(vec![Dispatch {
            key: key(enc, "flash_attn_ext", &srcs, BODY, defs, true, wg),
            bindings,
            params,
            workgroups: enc.grid(groups),
        }]);
    }
    // The splits' rows go to the scratch buffer: [Dv + 2, splits, heads, queries].
    let rows = Layout::contiguous(DType::F32, [n[0] + 2, splits, n[1], n[2]])?;
    let rows_params = TensorParams::new(&rows, 0).ok_or_else(too_large)?;
    let scratch = Binding {
        buffer: enc.device.scratch().clone(),
        offset: 0,
        size: rows.span_bytes() as u64,
    };
    let out = bindings.pop().ok_or_else(too_large)?;
    bindings.push(scratch.clone());
    let out_params = std::mem::replace(&mut params.d, rows_params);
    let mut partial = key(enc, "flash_attn_ext", &srcs, BODY_SPLIT, defs, true, wg);
    partial.name.push_str("_split");
    partial.dst = DType::F32;
    let mut merge = key(enc, "flash_attn_merge", &[], MERGE, "", false, wg);
    merge.srcs = vec![DType::F32];
    let merge_params = Params {
        a: rows_params,
        d: out_params,
        ..Default::default()
    };
    Ok(vec![
        Dispatch {
            key: partial,
            bindings,
            params,
            workgroups: enc.grid(groups),
        },
        Dispatch {
            key: merge,
            bindings: vec![scratch, out],
            params: merge_params,
            workgroups: enc.grid(u32::try_from(n[1] * n[2]).map_err(|_| too_large())?),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_tiles_fit_32_kib_of_workgroup_memory() {
        // 16 queries of up to 128 dims, or 32 of up to 64, as the kernel
        // declares them; other head sizes take the per-query kernel.
        let bytes = |d: usize| tiled_shape(d, d).map(|(bq, _, b)| (bq, b));
        assert_eq!(
            bytes(64),
            Some((32, 4 * (32 * 64 + 32 * 65 + 32 * 33 + 128 + 96 + 2)))
        );
        assert_eq!(bytes(80).map(|(bq, _)| bq), Some(16));
        assert!(bytes(128).is_some_and(|(_, b)| b <= 32 << 10));
        assert!(bytes(256).is_none() && tiled_shape(128, 64).is_none());
    }

    #[test]
    fn keys_are_split_only_when_the_pairs_leave_the_device_idle() {
        // An 8B-class decode step: 32 heads, one query.
        assert_eq!(key_splits(32, 1024, 128), (512, 2));
        assert_eq!(key_splits(32, 8192, 128), (1024, 8));
        // Fewer heads: more splits, each at least four tiles.
        assert_eq!(key_splits(9, 4096, 64), (512, 8));
        assert_eq!(key_splits(9, 65536, 64), (2304, 29));
        // Few keys, or enough pairs already: one split over every key.
        assert_eq!(key_splits(9, 100, 64), (100, 1));
        assert_eq!(key_splits(9, 896, 64), (896, 1));
        assert_eq!(key_splits(512, 4096, 128), (4096, 1));
        assert_eq!(key_splits(4, 0, 64), (1, 1));
        // Results that would not fit the scratch buffer: one split.
        assert_eq!(key_splits(200, 1 << 20, 4096), (1 << 20, 1));
    }
}
