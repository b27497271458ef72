//! The K-quant loops with AVX2 (q4_K, q5_K, q6_K): per 32-value
//! sub-block, the codes times the activations' bytes (`vpmaddubsw`), times
//! the sub-block's scale, either in f32 per sub-block (activations with a
//! scale per 32 values) or in integers summed over the 256-value
//! super-block (ggml's q8_K activations, [`Q8Row::quantize_super`]).
//!
//! # Safety
//! Every function here needs a CPU with AVX2, FMA and F16C.

use std::arch::x86_64::*;

use half::f16;

use super::super::{prefetch_row, prefetch_rows, vnni, PREFETCH_ROWS_BELOW};
use super::{
    add_scaled, by_fours, by_tiles, codes, cols_by_fours, dot_u8_i8, flush_scaled, scale, sum8,
};
use crate::quant::q4_k::scale_min;
use crate::quant::q8_dot::Q8Row;
use crate::quant::{BlockQ4K, BlockQ5K, BlockQ6K};

/// The codes of sub-blocks 2g and 2g + 1 of a q4_K/q5_K block: the low
/// and high nibbles of its code bytes 32g.., with (q5_K) bits 2g and
/// 2g + 1 of the fifth-bit bytes `high` as their fifth bits. Not a
/// `target_feature` function, so that it is always inlined (a call would
/// spill the callers' accumulators).
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(in crate::quant::q8_dot) unsafe fn k_codes(
    qs: &[u8; 128],
    high: Option<__m256i>,
    g: usize,
) -> [__m256i; 2] {
    // SAFETY: the caller's CPU has AVX2; the load reads 32 bytes of the
    // 128 from 32g (g < 4), unaligned.
    unsafe {
        let mask = _mm256_set1_epi8(0x0f);
        let packed = _mm256_loadu_si256(qs[32 * g..][..32].as_ptr().cast());
        let mut pair = [
            _mm256_and_si256(packed, mask),
            _mm256_and_si256(_mm256_srli_epi16::<4>(packed), mask),
        ];
        if let Some(h) = high {
            for (t, c) in pair.iter_mut().enumerate() {
                let n = _mm_cvtsi32_si128((2 * g + t) as i32);
                let bit = _mm256_and_si256(_mm256_srl_epi16(h, n), _mm256_set1_epi8(1));
                *c = _mm256_or_si256(*c, _mm256_slli_epi16::<4>(bit));
            }
        }
        pair
    }
}

/// q4_K and q5_K: per sub-block s and each of N columns, d sc(s) dx Σ
/// code xq - dmin mn(s) dx Σ xq. `qh` holds q5_K's fifth bits (bit s
/// of byte l for value l of sub-block s). A sub-block's codes and scales
/// are unpacked once for the N columns.
#[target_feature(enable = "avx2,fma,f16c")]
fn k_quant<'a, const N: usize>(
    blocks: impl Iterator<Item = KParts<'a>>,
    xs: &[Q8Row; N],
) -> [f32; N] {
    let mut acc = [_mm256_setzero_ps(); N];
    let mut offsets = [0.0f32; N];
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n_blocks = cols.iter().map(|c| c.len() / 8).min().unwrap_or(0);
    for (i, (d, dmin, scales, qs, qh)) in blocks.take(n_blocks).enumerate() {
        let (d, dmin) = (scale(d), scale(dmin));
        // SAFETY: qh is 32 readable bytes; the load is unaligned.
        let high = qh.map(|h| unsafe { _mm256_loadu_si256(h.as_ptr().cast()) });
        for g in 0..4 {
            // SAFETY: this function's CPU has AVX2.
            let pair = unsafe { k_codes(qs, high, g) };
            for (t, c) in pair.into_iter().enumerate() {
                let (sc, mn) = scale_min(scales, 2 * g + t);
                let (step, offset) = (d * f32::from(sc), dmin * f32::from(mn));
                for j in 0..N {
                    let x = &cols[j][8 * i + 2 * g + t];
                    let p = dot_u8_i8(c, codes(&x.q));
                    acc[j] = _mm256_fmadd_ps(p, _mm256_set1_ps(step * x.d), acc[j]);
                    offsets[j] += offset * x.ds;
                }
            }
        }
    }
    std::array::from_fn(|j| sum8(acc[j]) - offsets[j])
}

