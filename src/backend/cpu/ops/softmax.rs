//! soft_max with scale and optional broadcast mask.

use super::super::strided::for_each_row;
use super::Src;
use crate::Result;

/// Softmax over each row of `a * scale + mask`.
pub fn soft_max(a: Src, mask: Option<Src>, scale: f32) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(a.layout.n_elements());
    let mut row = vec![0.0f32; a.ne()[0]];
    for_each_row(a.ne(), |[_, i1, i2, i3]| {
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
        out.extend(row.iter().map(|v| v * inv));
    });
    Ok(out)
}
