//! mul_mat: weights of any type times f32 activations, multi-threaded over
//! the weight rows; with `quantized_dots` (the fast path), quantized
//! weights take activations quantized to q8 blocks (ggml's CPU path,
//! [`q8_dot`]) and f16 weights a vectorized f16 dot ([`f16_dot`]).

use super::{parallel_fill, values_f32, Settings, Src};
use crate::quant::f16_dot;
use crate::quant::q8_dot::{self, Q8Row};
use crate::tensor::Layout;
use crate::{quant, DType, Error, Result};

/// f32 dot product with independent partial sums, so it vectorizes.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `a` `[K, M, A2, A3]` times `b` `[K, N, B2, B3]` gives `[M, N, B2, B3]`:
/// `out[m, n, i2, i3] = a[:, m, i2 / (B2 / A2), i3 / (B3 / A3)] . b[:, n, i2, i3]`.
pub fn mul_mat(a: Src, b: Src, settings: Settings<'_>) -> Result<Vec<f32>> {
    let Settings {
        threads,
        quantized_dots,
        spare,
    } = settings;
    let [k, m, a2, a3] = a.ne();
    let [_, n, b2, b3] = b.ne();
    if m == 0 || n == 0 || b2 * b3 == 0 {
        return Ok(vec![]);
    }
    let (r2, r3) = (b2 / a2, b3 / a3);
    let bv = values_f32(b, threads)?; // rows of K, in (n, i2, i3) order
    let dtype = a.layout.dtype;
    // Each activation column quantized once, for every weight row.
    let quantized = if quantized_dots
        && q8_dot::supports(dtype)
        && a.layout.rows_contiguous()
        && k > 0
        && k.is_multiple_of(32)
    {
        // A prompt's columns are quantized by the workers (5% of a prompt
        // on one thread).
        // Super-blocked weights take ggml's q8_K: one scale per 256 values.
        let super_blocks = dtype.block_elems() == 256;
        let mut columns = vec![Q8Row::default(); bv.len() / k];
        parallel_fill(&mut columns, 1, threads, |first, part| {
            for (j, q) in part.iter_mut().enumerate() {
                let x = &bv[(first + j) * k..][..k];
                match super_blocks {
                    true => q.quantize_super(x)?,
                    false => q.quantize(x)?,
                }
            }
            Ok(())
        })?;
        Some((q8_dot::RowDots::new(dtype, k)?, columns))
    } else {
        None
    };

    // Work items are (batch, weight row); the result is gathered per batch after.
    let mut by_row = spare.overwritable(b2 * b3 * m * n);
    // The q8 loops take rows sixteen or four at a time where the row index
    // (counted over all batches) is a multiple of that: the threads' parts
    // start at multiples of sixteen, so a row's result does not depend on
    // the thread count.
    let group = if quantized.is_some() && n >= 4 {
        q8_dot::TILE_ROWS
    } else {
        1
    };
    parallel_fill(&mut by_row, group * n, threads, |first_group, part| {
        let first = first_group * group;
        let mut row = vec![0.0f32; k];
        // The part's rows in runs within one batch, so that packed weight
        // rows go to the quantized loops many at a time.
        let mut done = 0;
        while done * n < part.len() {
            let flat = first + done;
            let (im, batch) = (flat % m, flat / m);
            let run = (m - im).min(part.len() / n - done);
            let dst = &mut part[done * n..][..run * n];
            done += run;
            let (i2, i3) = (batch % b2, batch / b2);
            let (a2, a3) = (i2 / r2, i3 / r3);
            let b_row = |j: usize| &bv[(batch * n + j) * k..][..k];
            if let Some((dots, columns)) = &quantized {
                // Quantized activations: integer dots per block, the
                // run's rows in one call where they are packed.
                let columns = &columns[batch * n..][..n];
                if let Some(rows) = a.packed_rows(im, run, a2, a3) {
                    dots.rows(rows, flat, columns, dst)?;
                    continue;
                }
                for (r, dst) in dst.chunks_exact_mut(n).enumerate() {
                    let row = a.packed_rows(im + r, 1, a2, a3);
                    let row = row.ok_or_else(|| Error::invalid("quantized rows are dense"))?;
                    dots.rows(row, flat + r, columns, dst)?;
                }
                continue;
            }
            for (r, dst) in dst.chunks_exact_mut(n).enumerate() {
                let im = im + r;
                match (n, a.row_bytes(im, a2, a3)) {
                    // f16 rows on the fast path: F16C conversion, several sums.
                    (_, Some(bytes)) if quantized_dots && dtype == DType::F16 => {
                        for (j, d) in dst.iter_mut().enumerate() {
                            *d = f16_dot::dot(bytes, b_row(j))?;
                        }
                    }
                    // One activation column: a fused dequantize-and-dot per block.
                    (1, Some(bytes)) => dst[0] = quant::dot_row(dtype, bytes, b_row(0))?,
                    _ => {
                        a.row_f32(im, a2, a3, &mut row)?;
                        for (j, d) in dst.iter_mut().enumerate() {
                            *d = dot_f32(&row, b_row(j));
                        }
                    }
                }
            }
        }
        Ok(())
    })?;

    // by_row is [batch][m][n]; the result is [batch][n][m]: the same for
    // one column, else gathered by output column in parallel (sequential
    // stores; the strided loads stay in cache, where scattered stores over
    // the whole result took 9% of a prompt's time).
    spare.give(bv);
    if n == 1 {
        return Ok(by_row);
    }
    let mut out = spare.overwritable(by_row.len());
    parallel_fill(&mut out, m, threads, |first, part| {
        for (item, dst) in part.chunks_exact_mut(m).enumerate() {
            let (batch, j) = ((first + item) / n, (first + item) % n);
            let block = &by_row[batch * m * n..][..m * n];
            for (im, d) in dst.iter_mut().enumerate() {
                *d = block[im * n + j];
            }
        }
        Ok(())
    })?;
    spare.give(by_row);
    Ok(out)
}

