//! Attention in one op: for each query and head, scores against every key,
//! scaled and masked, softmax, and the weighted sum of the values. The
//! softmax is computed in two passes (max, then exponentials) with an f64
//! sum, like soft_max; a GPU kernel's online softmax matches it to rounding.

use super::{parallel_fill, Src};
use crate::{Error, Result};

/// `[Dv, n_head, n_q]`: see [`crate::graph::Op::FlashAttn`].
pub fn flash_attn(
    q: Src,
    k: Src,
    v: Src,
    mask: Option<Src>,
    scale: f32,
    threads: usize,
) -> Result<Vec<f32>> {
    let [d, n_q, n_head, _] = q.ne();
    let [_, n_kv, n_head_kv, _] = k.ne();
    let dv = v.ne()[0];
    let group = n_head / n_head_kv.max(1);
    if dv == 0 || group == 0 {
        return Err(Error::shape("flash_attn: empty heads"));
    }
    let mut out = vec![0.0f32; dv * n_head * n_q];
    // One chunk of Dv values per (head, query), heads fastest.
    parallel_fill(&mut out, dv, threads, |first, chunk| {
        let (mut qrow, mut krow, mut vrow) = (vec![0.0; d], vec![0.0; d], vec![0.0; dv]);
        let mut scores = vec![0.0f32; n_kv];
        for (c, o) in chunk.chunks_exact_mut(dv).enumerate() {
            let (h, iq) = ((first + c) % n_head, (first + c) / n_head);
            let hk = h / group;
            q.row_f32(iq, h, 0, &mut qrow)?;
            for (j, s) in scores.iter_mut().enumerate() {
                k.row_f32(j, hk, 0, &mut krow)?;
                let dot: f32 = qrow.iter().zip(&krow).map(|(a, b)| a * b).sum();
                *s = dot * scale + mask.as_ref().map_or(0.0, |m| m.f32_at([j, iq, 0, 0]));
            }
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            o.fill(0.0);
            if max == f32::NEG_INFINITY {
                continue; // every key masked: no weights, a zero row
            }
            let mut sum = 0.0f64;
            for (j, &s) in scores.iter().enumerate() {
                let p = (s - max).exp();
                if p == 0.0 {
                    continue;
                }
                sum += p as f64;
                v.row_f32(j, hk, 0, &mut vrow)?;
                for (acc, &x) in o.iter_mut().zip(&vrow) {
                    *acc += p * x;
                }
            }
            let inv = (1.0 / sum) as f32;
            o.iter_mut().for_each(|x| *x *= inv);
        }
        Ok(())
    })?;
    Ok(out)
}
