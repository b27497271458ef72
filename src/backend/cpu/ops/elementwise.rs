//! add, mul, scale, silu, relu, gelu and diag_mask_inf.

use super::super::strided::for_each_index;
use super::{parallel_fill, Src};
use crate::Result;

/// `x * sigmoid(x)`; saturates to 0 for large negative `x` without NaN.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// GELU with ggml's tanh approximation.
pub fn gelu(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044_715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh())
}

/// `f(a, b)` with `b` repeated over `a` (each dim of `b` divides `a`'s).
pub fn binary(
    a: Src,
    b: Src,
    threads: usize,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> Result<Vec<f32>> {
    let n0 = a.ne()[0];
    if let (Some(x), Some(y)) = (a.f32_slice(), b.f32_slice()) {
        // Dense operands, `b` of `a`'s shape or one row of it (a residual,
        // a norm's weight): row by row over the threads.
        let per_row = y.len() == n0 && b.ne()[0] == n0;
        if n0 > 0 && (y.len() == x.len() || per_row) {
            let mut out = vec![0.0; x.len()];
            parallel_fill(&mut out, n0, threads, |first, part| {
                for (r, row) in part.chunks_exact_mut(n0).enumerate() {
                    let at = (first + r) * n0;
                    let yr = if per_row { y } else { &y[at..at + n0] };
                    for ((o, &u), &v) in row.iter_mut().zip(&x[at..at + n0]).zip(yr) {
                        *o = f(u, v);
                    }
                }
                Ok(())
            })?;
            return Ok(out);
        }
    }
    let nb = b.ne();
    let mut out = Vec::with_capacity(a.layout.n_elements());
    for_each_index(a.ne(), |i| {
        let j = [i[0] % nb[0], i[1] % nb[1], i[2] % nb[2], i[3] % nb[3]];
        out.push(f(a.f32_at(i), b.f32_at(j)));
    });
    Ok(out)
}

/// `f(a)` element by element.
pub fn unary(a: Src, threads: usize, f: impl Fn(f32) -> f32 + Sync) -> Result<Vec<f32>> {
    let n0 = a.ne()[0];
    if let Some(x) = a.f32_slice().filter(|_| n0 > 0) {
        let mut out = vec![0.0; x.len()];
        parallel_fill(&mut out, n0, threads, |first, part| {
            let (at, len) = (first * n0, part.len());
            for (o, &u) in part.iter_mut().zip(&x[at..at + len]) {
                *o = f(u);
            }
            Ok(())
        })?;
        return Ok(out);
    }
    let mut out = Vec::with_capacity(a.layout.n_elements());
    for_each_index(a.ne(), |i| out.push(f(a.f32_at(i))));
    Ok(out)
}

/// Copies `a`, with -inf where column `i0` is past row `i1` plus `n_past`.
pub fn diag_mask_inf(a: Src, n_past: usize) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(a.layout.n_elements());
    for_each_index(a.ne(), |i| {
        out.push(if i[0] > n_past + i[1] {
            f32::NEG_INFINITY
        } else {
            a.f32_at(i)
        });
    });
    Ok(out)
}
