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
    use crate::quant::q3_k::scales;
    use crate::quant::{BlockQ2K, BlockQ3K};

    /// The 2-bit fields of x-block `g` of a block's `qs`.
    fn two_bits(qs: &[u8; 64], g: usize) -> [i8; 32] {
        let (bytes, shift) = (&qs[32 * (g / 4)..][..32], 2 * (g % 4));
        std::array::from_fn(|l| ((bytes[l] >> shift) & 3) as i8)
    }

    /// The x-blocks of weight block `i`: index, codes and scale.
    fn x_blocks(x: &Q8Row, i: usize) -> impl Iterator<Item = (usize, &[i8], f32)> {
        let codes = x.q[BLOCK * 8 * i..][..256].chunks_exact(BLOCK);
        codes
            .zip(&x.d[8 * i..][..8])
            .enumerate()
            .map(|(g, (q, &d))| (g, q, d))
    }

    /// Σ over weight block `i`'s 16 sub-blocks s of `per(s)` times the
    /// scaled code sum of the activations' half s.
    fn by_halves(x: &Q8Row, i: usize, per: impl Fn(usize) -> f32) -> f32 {
        let halves = x.half_dsums[8 * i..][..8].iter().flatten();
        halves.enumerate().map(|(s, &h)| per(s) * h).sum()
    }

    /// q2_K: d sc(s) code - dmin mn(s) per sub-block s, so a block is
    /// d Σ dx Σ_s sc(s) Σ code xq - dmin Σ_s mn(s) dx Σ xq.
    pub fn q2_k(blocks: &[BlockQ2K], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (i, w) in blocks.iter().enumerate() {
            let mut dots = 0.0f32;
            for (g, xq, dx) in x_blocks(x, i) {
                let [c0, c1] = half_dots(&two_bits(&w.qs, g), xq);
                let sc = |s: usize| i32::from(w.scales[s] & 0xF);
                dots += dx * (sc(2 * g) * c0 + sc(2 * g + 1) * c1) as f32;
            }
            let mins = by_halves(x, i, |s| f32::from(w.scales[s] >> 4));
            acc += f16_to_f32(w.d) * dots - f16_to_f32(w.dmin) * mins;
        }
        acc
    }

    /// q3_K: d (sc(s) - 32) (code - 4) per sub-block s, code = 2 low bits +
    /// 4 times the high bit, so a block is d Σ dx Σ_s sc(s) Σ code xq -
    /// 4 d Σ_s sc(s) dx Σ xq.
    pub fn q3_k(blocks: &[BlockQ3K], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (i, w) in blocks.iter().enumerate() {
            let sc = scales(&w.scales).map(|s| i32::from(s) - 32);
            let mut dots = 0.0f32;
            for (g, xq, dx) in x_blocks(x, i) {
                let mut c = two_bits(&w.qs, g);
                for (c, &h) in c.iter_mut().zip(&w.hmask) {
                    *c |= (((h >> g) & 1) << 2) as i8;
                }
                let [c0, c1] = half_dots(&c, xq);
                dots += dx * (sc[2 * g] * c0 + sc[2 * g + 1] * c1) as f32;
            }
            let offsets = by_halves(x, i, |s| sc[s] as f32);
            acc += f16_to_f32(w.d) * (dots - 4.0 * offsets);
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

    use super::super::avx2::{by_fours, codes, cols_by_fours, scale, sum8};
    use super::super::Q8Row;
    use crate::quant::q3_k::scales;
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

    /// Σ over weight block `i`'s 16 sub-blocks of `per` (their factors,
    /// as i32 lanes: sub-blocks 0..8, then 8..16) times the scaled code sums
    /// of the column's 16 activation halves.
    #[target_feature(enable = "avx2,fma")]
    fn by_halves(x: &Q8Row, i: usize, per: [__m256i; 2]) -> __m256 {
        let h = &x.half_dsums[8 * i..][..8];
        // SAFETY: the 8 pairs are 16 readable f32, 8 from each pointer; the
        // loads are unaligned.
        let (h0, h1) = unsafe {
            (
                _mm256_loadu_ps(h.as_ptr().cast()),
                _mm256_loadu_ps(h[4..].as_ptr().cast()),
            )
        };
        let lo = _mm256_cvtepi32_ps(per[0]);
        _mm256_fmadd_ps(lo, h0, _mm256_mul_ps(_mm256_cvtepi32_ps(per[1]), h1))
    }

    /// 16 bytes as two vectors of eight i32s, sign- or zero-extended.
    #[target_feature(enable = "avx2,fma")]
    fn widen<const SIGNED: bool>(b: __m128i) -> [__m256i; 2] {
        let hi = _mm_unpackhi_epi64(b, b);
        if SIGNED {
            [_mm256_cvtepi8_epi32(b), _mm256_cvtepi8_epi32(hi)]
        } else {
            [_mm256_cvtepu8_epi32(b), _mm256_cvtepu8_epi32(hi)]
        }
    }

    /// q2_K: per x-block of each of N columns, d dx Σ sc code xq; per
    /// block, dmin Σ mn dx Σ xq from the activations' half sums.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q2_k_cols<const N: usize>(blocks: &[BlockQ2K], xs: &[Q8Row; N]) -> [f32; N] {
        let low2 = _mm256_set1_epi8(3);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut mins = [_mm256_setzero_ps(); N];
        let cols = xs.each_ref().map(|x| &x.packed[..]);
        let n_blocks = cols.iter().map(|c| c.len() / 8).min().unwrap_or(0);
        for (i, w) in blocks.iter().take(n_blocks).enumerate() {
            let (d, dmin) = (scale(w.d), _mm256_set1_ps(scale(w.dmin)));
            // SAFETY: scales is 16 readable bytes; the load is unaligned.
            let packed = unsafe { _mm_loadu_si128(w.scales.as_ptr().cast()) };
            let mn = widen::<false>(_mm_and_si128(
                _mm_srli_epi16::<4>(packed),
                _mm_set1_epi8(0x0f),
            ));
            for (j, x) in xs.iter().enumerate() {
                mins[j] = _mm256_fmadd_ps(by_halves(x, i, mn), dmin, mins[j]);
            }
            for g in 0..8 {
                // SAFETY: 32 bytes at 32 (g / 4) of qs's 64; the load is unaligned.
                let packed = unsafe { _mm256_loadu_si256(w.qs[32 * (g / 4)..].as_ptr().cast()) };
                let c = _mm256_and_si256(shift_right(packed, 2 * (g % 4)), low2);
                let sc = |s: usize| i16::from(w.scales[s] & 0xF);
                let steps = halves(sc(2 * g), sc(2 * g + 1));
                for j in 0..N {
                    let x = &cols[j][8 * i + g];
                    let dots = _mm256_madd_epi16(_mm256_maddubs_epi16(c, codes(&x.q)), steps);
                    let step = _mm256_set1_ps(d * x.d);
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), step, acc[j]);
                }
            }
        }
        std::array::from_fn(|j| sum8(_mm256_sub_ps(acc[j], mins[j])))
    }

    /// q3_K: codes 0..8 (2 low bits, the high bit as 4): per x-block of
    /// each of N columns, d dx Σ sc code xq; per block, the codes' offset
    /// 4 d Σ sc dx Σ xq from the activations' half sums.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q3_k_cols<const N: usize>(blocks: &[BlockQ3K], xs: &[Q8Row; N]) -> [f32; N] {
        let low2 = _mm256_set1_epi8(3);
        let one = _mm256_set1_epi8(1);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut offsets = [_mm256_setzero_ps(); N];
        let cols = xs.each_ref().map(|x| &x.packed[..]);
        let n_blocks = cols.iter().map(|c| c.len() / 8).min().unwrap_or(0);
        for (i, w) in blocks.iter().take(n_blocks).enumerate() {
            let d = scale(w.d);
            let sc = scales(&w.scales).map(|s| s as i8 - 32);
            // SAFETY: sc is 16 readable bytes, hmask 32; the loads are unaligned.
            let (signed, high) = unsafe {
                (
                    _mm_loadu_si128(sc.as_ptr().cast()),
                    _mm256_loadu_si256(w.hmask.as_ptr().cast()),
                )
            };
            let per = widen::<true>(signed);
            let four_d = _mm256_set1_ps(4.0 * d);
            for (j, x) in xs.iter().enumerate() {
                offsets[j] = _mm256_fmadd_ps(by_halves(x, i, per), four_d, offsets[j]);
            }
            for g in 0..8 {
                // SAFETY: 32 bytes at 32 (g / 4) of qs's 64; the load is unaligned.
                let packed = unsafe { _mm256_loadu_si256(w.qs[32 * (g / 4)..].as_ptr().cast()) };
                let lo = _mm256_and_si256(shift_right(packed, 2 * (g % 4)), low2);
                let hi = _mm256_and_si256(shift_right(high, g), one);
                let c = _mm256_or_si256(lo, _mm256_slli_epi16::<2>(hi));
                let steps = halves(i16::from(sc[2 * g]), i16::from(sc[2 * g + 1]));
                for j in 0..N {
                    let x = &cols[j][8 * i + g];
                    let dots = _mm256_madd_epi16(_mm256_maddubs_epi16(c, codes(&x.q)), steps);
                    let step = _mm256_set1_ps(d * x.d);
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), step, acc[j]);
                }
            }
        }
        std::array::from_fn(|j| sum8(_mm256_sub_ps(acc[j], offsets[j])))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q2_k(blocks: &[BlockQ2K], xs: &[Q8Row], out: &mut [f32]) {
        cols_by_fours!(q2_k_cols(blocks), xs, out);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q3_k(blocks: &[BlockQ3K], xs: &[Q8Row], out: &mut [f32]) {
        cols_by_fours!(q3_k_cols(blocks), xs, out);
    }
}
