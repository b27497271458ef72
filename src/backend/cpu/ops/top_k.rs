//! The sampler as graph ops (the device sampler's reference): top-k over
//! chunks of a row, and a draw from the best candidates through llama.cpp's
//! chain, in f32 as the device computes it.

use std::cmp::Ordering;

use super::Src;
use crate::Result;

/// A candidate: its value and vocabulary index (negative: padding).
type Entry = (f32, i64);

/// Best first: the larger value, then the lower index (+0 and -0 tie).
fn best_first(a: &Entry, b: &Entry) -> Ordering {
    b.0.partial_cmp(&a.0)
        .unwrap_or(Ordering::Equal)
        .then(a.1.cmp(&b.1))
}

/// `(value, index)` pairs of a top-k's result, padding dropped.
fn pairs_of(values: &[f32]) -> Vec<Entry> {
    values
        .chunks_exact(2)
        .map(|p| (p[0], p[1] as i64))
        .filter(|e| e.1 >= 0)
        .collect()
}

/// [`crate::graph::Op::TopK`]: each chunk's `k` best entries, padded
/// with `(-inf, -1)`, as `[2, k, chunks]` values.
pub fn top_k(a: Src, k: usize, chunk: usize, pairs: bool) -> Result<Vec<f32>> {
    let values = a.to_f32()?;
    let entries: Vec<Entry> = if pairs {
        values
            .chunks_exact(2)
            .map(|p| (p[0], p[1] as i64))
            .collect()
    } else {
        let row = a.ne()[0].max(1);
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, (i % row) as i64))
            .collect()
    };
    let mut out = Vec::with_capacity(2 * k * entries.len().div_ceil(chunk.max(1)));
    for part in entries.chunks(chunk.max(1)) {
        let mut best: Vec<Entry> = part
            .iter()
            .copied()
            .filter(|e| e.1 >= 0 && !e.0.is_nan())
            .collect();
        best.sort_by(best_first);
        for i in 0..k {
            let (v, at) = best.get(i).copied().unwrap_or((f32::NEG_INFINITY, -1));
            out.extend([v, at as f32]);
        }
    }
    Ok(out)
}

/// [`crate::graph::Op::SampleTopK`]: the drawn token's index.
pub fn sample_top_k(cands: Src, settings: Src) -> Result<Vec<f32>> {
    let cands = pairs_of(&cands.to_f32()?);
    let s = settings.to_f32()?;
    let [temp, top_p, ln_min_p, r] = [0, 1, 2, 3].map(|i| s.get(i).copied().unwrap_or(0.0));
    Ok(vec![draw(&cands, temp, top_p, ln_min_p, r) as f32])
}

/// llama.cpp's chain top-p → min-p → temperature → draw over best-first
/// candidates, in f32 and in this order of operations (the device
/// sampler's). No candidates gives index 0.
pub fn draw(cands: &[Entry], temp: f32, top_p: f32, ln_min_p: f32, r: f32) -> i64 {
    let Some(&(max, _)) = cands.first() else {
        return 0;
    };
    let mut keep = cands.len();
    if top_p < 1.0 {
        let total: f32 = cands.iter().map(|c| (c.0 - max).exp()).sum();
        let mut cum = 0.0f32;
        for (i, c) in cands.iter().enumerate() {
            cum += (c.0 - max).exp() / total;
            if cum >= top_p {
                keep = i + 1;
                break;
            }
        }
    }
    // p_i >= min_p * p_max, in logits.
    let floor = max + ln_min_p;
    let keep = cands[..keep]
        .iter()
        .take_while(|c| c.0 >= floor)
        .count()
        .max(1);
    let kept = &cands[..keep];
    let total: f32 = kept.iter().map(|c| ((c.0 - max) / temp).exp()).sum();
    let mut acc = 0.0f32;
    for c in kept {
        acc += ((c.0 - max) / temp).exp() / total;
        if r < acc {
            return c.1;
        }
    }
    // Rounding left `acc` just below 1: the last candidate takes the rest.
    kept[keep - 1].1
}
