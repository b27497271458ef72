//! The fast path's q2_K and q3_K loops. Both have 16-value sub-blocks with
//! their own integer scales, two per 32-value x-block, and codes in q2_K's
//! 2-bit layout, in which x-block `g` of a weight block is bits
//! `2 (g % 4)`.. of its `qs` bytes `32 (g / 4)`..`+ 32`, in value order
//! (q3_K adds bit `g` of its 32 `hmask` bytes). As ggml does, each block
//! sums its integer dots times the sub-blocks' scales in integers and
//! applies the f16 super-scale (and q2_K's super-minimum) once.

/// The loops in plain Rust.
pub(super) mod portable {
    use super::super::portable::half_dots;
    use super::super::{f16_to_f32, Q8Row, BLOCK};
    use crate::quant::q3_k::scale;
    use crate::quant::{BlockQ2K, BlockQ3K};

    /// The 2-bit fields of x-block `g` of a block's `qs`.
    fn two_bits(qs: &[u8; 64], g: usize) -> [i8; 32] {
        let (bytes, shift) = (&qs[32 * (g / 4)..][..32], 2 * (g % 4));
        std::array::from_fn(|l| ((bytes[l] >> shift) & 3) as i8)
    }

    /// Σ x-code over each 16-value half of an x-block.
    fn half_sums(xq: &[i8]) -> [i32; 2] {
        let mut sums = [0i32; 2];
        for (s, x) in sums.iter_mut().zip(xq.chunks(16)) {
            *s = x.iter().map(|&x| i32::from(x)).sum();
        }
        sums
    }

    /// The x-blocks of weight block `i`: index, codes and scale.
    fn x_blocks(x: &Q8Row, i: usize) -> impl Iterator<Item = (usize, &[i8], f32)> {
        let codes = x.q[BLOCK * 8 * i..][..256].chunks_exact(BLOCK);
        let scales = &x.d[8 * i..][..8];
        codes.zip(scales).enumerate().map(|(g, (q, &d))| (g, q, d))
    }

    /// q2_K: d sc(s) code - dmin mn(s) per sub-block s, so a block is
    /// d Σ dx Σ_s sc(s) Σ code xq - dmin Σ dx Σ_s mn(s) Σ xq.
    pub fn q2_k(blocks: &[BlockQ2K], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (i, w) in blocks.iter().enumerate() {
            let (mut dots, mut mins) = (0.0f32, 0.0f32);
            for (g, xq, dx) in x_blocks(x, i) {
                let [c0, c1] = half_dots(&two_bits(&w.qs, g), xq);
                let [x0, x1] = half_sums(xq);
                let (s0, s1) = (i32::from(w.scales[2 * g]), i32::from(w.scales[2 * g + 1]));
                dots += dx * ((s0 & 0xF) * c0 + (s1 & 0xF) * c1) as f32;
                mins += dx * ((s0 >> 4) * x0 + (s1 >> 4) * x1) as f32;
            }
            acc += f16_to_f32(w.d) * dots - f16_to_f32(w.dmin) * mins;
        }
        acc
    }

    /// q3_K: d (sc(s) - 32) code per sub-block s, code = 2 low bits + 4
    /// times the high bit, minus 4.
    pub fn q3_k(blocks: &[BlockQ3K], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (i, w) in blocks.iter().enumerate() {
            let mut block = 0.0f32;
            for (g, xq, dx) in x_blocks(x, i) {
                let mut c = two_bits(&w.qs, g);
                for (c, &h) in c.iter_mut().zip(&w.hmask) {
                    *c += (((h >> g) & 1) << 2) as i8 - 4;
                }
                let [c0, c1] = half_dots(&c, xq);
                let sc = |s: usize| i32::from(scale(&w.scales, s)) - 32;
                block += dx * (sc(2 * g) * c0 + sc(2 * g + 1) * c1) as f32;
            }
            acc += f16_to_f32(w.d) * block;
        }
        acc
    }
}