/// The eight 6-bit scales and eight minimums of a q4_K/q5_K block's 12
/// packed bytes (see [`scale_min`]), unpacked four at a time with word
/// masks, as bytes.
#[inline(always)]
pub(in crate::quant::q8_dot) fn scales_and_mins(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let word = |i: usize| {
        u32::from_le_bytes([
            packed[4 * i],
            packed[4 * i + 1],
            packed[4 * i + 2],
            packed[4 * i + 3],
        ])
    };
    let (a, b, c) = (word(0), word(1), word(2));
    // Sub-blocks 0..4 keep their low six bits; 4..8 take four bits from
    // the last word and their top two from the top of the first (scales)
    // or second (minimums).
    let scales = [a & LOW6, (c & LOW4) | (((a >> 6) & TOP2) << 4)];
    let mins = [b & LOW6, ((c >> 4) & LOW4) | (((b >> 6) & TOP2) << 4)];
    let bytes = |w: [u32; 2]| {
        let (lo, hi) = (w[0].to_le_bytes(), w[1].to_le_bytes());
        [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
    };
    (bytes(scales), bytes(mins))
}

/// [`k_quant`] for columns whose super-blocks share their scale
/// ([`Q8Row::quantize_super`], ggml's q8_K): each sub-block's code dots are
/// multiplied by its 6-bit scale in integers (`vpmaddwd`) and summed over
/// the super-block, then converted and scaled once, as ggml's q4_K x q8_K;
/// the minimums times the sub-blocks' scaled code sums are one vector
/// multiply-add per super-block.
#[target_feature(enable = "avx2,fma,f16c")]
fn k_quant_shared<'a, const N: usize>(
    blocks: impl Iterator<Item = KParts<'a>>,
    xs: &[Q8Row; N],
) -> [f32; N] {
    let mut acc = [_mm256_setzero_ps(); N];
    let mut offsets = [_mm256_setzero_ps(); N];
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n_blocks = cols.iter().map(|c| c.len() / 8).min().unwrap_or(0);
    for (i, (d, dmin, packed_scales, qs, qh)) in blocks.take(n_blocks).enumerate() {
        // SAFETY: qh is 32 readable bytes; the load is unaligned.
        let high = qh.map(|h| unsafe { _mm256_loadu_si256(h.as_ptr().cast()) });
        let (scales, mins) = scales_and_mins(packed_scales);
        let mut sums = [_mm256_setzero_si256(); N];
        for g in 0..4 {
            // SAFETY: this function's CPU has AVX2.
            let pair = unsafe { k_codes(qs, high, g) };
            for (t, c) in pair.into_iter().enumerate() {
                // Codes below 32 times bytes: pair sums within i16; times
                // a scale below 64, within i32 over a super-block.
                let sc = _mm256_set1_epi16(i16::from(scales[2 * g + t]));
                for j in 0..N {
                    let p = _mm256_maddubs_epi16(c, codes(&cols[j][8 * i + 2 * g + t].q));
                    sums[j] = _mm256_add_epi32(sums[j], _mm256_madd_epi16(p, sc));
                }
            }
        }
        let (d, dmin) = (scale(d), scale(dmin));
        let mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi64x(
            0,
            i64::from_le_bytes(mins),
        )));
        let mins = _mm256_mul_ps(mins, _mm256_set1_ps(dmin));
        for j in 0..N {
            let step = _mm256_set1_ps(d * cols[j][8 * i].d);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[j]), step, acc[j]);
            // SAFETY: eight f32 of the column's scaled code sums from 8i
            // (its blocks, at least 8 (i + 1)); the load is unaligned.
            let dsums = unsafe { _mm256_loadu_ps(xs[j].dsums[8 * i..8 * i + 8].as_ptr()) };
            offsets[j] = _mm256_fmadd_ps(mins, dsums, offsets[j]);
        }
    }
    std::array::from_fn(|j| sum8(acc[j]) - sum8(offsets[j]))
}

/// [`k_quant`] (or [`k_quant_shared`], where every column's super-blocks
/// share their scales) of every column into `out`.
#[target_feature(enable = "avx2,fma,f16c")]
fn k_quant_columns<'a, I>(blocks: impl Fn() -> I, xs: &[Q8Row], out: &mut [f32])
where
    I: Iterator<Item = KParts<'a>>,
{
    if xs.iter().all(Q8Row::shares_scales) {
        cols_by_fours!(k_quant_shared(blocks()), xs, out);
    } else {
        cols_by_fours!(k_quant(blocks()), xs, out);
    }
}

