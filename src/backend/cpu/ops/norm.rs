//! norm and rms_norm over rows; sums in f64 like ggml's reference.

use super::super::strided::for_each_row;
use super::Src;
use crate::Result;

fn each_row(a: Src, mut f: impl FnMut(&[f32], &mut Vec<f32>)) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(a.layout.n_elements());
    let mut row = vec![0.0f32; a.ne()[0]];
    let mut status = Ok(());
    for_each_row(a.ne(), |[_, i1, i2, i3]| {
        if status.is_ok() {
            status = a.row_f32(i1, i2, i3, &mut row);
            f(&row, &mut out);
        }
    });
    status.map(|_| out)
}

/// `(x - mean) / sqrt(variance + eps)` per row.
pub fn norm(a: Src, eps: f32) -> Result<Vec<f32>> {
    each_row(a, |row, out| {
        let n = row.len() as f64;
        let mean = row.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        let scale = 1.0 / (var as f32 + eps).sqrt();
        out.extend(row.iter().map(|&x| (x - mean as f32) * scale));
    })
}

/// `x / sqrt(mean(x^2) + eps)` per row.
pub fn rms_norm(a: Src, eps: f32) -> Result<Vec<f32>> {
    each_row(a, |row, out| {
        let mean_sq = row.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>() / row.len() as f64;
        let scale = 1.0 / (mean_sq as f32 + eps).sqrt();
        out.extend(row.iter().map(|&x| x * scale));
    })
}
