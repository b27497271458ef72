//! argmax of each row, as the greedy sampler picks a token.

use super::Src;
use crate::Result;

/// The index of each row's largest value, as f32 values for the i32 result.
pub fn argmax(a: Src) -> Result<Vec<f32>> {
    let [n, rows, _, _] = a.ne();
    let mut row = vec![0.0f32; n];
    let mut out = Vec::with_capacity(rows);
    for i1 in 0..rows {
        a.row_f32(i1, 0, 0, &mut row)?;
        out.push(row_argmax(&row).unwrap_or(0) as f32);
    }
    Ok(out)
}

/// Index of the largest value; the lowest index wins a tie (as llama.cpp's
/// greedy sampler); `None` for an empty row.
pub fn row_argmax(values: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in values.iter().enumerate() {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}