/// The loops with AVX2: an x-block's 32 codes times its 32 activations with
/// `vpmaddubsw`, then `vpmaddwd` with the two sub-blocks' scales (one per
/// 128-bit half), as the q6_K loop does. A block's codes are unpacked once
/// for the N columns.
///
/// # Safety
/// Every function here needs a CPU with AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    use super::super::avx2::{by_fours, codes, scale, sum8};
    use super::super::Q8Row;
    use crate::quant::q3_k::scale as scale6;
    use crate::quant::{BlockQ2K, BlockQ3K};

    /// 16-bit lanes of `lo` in the low 128 bits (x-block values 0..16),
    /// `hi` in the high ones.
    #[target_feature(enable = "avx2,fma")]
    fn halves(lo: i16, hi: i16) -> __m256i {
        _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi))
    }

    /// `v >> n` per 16-bit lane, `n` not a constant.
    #[target_feature(enable = "avx2,fma")]
    fn shift_right(v: __m256i, n: usize) -> __m256i {
        _mm256_srl_epi16(v, _mm_cvtsi32_si128(n as i32))
    }

    /// q2_K: per x-block of each of N columns, d dx Σ sc code xq - dmin dx
    /// Σ mn xq.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q2_k_cols<const N: usize>(blocks: &[BlockQ2K], xs: &[Q8Row; N]) -> [f32; N] {
        let low2 = _mm256_set1_epi8(3);
        let ones = _mm256_set1_epi8(1);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut cols = xs.each_ref().map(Q8Row::blocks);
        for w in blocks {
            let (d, dmin) = (scale(w.d), scale(w.dmin));
            for g in 0..8 {
                // SAFETY: 32 bytes at 32 (g / 4) of qs's 64; the load is unaligned.
                let packed = unsafe { _mm256_loadu_si256(w.qs[32 * (g / 4)..].as_ptr().cast()) };
                let c = _mm256_and_si256(shift_right(packed, 2 * (g % 4)), low2);
                let (s0, s1) = (i16::from(w.scales[2 * g]), i16::from(w.scales[2 * g + 1]));
                let steps = halves(s0 & 0xF, s1 & 0xF);
                let mins = halves(s0 >> 4, s1 >> 4);
                for (j, col) in cols.iter_mut().enumerate() {
                    let Some((xq, dx, _)) = col.next() else { break };
                    let x = codes(xq);
                    let dots = _mm256_madd_epi16(_mm256_maddubs_epi16(c, x), steps);
                    let sums = _mm256_madd_epi16(_mm256_maddubs_epi16(ones, x), mins);
                    let a =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), _mm256_set1_ps(d * dx), acc[j]);
                    acc[j] =
                        _mm256_fnmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(dmin * dx), a);
                }
            }
        }
        acc.map(|a| sum8(a))
    }

    /// q3_K: codes 0..8 (2 low bits, the high bit as 4), Σ (code - 4) xq
    /// per 16 values as the codes' vpmaddubsw minus that of 4, times the
    /// sub-blocks' signed scales, times d dx.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q3_k_cols<const N: usize>(blocks: &[BlockQ3K], xs: &[Q8Row; N]) -> [f32; N] {
        let low2 = _mm256_set1_epi8(3);
        let one = _mm256_set1_epi8(1);
        let bias = _mm256_set1_epi8(4);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut cols = xs.each_ref().map(Q8Row::blocks);
        for w in blocks {
            let d = scale(w.d);
            // SAFETY: hmask is 32 readable bytes; the load is unaligned.
            let high = unsafe { _mm256_loadu_si256(w.hmask.as_ptr().cast()) };
            let sc = |s: usize| i16::from(scale6(&w.scales, s)) - 32;
            for g in 0..8 {
                // SAFETY: 32 bytes at 32 (g / 4) of qs's 64; the load is unaligned.
                let packed = unsafe { _mm256_loadu_si256(w.qs[32 * (g / 4)..].as_ptr().cast()) };
                let lo = _mm256_and_si256(shift_right(packed, 2 * (g % 4)), low2);
                let hi = _mm256_and_si256(shift_right(high, g), one);
                let c = _mm256_or_si256(lo, _mm256_slli_epi16::<2>(hi));
                let steps = halves(sc(2 * g), sc(2 * g + 1));
                for (j, col) in cols.iter_mut().enumerate() {
                    let Some((xq, dx, _)) = col.next() else { break };
                    let x = codes(xq);
                    let pairs =
                        _mm256_sub_epi16(_mm256_maddubs_epi16(c, x), _mm256_maddubs_epi16(bias, x));
                    let sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, steps));
                    acc[j] = _mm256_fmadd_ps(sums, _mm256_set1_ps(d * dx), acc[j]);
                }
            }
        }
        acc.map(|a| sum8(a))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q2_k(blocks: &[BlockQ2K], xs: &[Q8Row], out: &mut [f32]) {
        by_fours(
            xs,
            out,
            |x4| q2_k_cols::<4>(blocks, x4),
            |x| q2_k_cols::<1>(blocks, std::array::from_ref(x))[0],
        );
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q3_k(blocks: &[BlockQ3K], xs: &[Q8Row], out: &mut [f32]) {
        by_fours(
            xs,
            out,
            |x4| q3_k_cols::<4>(blocks, x4),
            |x| q3_k_cols::<1>(blocks, std::array::from_ref(x))[0],
        );
    }
}
