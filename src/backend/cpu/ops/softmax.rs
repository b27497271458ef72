//! soft_max with scale and optional broadcast mask.

use super::{each_row_index, Src};
use crate::Result;

/// Softmax over each row of `a * scale + mask`.
pub fn soft_max(a: Src, mask: Option<Src>, scale: f32, threads: usize) -> Result<Vec<f32>> {
    each_row_index(a, threads, |[_, i1, i2, i3], row| {
        for (i0, v) in row.iter_mut().enumerate() {
            *v = a.f32_at([i0, i1, i2, i3]) * scale;
            if let Some(m) = &mask {
                let nm = m.ne();
                *v += m.f32_at([i0, i1, i2 % nm[2], i3 % nm[3]]);
            }
        }
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f64;
        for v in row.iter_mut() {
            *v = (*v - max).exp();
            sum += *v as f64;
        }
        let inv = (1.0 / sum) as f32;
        for v in row.iter_mut() {
            *v *= inv;
        }
        Ok(())
    })
}
