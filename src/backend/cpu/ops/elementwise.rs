//! add, mul, scale, silu, relu, gelu and diag_mask_inf.

use std::sync::OnceLock;

use half::f16;

use super::super::strided::for_each_index;
use super::{each_row, parallel_fill, Src};
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

/// GELU as ggml's CPU backend computes it: of the input rounded to f16,
/// looked up in a table of every f16 input (f32 results here), 0 below
/// -10 and the input above 10. The fast path's GELU: a lookup where
/// [`gelu`] calls tanh (a tenth of Gemma 3's prompt time), within f16
/// rounding of it.
pub fn gelu_f16_table(x: f32) -> f32 {
    static TABLE: OnceLock<Vec<f32>> = OnceLock::new();
    if x <= -10.0 {
        return 0.0;
    }
    if x >= 10.0 {
        return x;
    }
    let table = TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|b| gelu(f16::from_bits(b).to_f32()))
            .collect()
    });
    table[usize::from(f16::from_f32(x).to_bits())]
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
    // Strided operands (views of a fused projection's halves): row by
    // row over the threads, `b`'s row read whole and repeated.
    let [_, n1, n2, _] = a.ne();
    let nb = b.ne();
    let mut out = vec![0.0; a.layout.n_elements()];
    if n0 == 0 || nb.contains(&0) {
        return Ok(out);
    }
    parallel_fill(&mut out, n0, threads, |first, part| {
        let mut b_row = vec![0.0f32; nb[0]];
        for (r, row) in part.chunks_exact_mut(n0).enumerate() {
            let flat = first + r;
            let (i1, i2, i3) = (flat % n1, flat / n1 % n2, flat / n1 / n2);
            a.row_f32(i1, i2, i3, row)?;
            b.row_f32(i1 % nb[1], i2 % nb[2], i3 % nb[3], &mut b_row)?;
            for (v, &w) in row.iter_mut().zip(b_row.iter().cycle()) {
                *v = f(*v, w);
            }
        }
        Ok(())
    })?;
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
    // A strided operand: row by row over the threads.
    each_row(a, threads, |row| {
        for v in row.iter_mut() {
            *v = f(*v);
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gelu_table_is_gelu_within_f16_rounding() {
        for i in -3000..=3000 {
            let x = i as f32 / 250.0 + 0.0013;
            let (exact, table) = (gelu(x), gelu_f16_table(x));
            // f16 keeps 11 significant bits; gelu's slope is at most 1.13.
            let limit = 1.2 * x.abs() / 2048.0 + 1e-6;
            assert!(
                (exact - table).abs() <= limit,
                "gelu({x}): {exact} vs {table}"
            );
        }
        assert_eq!(gelu_f16_table(-10.5), 0.0);
        assert_eq!(gelu_f16_table(12.25), 12.25);
        assert!(gelu_f16_table(f32::NAN).is_nan());
    }
}
