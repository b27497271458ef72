//! norm and rms_norm over rows; sums in f64 like ggml's reference.

use super::{each_row, Src};
use crate::Result;

/// `(x - mean) / sqrt(variance + eps)` per row.
pub fn norm(a: Src, eps: f32, threads: usize) -> Result<Vec<f32>> {
    each_row(a, threads, |row| {
        let n = row.len() as f64;
        let mean = row.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        let scale = 1.0 / (var as f32 + eps).sqrt();
        for x in row.iter_mut() {
            *x = (*x - mean as f32) * scale;
        }
    })
}

/// `x / sqrt(mean(x^2) + eps)` per row.
pub fn rms_norm(a: Src, eps: f32, threads: usize) -> Result<Vec<f32>> {
    each_row(a, threads, |row| {
        let mean_sq = row.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>() / row.len() as f64;
        let scale = 1.0 / (mean_sq as f32 + eps).sqrt();
        for x in row.iter_mut() {
            *x *= scale;
        }
    })
}
