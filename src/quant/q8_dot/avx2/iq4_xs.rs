//! iq4_xs rows with AVX2: each 32-value group's codes looked up in the iq4
//! table, dotted as signed bytes, with its 6-bit scale.

use std::arch::x86_64::*;

use super::{
    add_scaled, by_fours, codes, cols_by_fours, flush_scaled, iq4_table, nibbles, scale, sum8,
};
use crate::quant::q8_dot::Q8Row;
use crate::quant::BlockIQ4XS;

/// iq4_xs against N columns: eight groups per block, each its x-block;
/// a group's codes are its table values (one `vpshufb`), dotted as q8_0's
/// signed bytes. Each group's dot takes its step in f32, or with `SHARED`
/// (every column's super-blocks share their scale,
/// [`Q8Row::quantize_super`]) its signed 6-bit scale in integers, summed
/// over the block and scaled by d dx once. The loop over blocks stays in
/// this function: an iterator of groups passed in from outside was not
/// inlined into it (a call per block for `next`, a third of a decode step).
#[target_feature(enable = "avx2,fma,f16c")]
fn iq4_xs_cols<const N: usize, const SHARED: bool>(
    blocks: &[BlockIQ4XS],
    xs: &[Q8Row; N],
) -> [f32; N] {
    let table = iq4_table();
    let mut acc = [_mm256_setzero_ps(); N];
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n_blocks = cols.iter().map(|c| c.len() / 8).min().unwrap_or(0);
    for (i, w) in blocks.iter().take(n_blocks).enumerate() {
        let d = scale(w.d);
        // Table values within ±127 times bytes: pair sums within i16;
        // times scales within ±32, within i32 over a block.
        let mut sums = [_mm256_setzero_si256(); N];
        for (s, qs) in w.qs.as_chunks::<16>().0.iter().enumerate() {
            let ls = w.scale(s) - 32;
            let values = _mm256_shuffle_epi8(table, nibbles(qs));
            let magnitude = _mm256_sign_epi8(values, values);
            let sc = _mm256_set1_epi16(ls as i16);
            for j in 0..N {
                let x = &cols[j][8 * i + s];
                let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(codes(&x.q), values));
                let scaled = _mm256_madd_epi16(pairs, sc);
                // SAFETY: this function's CPU has AVX2 and FMA.
                unsafe { add_scaled::<SHARED>(&mut sums[j], &mut acc[j], scaled, d * x.d) };
            }
        }
        // SAFETY: this function's CPU has AVX2 and FMA.
        unsafe { flush_scaled::<N, SHARED>(&sums, &mut acc, |j| d * cols[j][8 * i].d) };
    }
    acc.map(|a| sum8(a))
}

/// [`iq4_xs_cols`] of the super-block-scaled columns.
#[target_feature(enable = "avx2,fma,f16c")]
fn iq4_xs_shared<const N: usize>(blocks: &[BlockIQ4XS], xs: &[Q8Row; N]) -> [f32; N] {
    iq4_xs_cols::<N, true>(blocks, xs)
}

/// [`iq4_xs_cols`] of columns scaled per block.
#[target_feature(enable = "avx2,fma,f16c")]
fn iq4_xs_blocks<const N: usize>(blocks: &[BlockIQ4XS], xs: &[Q8Row; N]) -> [f32; N] {
    iq4_xs_cols::<N, false>(blocks, xs)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn iq4_xs(blocks: &[BlockIQ4XS], xs: &[Q8Row], out: &mut [f32]) {
    if xs.iter().all(Q8Row::shares_scales) {
        cols_by_fours!(iq4_xs_shared(blocks), xs, out);
    } else {
        cols_by_fours!(iq4_xs_blocks(blocks), xs, out);
    }
}
