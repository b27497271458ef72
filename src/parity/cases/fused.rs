//! Node pairs that the wgpu backend computes in one dispatch (norm × weight,
//! causal mask + soft_max, silu × up, rope into a cache by copy or by rows,
//! mat-vec + residual, norm × weight, silu × up or soft_max folded into a mat-vec,
//! an rms_norm run ahead by the mat-vec + residual before it, a product
//! stored into the copy of its permuted view),
//! each also in a form where the first node has a second reader, so it must
//! not be fused away.

use crate::graph::{RopeMode, RopeParams, TensorId};
use crate::parity::{Case, CaseBuilder, Fill, NMSE_DEFAULT, NMSE_MUL_MAT, NMSE_SOFT_MAX};
use crate::{DType, Result};

pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for read_twice in [false, true] {
        let twice = if read_twice { ",read_twice" } else { "" };
        for rms in [true, false] {
            for (weight_type, n) in [(DType::F32, 576), (DType::F16, 33), (DType::F32, 1025)] {
                let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
                let x = b.uniform(DType::F32, &[n, 7, 2, 1], -10.0, 10.0)?;
                let w = b.uniform(weight_type, &[n], -1.0, 1.0)?;
                let y = if rms {
                    b.g.rms_norm(x, 1e-5)?
                } else {
                    b.g.norm(x, 1e-5)?
                };
                let mut out = b.g.mul(y, w)?;
                if read_twice {
                    out = b.g.add(out, y)?;
                }
                let op = if rms { "RMS_NORM_MUL" } else { "NORM_MUL" };
                let name = format!("{op}(type_w={weight_type},n={n}{twice})");
                cases.push(b.case("fused", name, out, NMSE_DEFAULT));
            }
        }
        for (n_kv, n_tokens, n_past) in [(32, 1, 31), (37, 5, 32), (64, 64, 0)] {
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let kq = b.uniform(DType::F32, &[n_kv, n_tokens, 3], -5.0, 5.0)?;
            let masked = b.g.diag_mask_inf(kq, n_past)?;
            let mut out = b.g.soft_max(masked, None, 0.125)?;
            if read_twice {
                let finite = b.g.soft_max(masked, None, 1.0)?;
                out = b.g.add(out, finite)?;
            }
            let name = format!(
                "DIAG_MASK_INF_SOFT_MAX(n_kv={n_kv},n_tokens={n_tokens},n_past={n_past}{twice})"
            );
            cases.push(b.case("fused", name, out, NMSE_SOFT_MAX));
        }
        for (up_type, permuted) in [(DType::F32, false), (DType::F16, true)] {
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let gate = match permuted {
                false => b.uniform(DType::F32, &[1536, 3], -8.0, 8.0)?,
                true => {
                    let stored = b.uniform(DType::F32, &[3, 1536], -8.0, 8.0)?;
                    b.g.transpose(stored)?
                }
            };
            let up = b.uniform(up_type, &[1536, 3], -2.0, 2.0)?;
            let act = b.g.silu(gate)?;
            let mut out = b.g.mul(act, up)?;
            if read_twice {
                out = b.g.add(out, act)?;
            }
            let name = format!("SILU_MUL(type_up={up_type},permuted={permuted}{twice})");
            cases.push(b.case("fused", name, out, NMSE_DEFAULT));
        }
        for cache_type in [DType::F16, DType::F32] {
            // K of 4 tokens after 3 cached ones, roped, stored into a cache.
            let (head_dim, n_head, n_tokens, n_past) = (64, 3, 4, 3);
            let row = head_dim * n_head;
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let k = b.uniform(DType::F32, &[head_dim, n_head, n_tokens], -2.0, 2.0)?;
            let pos = b.indices(&[n_tokens], 100)?;
            let cache = b.uniform(cache_type, &[row, 16], -1.0, 1.0)?;
            let params = RopeParams::new(RopeMode::Normal, head_dim, 10000.0);
            let roped = b.g.rope(k, pos, params)?;
            let es = cache_type.block_bytes();
            let dst = b.g.view(cache, &[row * n_tokens], &[], es * row * n_past)?;
            let mut out = b.g.cpy(roped, dst)?;
            if read_twice {
                let flat = b.g.reshape(roped, &[row * n_tokens])?;
                out = b.g.add(out, flat)?;
            }
            let name = format!("ROPE_CPY(type_cache={cache_type}{twice})");
            cases.push(b.case("fused", name, out, NMSE_DEFAULT));
        }
        for (cache_type, factors) in [(DType::F16, false), (DType::F32, false), (DType::F16, true)]
        {
            // K of 3 tokens roped and stored into cache rows at their positions.
            let (head_dim, n_head, n_tokens, n_rows) = (64, 3, 3, 16);
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let k = b.uniform(DType::F32, &[head_dim, n_head, n_tokens], -2.0, 2.0)?;
            let pos = b.distinct_indices(n_tokens, n_rows)?;
            let cache = b.uniform(cache_type, &[head_dim * n_head, n_rows], -1.0, 1.0)?;
            let params = RopeParams::new(RopeMode::Neox, head_dim, 10000.0);
            let ff = match factors {
                true => Some(b.uniform(DType::F32, &[head_dim / 2], 0.9, 1.1)?),
                false => None,
            };
            let roped = b.g.rope_ext(k, pos, ff, params)?;
            let mut out = b.g.set_rows(cache, roped, pos)?;
            if read_twice {
                let twice = b.g.set_rows(cache, roped, pos)?;
                out = b.g.add(out, twice)?;
            }
            let name = format!(
                "ROPE_SET_ROWS(type_cache={cache_type},ff={}{twice})",
                factors as u8
            );
            cases.push(b.case("fused", name, out, NMSE_DEFAULT));
        }
        // A norm times its weight, then a projection of the result, as the
        // q/k/v and gate/up projections: one mat-vec normalising as it loads.
        for (rms, weight_type, type_a, k, m, n) in [
            (true, DType::F32, DType::Q4_1, 576, 67, 1),
            (true, DType::F32, DType::Q4_0, 1024, 96, 2),
            (true, DType::F16, DType::Q8_0, 256, 33, 3),
            (false, DType::F32, DType::Q6K, 512, 20, 1),
            (true, DType::F32, DType::Q5_0, 640, 33, 1),
            (true, DType::F32, DType::Q4K, 256, 20, 2),
            (true, DType::F32, DType::Q3K, 512, 20, 1),
            (false, DType::F16, DType::Q2K, 256, 17, 3),
            (false, DType::F16, DType::F16, 100, 9, 4),
            (true, DType::F32, DType::F32, 64, 16, 8),
            // One column: the rms scale is deferred past the reduction,
            // also over a padded float row and q6_K's scattered units.
            (true, DType::F16, DType::F16, 100, 9, 1),
            (true, DType::F32, DType::Q6K, 512, 20, 1),
        ] {
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let x = b.uniform(DType::F32, &[k, n], -4.0, 4.0)?;
            let nw = b.uniform(weight_type, &[k], 0.5, 1.5)?;
            let w = b.uniform(type_a, &[k, m], -1.0, 1.0)?;
            let y = if rms {
                b.g.rms_norm(x, 1e-5)?
            } else {
                b.g.norm(x, 1e-5)?
            };
            let scaled = b.g.mul(y, nw)?;
            let mut out = b.g.mul_mat(w, scaled)?;
            if read_twice {
                let again = b.g.mul_mat(w, y)?;
                out = b.g.add(out, again)?;
            }
            let op = if rms {
                "RMS_NORM_MUL_MAT"
            } else {
                "NORM_MUL_MAT"
            };
            let name =
                format!("{op}(type_w={weight_type},type_a={type_a},m={m},n={n},k={k}{twice})");
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
        // silu(gate) * up of a joined gate/up product, projected (and added
        // to the residual stream), as ffn_down: one mat-vec.
        for (type_a, ff, m, n, residual) in [
            (DType::Q4_1, 1536, 64, 1, true),
            (DType::Q4_0, 512, 33, 2, false),
            (DType::Q6K, 256, 20, 3, true),
            (DType::Q4K, 512, 33, 1, true),
            (DType::Q2K, 512, 20, 2, true),
            (DType::Q3K, 256, 9, 1, false),
            (DType::Q5_1, 64, 9, 2, false),
            (DType::F16, 96, 9, 1, false),
        ] {
            let residual = residual && !read_twice;
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let (mut out, act, w) = down_projection(&mut b, type_a, [ff, m, n], residual)?;
            if read_twice {
                let again = b.g.mul_mat(w, act)?;
                out = b.g.add(out, again)?;
            }
            let name = format!(
                "SILU_MUL_MUL_MAT(type_a={type_a},m={m},n={n},k={ff},residual={}{twice})",
                u8::from(residual)
            );
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
        // soft_max of one query's scores per head weighing V, as a decode
        // step's attention: one mat-vec computing the weights as it loads them.
        for (kv_type, n_kv, hd, n_head, n_head_kv, masked) in [
            (DType::F16, 256, 64, 9, 3, true),
            (DType::F16, 77, 64, 4, 4, false),
            (DType::F32, 300, 128, 8, 2, true),
        ] {
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let scores = b.uniform(DType::F32, &[n_kv, 1, n_head], -4.0, 4.0)?;
            let v = b.uniform(kv_type, &[n_kv, hd, n_head_kv], -1.0, 1.0)?;
            let mask = if masked {
                // The keys past a decode step's position are hidden.
                let id = b.g.input("mask", DType::F32, &[n_kv, 1])?;
                let seen = n_kv - n_kv / 3;
                let values = (0..n_kv)
                    .map(|j| if j < seen { 0.0 } else { f32::NEG_INFINITY })
                    .collect();
                b.push_f32(id, values);
                Some(id)
            } else {
                None
            };
            let weights = b.g.soft_max(scores, mask, 0.125)?;
            let mut out = b.g.mul_mat(v, weights)?;
            if read_twice {
                let again = b.g.mul_mat(v, weights)?;
                out = b.g.add(out, again)?;
            }
            let name = format!(
                "SOFT_MAX_MUL_MAT(type_v={kv_type},kv={n_kv},hd={hd},nh={n_head},nr={},mask={}{twice})",
                n_head / n_head_kv,
                u8::from(masked)
            );
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
        // V times a prompt's attention weights, heads then merged side by
        // side: the product stores straight into the merged copy.
        for (kv_type, n_tokens, n_head, n_head_kv) in [
            (DType::F16, 7, 6, 2),
            (DType::F32, 1, 4, 4),
            (DType::F16, 70, 4, 1),
        ] {
            let (n_kv, hd) = (37, 64);
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let weights = b.uniform(DType::F32, &[n_kv, n_tokens, n_head], 0.0, 1.0)?;
            let v = b.uniform(kv_type, &[n_kv, hd, n_head_kv], -1.0, 1.0)?;
            let kqv = b.g.mul_mat(v, weights)?;
            let merged = b.g.permute(kqv, [0, 2, 1, 3])?;
            let mut out = b.g.cont(merged)?;
            if read_twice {
                let heads = b.g.cont(kqv)?;
                let heads = b.g.reshape(heads, &[hd, n_head, n_tokens])?;
                out = b.g.add(out, heads)?;
            }
            let name = format!(
                "MUL_MAT_PERMUTE_CONT(type_v={kv_type},tokens={n_tokens},nh={n_head},nr={}{twice})",
                n_head / n_head_kv
            );
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
        // A projection plus the residual stream, then the next rms_norm
        // times its weight and a projection of that (attn_output or
        // ffn_down, then the next q/k/v or gate/up): the first mat-vec runs
        // the norm ahead for the second, two dispatches in all. `silu`: the
        // first projects silu(gate) * up.
        for (type_p, type_c, k, m, silu) in [
            (DType::Q4_0, DType::Q4_0, 256, 1024, false),
            (DType::Q4_1, DType::F16, 96, 100, false),
            (DType::Q8_0, DType::Q6K, 64, 512, false),
            (DType::Q6K, DType::Q4K, 256, 256, false),
            (DType::F32, DType::Q5_1, 64, 64, false),
            (DType::Q4_1, DType::Q4_1, 1536, 576, true),
            (DType::Q4K, DType::F32, 512, 100, true),
        ] {
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let y = if silu {
                down_projection(&mut b, type_p, [k, m, 1], true)?.0
            } else {
                let w = b.uniform(type_p, &[k, m], -1.0, 1.0)?;
                let x = b.uniform(DType::F32, &[k, 1], -1.0, 1.0)?;
                let residual = b.uniform(DType::F32, &[m, 1], -4.0, 4.0)?;
                let product = b.g.mul_mat(w, x)?;
                b.g.add(product, residual)?
            };
            let nw = b.uniform(DType::F32, &[m], 0.5, 1.5)?;
            let wc = b.uniform(type_c, &[m, m], -1.0, 1.0)?;
            let normed = b.g.rms_norm(y, 1e-5)?;
            let scaled = b.g.mul(normed, nw)?;
            let mut out = b.g.mul_mat(wc, scaled)?;
            if read_twice {
                out = b.g.add(out, scaled)?;
            }
            let name = format!(
                "MUL_MAT_ADD_RMS_NORM_MUL_MAT(type_p={type_p},type_c={type_c},k={k},m={m},silu={}{twice})",
                u8::from(silu)
            );
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
        // A whole feed-forward end: the joined gate/up product of an
        // intermediate, then silu(gate) * up projected and added to the
        // residual in one dispatch, which must not store over the gate/up
        // product it reads (the graph's allocator keeps their bytes apart).
        for (type_gu, type_down, k, ff) in [
            (DType::Q4_0, DType::Q4_1, 256, 512),
            (DType::Q6K, DType::F16, 256, 96),
        ] {
            if read_twice {
                break;
            }
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let x = b.uniform(DType::F32, &[k, 1], -1.0, 1.0)?;
            let w_gu = b.uniform(type_gu, &[k, 2 * ff], -1.0, 1.0)?;
            let w_down = b.uniform(type_down, &[ff, k], -1.0, 1.0)?;
            let gate_up = b.g.mul_mat(w_gu, x)?;
            let row = b.g.layout(gate_up).nb[1];
            let gate = b.g.view(gate_up, &[ff, 1], &[row], 0)?;
            let up = b.g.view(gate_up, &[ff, 1], &[row], ff * 4)?;
            let act = b.g.silu(gate)?;
            let prod = b.g.mul(act, up)?;
            let down = b.g.mul_mat(w_down, prod)?;
            let out = b.g.add(down, x)?;
            let name = format!("FFN(type_gu={type_gu},type_down={type_down},k={k},ff={ff})");
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
        // A projection plus the residual stream, as attn_output and ffn_down.
        for (type_a, k, m, n) in [
            (DType::Q4_0, 576, 67, 1),
            (DType::Q4_1, 1536, 576, 1),
            (DType::Q8_0, 256, 33, 3),
            (DType::Q6K, 512, 20, 2),
            (DType::Q4K, 1024, 40, 1),
            (DType::Q5K, 512, 21, 2),
            (DType::Q2K, 256, 20, 1),
            (DType::Q3K, 512, 17, 4),
            (DType::Q5_0, 96, 17, 3),
            (DType::F16, 100, 9, 5),
            (DType::F32, 64, 16, 8),
        ] {
            let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
            let w = b.uniform(type_a, &[k, m], -1.0, 1.0)?;
            let x = b.uniform(DType::F32, &[k, n], -1.0, 1.0)?;
            let residual = b.uniform(DType::F32, &[m, n], -4.0, 4.0)?;
            let product = b.g.mul_mat(w, x)?;
            let mut out = b.g.add(product, residual)?;
            if read_twice {
                out = b.g.add(out, product)?;
            }
            let name = format!("MUL_MAT_ADD(type_a={type_a},m={m},n={n},k={k}{twice})");
            cases.push(b.case("fused", name, out, NMSE_MUL_MAT));
        }
    }
    rope_kv_store_cases(&mut cases)?;
    Ok(cases)
}

/// What a [`rope_kv_store_cases`] case reads back.
#[derive(Clone, Copy, Debug)]
enum KvStoreOut {
    /// The projection's result, q roped in place.
    Q,
    KCache,
    VCache,
}

/// The q/k/v projection's result roped and stored as a llama layer does:
/// q roped in place, k roped into its cache rows, v into the transposed V
/// cache at its indices; the wgpu backend runs all four nodes as one
/// dispatch. Each case reads back one of the three results; one variant
/// gives k a second reader, which keeps the nodes apart.
fn rope_kv_store_cases(cases: &mut Vec<Case>) -> Result<()> {
    let shapes = [
        // (head_dim, n_dims, n_head, n_head_kv, n_tokens, mode, cache
        // type, frequency factors)
        (64, 64, 9, 3, 1, RopeMode::Neox, DType::F16, false),
        (128, 64, 4, 1, 5, RopeMode::Normal, DType::F16, false),
        (32, 32, 2, 2, 3, RopeMode::Neox, DType::F32, false),
        (64, 64, 4, 2, 2, RopeMode::Normal, DType::F16, true),
    ];
    for (hd, n_dims, n_head, n_head_kv, n, mode, cache_type, factors) in shapes {
        for out_kind in [KvStoreOut::Q, KvStoreOut::KCache, KvStoreOut::VCache] {
            for read_twice in [false, true] {
                let n_ctx = 16;
                let (n_q, n_kv) = (hd * n_head, hd * n_head_kv);
                let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
                let all = b.uniform(DType::F32, &[n_q + 2 * n_kv, n], -2.0, 2.0)?;
                let row = b.g.layout(all).nb[1];
                let q = b.g.view(all, &[hd, n_head, n], &[hd * 4, row], 0)?;
                let k =
                    b.g.view(all, &[hd, n_head_kv, n], &[hd * 4, row], n_q * 4)?;
                let v = b.g.view(all, &[n_kv, n], &[row], (n_q + n_kv) * 4)?;
                let pos = b.distinct_indices(n, n_ctx)?;
                let positions: Vec<i32> = match b.inputs.last() {
                    Some((_, Fill::I32(p))) => p.clone(),
                    _ => unreachable!("distinct_indices fills i32"),
                };
                let k_cache = b.uniform(cache_type, &[n_kv, n_ctx], -1.0, 1.0)?;
                let v_cache = b.uniform(cache_type, &[n_ctx, n_kv], -1.0, 1.0)?;
                let v_rows = b.g.input("v_rows", DType::I32, &[n_kv * n])?;
                let rows = positions
                    .iter()
                    .flat_map(|&p| (0..n_kv).map(move |c| (c * n_ctx) as i32 + p))
                    .collect();
                b.inputs.push((v_rows, Fill::I32(rows)));
                let params = RopeParams::new(mode, n_dims, 10000.0);
                let ff = match factors {
                    true => Some(b.uniform(DType::F32, &[hd / 2], 0.9, 1.1)?),
                    false => None,
                };
                b.g.rope_ext_inplace(q, pos, ff, params)?;
                let k_roped = b.g.rope_ext(k, pos, ff, params)?;
                let k_stored = b.g.set_rows(k_cache, k_roped, pos)?;
                let v_flat = b.g.reshape(v_cache, &[1, n_ctx * n_kv])?;
                let v_stored = b.g.set_rows(v_flat, v, v_rows)?;
                if read_twice {
                    // A second reader of k's rope, after the stores.
                    b.g.scale(k_roped, 0.5)?;
                }
                let out = match out_kind {
                    // q is strided: read the whole projection it was roped in.
                    KvStoreOut::Q => all,
                    KvStoreOut::KCache => k_stored,
                    KvStoreOut::VCache => v_stored,
                };
                let twice = if read_twice { ",read_twice" } else { "" };
                let name = format!(
                    "ROPE_KV_STORE(hd={hd},n_dims={n_dims},heads={n_head}/{n_head_kv},n={n},mode={mode:?},type_cache={cache_type},ff={},out={out_kind:?}{twice})",
                    factors as u8
                );
                cases.push(b.case("fused", name, out, NMSE_DEFAULT));
            }
        }
    }
    Ok(())
}

/// Folds into a prompt's product (`fused_prompt`), which a device with
/// cooperative matrices runs there: silu(gate) * up of a joined gate/up
/// product, computed in the cast of the product's activations, and the
/// residual add after a product, in its store (elsewhere the nodes run one
/// by one, so these check only the path taken). Not `fused`: those each
/// run as one dispatch.
pub fn prompt_cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (type_a, ff, m, n, residual) in [
        (DType::Q4_0, 512, 130, 64, true),
        (DType::Q4K, 512, 64, 77, false),
        (DType::Q6K, 256, 129, 16, true),
        (DType::F16, 96, 40, 33, false),
    ] {
        let mut b = CaseBuilder::new(cases.len() as u64 + 2100);
        let (out, _, _) = down_projection(&mut b, type_a, [ff, m, n], residual)?;
        let name = format!(
            "SILU_MUL_MUL_MAT(type_a={type_a},m={m},n={n},k={ff},residual={})",
            u8::from(residual)
        );
        cases.push(b.case("fused_prompt", name, out, NMSE_MUL_MAT));
    }
    // A projection added to the residual stream (the attention output's).
    for (type_a, k, m, n) in [(DType::Q8_0, 256, 96, 40), (DType::Q4_1, 576, 200, 129)] {
        let mut b = CaseBuilder::new(cases.len() as u64 + 2100);
        let x = b.uniform(DType::F32, &[k, n], -1.0, 1.0)?;
        let w = b.uniform(type_a, &[k, m], -1.0, 1.0)?;
        let stream = b.uniform(DType::F32, &[m, n], -2.0, 2.0)?;
        let prod = b.g.mul_mat(w, x)?;
        let out = b.g.add(prod, stream)?;
        let name = format!("MUL_MAT_ADD(type_a={type_a},m={m},n={n},k={k})");
        cases.push(b.case("fused_prompt", name, out, NMSE_MUL_MAT));
    }
    Ok(cases)
}

/// A feed-forward's down projection: silu(gate) * up of a joined [2 ff, n]
/// gate/up product, times [ff, m] weights of `type_a`, plus a residual
/// stream when asked. Returns the result, the silu node and the weights.
fn down_projection(
    b: &mut CaseBuilder,
    type_a: DType,
    [ff, m, n]: [usize; 3],
    residual: bool,
) -> Result<(TensorId, TensorId, TensorId)> {
    let gate_up = b.uniform(DType::F32, &[2 * ff, n], -4.0, 4.0)?;
    let w = b.uniform(type_a, &[ff, m], -1.0, 1.0)?;
    let row = b.g.layout(gate_up).nb[1];
    let gate = b.g.view(gate_up, &[ff, n], &[row], 0)?;
    let up = b.g.view(gate_up, &[ff, n], &[row], ff * 4)?;
    let act = b.g.silu(gate)?;
    let prod = b.g.mul(act, up)?;
    let mut out = b.g.mul_mat(w, prod)?;
    if residual {
        let stream = b.uniform(DType::F32, &[m, n], -2.0, 2.0)?;
        out = b.g.add(out, stream)?;
    }
    Ok((out, act, w))
}