/// A q4_K/q5_K block's super-scale, super-minimum, packed scales, codes
/// and (q5_K) fifth bits.
pub(in crate::quant::q8_dot) type KParts<'a> =
    (f16, f16, &'a [u8; 12], &'a [u8; 128], Option<&'a [u8; 32]>);

/// Rows of blocks `B` (`per_row` each, the first row `first_row` of its
/// matrix) dotted with every column into `out`: four rows by four columns
/// at a time through `tile` (a VNNI tile, called only where the CPU has
/// AVX-512 VNNI) where the columns share their super-blocks' scales (a
/// prompt's), the other rows and columns through `row` ([`by_tiles`]); row
/// by row everywhere else.
#[inline(always)]
fn tiles_or_rows<B>(
    blocks: &[B],
    per_row: usize,
    first_row: usize,
    xs: &[Q8Row],
    out: &mut [f32],
    tile: impl Fn([&[B]; 4], &[Q8Row; 4]) -> [f32; 16],
    row: impl Fn(&[B], &[Q8Row], &mut [f32]),
) {
    if xs.len() >= 4 && vnni::available() && xs.iter().all(Q8Row::shares_scales) {
        let tile = |rows: [&[B]; 4], _, x4: &[Q8Row; 4]| tile(rows, x4);
        by_tiles(blocks, per_row, first_row, xs, out, tile, row);
        return;
    }
    // Row by row, short rows prefetched as `by_rows` does.
    let per_row = per_row.max(1);
    let prefetch = per_row * size_of::<B>() < PREFETCH_ROWS_BELOW;
    let ahead = prefetch_rows::<B>(per_row);
    let rows = blocks.chunks_exact(per_row);
    for (r, (w, o)) in rows.zip(out.chunks_exact_mut(xs.len().max(1))).enumerate() {
        if prefetch {
            prefetch_row(blocks, per_row, r + ahead);
        }
        row(w, xs, o);
    }
}

/// [`tiles_or_rows`] of q4_K/q5_K blocks, whose parts `parts` gives.
#[target_feature(enable = "avx2,fma,f16c")]
fn k_quant_rows<B>(
    blocks: &[B],
    per_row: usize,
    first_row: usize,
    xs: &[Q8Row],
    out: &mut [f32],
    parts: impl Fn(&B) -> KParts<'_> + Copy,
) {
    // SAFETY: tiles_or_rows calls the tile only where the CPU has AVX-512 VNNI.
    let tile = |rows: [&[B]; 4], x4: &[Q8Row; 4]| unsafe { vnni::k_tile(rows, x4, parts) };
    let row =
        |w: &[B], xs: &[Q8Row], out: &mut [f32]| k_quant_columns(|| w.iter().map(parts), xs, out);
    tiles_or_rows(blocks, per_row, first_row, xs, out, tile, row);
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q4_k(blocks: &[BlockQ4K], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    k_quant_rows(blocks, per_row, first_row, xs, out, |w| {
        (w.d, w.dmin, &w.scales, &w.qs, None)
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q5_k(blocks: &[BlockQ5K], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    k_quant_rows(blocks, per_row, first_row, xs, out, |w| {
        (w.d, w.dmin, &w.scales, &w.qs, Some(&w.qh))
    })
}

/// q6_K: per 32-value group, 6-bit codes (0..64) from 32 ql nibbles
/// and 32 qh bit pairs, Σ (code - 32) xq per 16 values (vpmaddubsw of
/// the codes minus that of 32), times the two 16-value sub-blocks'
/// scales (vpmaddwd), times d dx. Each group's codes are built once for
/// the N columns. With `SHARED` (every column's super-blocks share their
/// scale, [`Q8Row::quantize_super`]) the scaled sums stay in integers over
/// the super-block and take d dx once, as ggml's q6_K x q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
fn q6_k_cols<const N: usize, const SHARED: bool>(blocks: &[BlockQ6K], xs: &[Q8Row; N]) -> [f32; N] {
    let low4 = _mm256_set1_epi8(0x0f);
    let low2 = _mm256_set1_epi8(0x03);
    let bias = _mm256_set1_epi8(32);
    let mut acc = [_mm256_setzero_ps(); N];
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n_blocks = cols.iter().map(|c| c.len() / 8).min().unwrap_or(0);
    for (i, w) in blocks.iter().take(n_blocks).enumerate() {
        let d = scale(w.d);
        // Codes below 64 times bytes, less 32 times them: pair sums within
        // i16; times 8-bit scales, within i32 over a super-block.
        let mut sums = [_mm256_setzero_si256(); N];
        for h in 0..2 {
            // SAFETY: 32 bytes at 64h and 64h + 32 of ql's 128, at 32h
            // of qh's 64; the loads are unaligned.
            let (ql0, ql1, qh) = unsafe {
                (
                    _mm256_loadu_si256(w.ql[64 * h..].as_ptr().cast()),
                    _mm256_loadu_si256(w.ql[64 * h + 32..].as_ptr().cast()),
                    _mm256_loadu_si256(w.qh[32 * h..].as_ptr().cast()),
                )
            };
            // Group t: ql0/ql1 low nibbles, then high ones; qh bits 2t, 2t + 1.
            let lows = [
                _mm256_and_si256(ql0, low4),
                _mm256_and_si256(ql1, low4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low4),
            ];
            let highs = [
                _mm256_and_si256(qh, low2),
                _mm256_and_si256(_mm256_srli_epi16::<2>(qh), low2),
                _mm256_and_si256(_mm256_srli_epi16::<4>(qh), low2),
                _mm256_and_si256(_mm256_srli_epi16::<6>(qh), low2),
            ];
            for (t, (lo, hi)) in lows.into_iter().zip(highs).enumerate() {
                let c = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hi));
                let sc = |g: usize| i16::from(w.scales[8 * h + 2 * t + g]);
                let scales = _mm256_setr_m128i(_mm_set1_epi16(sc(0)), _mm_set1_epi16(sc(1)));
                for j in 0..N {
                    let xb = &cols[j][8 * i + 4 * h + t];
                    let x = codes(&xb.q);
                    let pairs =
                        _mm256_sub_epi16(_mm256_maddubs_epi16(c, x), _mm256_maddubs_epi16(bias, x));
                    let scaled = _mm256_madd_epi16(pairs, scales);
                    // SAFETY: this function's CPU has AVX2 and FMA.
                    unsafe { add_scaled::<SHARED>(&mut sums[j], &mut acc[j], scaled, d * xb.d) };
                }
            }
        }
        // SAFETY: this function's CPU has AVX2 and FMA.
        unsafe { flush_scaled::<N, SHARED>(&sums, &mut acc, |j| d * cols[j][8 * i].d) };
    }
    acc.map(|a| sum8(a))
}

/// [`q6_k_cols`] of the super-block-scaled columns ([`Q8Row::quantize_super`]).
#[target_feature(enable = "avx2,fma,f16c")]
fn q6_k_shared<const N: usize>(blocks: &[BlockQ6K], xs: &[Q8Row; N]) -> [f32; N] {
    q6_k_cols::<N, true>(blocks, xs)
}

/// [`q6_k_cols`] of columns scaled per block.
#[target_feature(enable = "avx2,fma,f16c")]
fn q6_k_blocks<const N: usize>(blocks: &[BlockQ6K], xs: &[Q8Row; N]) -> [f32; N] {
    q6_k_cols::<N, false>(blocks, xs)
}

/// q6_K rows ([`tiles_or_rows`] with [`vnni::q6_k_tile`], else [`q6_k_row`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q6_k(blocks: &[BlockQ6K], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    // SAFETY: tiles_or_rows calls the tile only where the CPU has AVX-512 VNNI.
    let tile = |rows: [&[BlockQ6K]; 4], x4: &[Q8Row; 4]| unsafe { vnni::q6_k_tile(rows, x4) };
    let row = |w: &[BlockQ6K], xs: &[Q8Row], out: &mut [f32]| q6_k_row(w, xs, out);
    tiles_or_rows(blocks, per_row, first_row, xs, out, tile, row);
}

/// One q6_K row dotted with every column.
#[target_feature(enable = "avx2,fma,f16c")]
fn q6_k_row(blocks: &[BlockQ6K], xs: &[Q8Row], out: &mut [f32]) {
    if xs.iter().all(Q8Row::shares_scales) {
        cols_by_fours!(q6_k_shared(blocks), xs, out);
    } else {
        cols_by_fours!(q6_k_blocks(blocks), xs, out);
    }
}
