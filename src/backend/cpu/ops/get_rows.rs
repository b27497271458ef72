//! get_rows: gathers (and dequantizes) rows by index.

use super::{parallel_fill, Src};
use crate::{Error, Result};

/// Rows of `a` `[n, m, A2, A3]` at the indices `idx` `[r, A2, A3]`, as f32.
pub fn get_rows(a: Src, idx: Src, threads: usize) -> Result<Vec<f32>> {
    let [n, m, ..] = a.ne();
    let [r, j2n, ..] = idx.ne();
    let mut out = vec![0.0f32; n * idx.layout.n_elements()];
    parallel_fill(&mut out, n, threads, |first_row, part| {
        for (k, row) in part.chunks_exact_mut(n).enumerate() {
            let flat = first_row + k;
            let (ir, j2, j3) = (flat % r, (flat / r) % j2n, flat / (r * j2n));
            let i = idx.i32_at([ir, j2, j3, 0]);
            if i < 0 || i as usize >= m {
                return Err(Error::invalid(format!("row index {i} is outside 0..{m}")));
            }
            a.row_f32(i as usize, j2, j3, row)?;
        }
        Ok(())
    })?;
    Ok(out)
}