/// [`crate::graph::Op::MulMatId`]: `experts` `[K, M, E]` times `b` `[K, X,
/// T]` gives `[M, n_used, T]`, column `(s, t)` by expert `ids[s, t]`. The
/// columns that chose an expert go through [`mul_mat`] together, so a
/// prompt's tokens share their expert's weight reads.
pub fn mul_mat_id(experts: Src, b: Src, ids: Src, settings: Settings<'_>) -> Result<Vec<f32>> {
    let threads = settings.threads;
    let [k, m, n_expert, _] = experts.ne();
    let [_, x, _, _] = b.ne();
    let n_used = ids.ne()[0];
    let bv = values_f32(b, threads)?;
    let ids = ids.i32_in_order();
    let mut columns_of = vec![Vec::new(); n_expert];
    for (c, &e) in ids.iter().enumerate() {
        let e = usize::try_from(e)
            .ok()
            .filter(|&e| e < n_expert)
            .ok_or_else(|| Error::shape(format!("mul_mat_id: expert {e} of {n_expert}")))?;
        columns_of[e].push(c);
    }
    let mut out = vec![0.0f32; m * ids.len()];
    for (e, columns) in columns_of.iter().enumerate() {
        if columns.is_empty() {
            continue;
        }
        let mut gathered = Vec::with_capacity(columns.len() * k);
        for &c in columns {
            let (slot, token) = (c % n_used, c / n_used);
            gathered.extend_from_slice(&bv[(token * x + slot % x) * k..][..k]);
        }
        let layout = Layout::contiguous(DType::F32, [k, columns.len(), 1, 1])?;
        let gathered = Src::new(bytemuck::cast_slice(&gathered), 0, layout)?;
        let product = mul_mat(experts.at_dim2(e)?, gathered, settings)?;
        for (&c, column) in columns.iter().zip(product.chunks_exact(m)) {
            out[c * m..][..m].copy_from_slice(column);
        }
        settings.spare.give(product);
    }
    Ok(out)
}
