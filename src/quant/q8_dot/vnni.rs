//! The four-by-four tiles with AVX-512 VNNI, for CPUs that have it
//! (Intel since Ice Lake, AMD since Zen 4): the nibble blocks' and the
//! K-quants' ([`k_tile`]). [`super::avx2`]'s tile sums
//! each block dot across its vector before scaling it, and those
//! horizontal adds and permutes all run on one shuffle port, which bounds
//! it; here each of the 16 dots stays in its own eight lanes (one
//! `vpdpbusd` per block and pair, then one multiply-add by the pair's
//! scale, read from memory as a broadcast), with AVX-512's 32 vector
//! registers holding the 16 accumulators, and the lanes are summed once at
//! the end.
//!
//! # Safety
//! Every function here needs AVX2, FMA, F16C, AVX-512F, AVX-512VL and
//! AVX-512 VNNI.

use std::arch::x86_64::*;

use super::avx2::{
    codes, k_codes, nibble_codes, scale, scales_and_mins, sum8, KParts, Nibbles, IQ4,
};
use super::Q8Row;

/// Whether this CPU runs [`nibble_tile`].
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Four weight rows times four columns, as [`super::avx2`]'s tile:
/// (Σ d dx Σ code·xq, Σ o dx Σ xq) of row r and column j at 4r + j.
/// `columns[i]` holds block i's four column scales, then their scaled
/// code sums.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn nibble_tile<B, const CODES: u8>(
    rows: [&[B]; 4],
    xs: &[Q8Row; 4],
    columns: &[[f32; 8]],
    unpack: impl Fn(&B) -> Nibbles<'_>,
) -> ([f32; 16], [f32; 16]) {
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let lens = rows.iter().map(|r| r.len());
    let lens = lens.chain(cols.iter().map(|c| c.len()));
    let n_blocks = lens.min().unwrap_or(0).min(columns.len());
    let mut acc = [[_mm256_setzero_ps(); 4]; 4];
    let mut offsets = [_mm_setzero_ps(); 4];
    // Each pair's scale this block, written then read back as broadcasts
    // (loads; a broadcast from a register would take the shuffle port).
    let mut pair_scales = [0.0f32; 16];
    let f16 = super::f16_table();
    for i in 0..n_blocks {
        let w = rows.map(|r| unpack(&r[i]));
        // SAFETY (both loads): eight f32 of columns[i]; unaligned.
        let dx = unsafe { _mm_loadu_ps(columns[i].as_ptr()) };
        let ds = unsafe { _mm_loadu_ps(columns[i][4..].as_ptr()) };
        for (r, (_, _, [d, o])) in w.iter().enumerate() {
            let d = _mm_broadcast_ss(&f16[usize::from(d.to_bits())]);
            let o = _mm_broadcast_ss(&f16[usize::from(o.to_bits())]);
            // SAFETY: four f32 at 4r of sixteen; unaligned.
            unsafe { _mm_storeu_ps(pair_scales[4 * r..].as_mut_ptr(), _mm_mul_ps(d, dx)) };
            offsets[r] = _mm_fmadd_ps(o, ds, offsets[r]);
        }
        let c = w.map(|(qs, qh, _)| match CODES {
            // iq4's signed table values plus 128, as unsigned bytes: the
            // offset comes off at the end (vpdpbusd does not saturate
            // its pair sums, as vpmaddubsw does).
            IQ4 => _mm256_xor_si256(nibble_codes::<CODES>(qs, qh), _mm256_set1_epi8(-128)),
            _ => nibble_codes::<CODES>(qs, qh),
        });
        let pair_scales = std::hint::black_box(&pair_scales);
        // A column's codes at a time: fewer live registers than all four.
        for (j, col) in cols.iter().enumerate() {
            let xq = codes(&col[i].q);
            for r in 0..4 {
                let dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c[r], xq);
                let s = _mm256_broadcast_ss(&pair_scales[4 * r + j]);
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc[r][j]);
            }
        }
    }
    let mut out = ([0.0f32; 16], [0.0f32; 16]);
    for (r, (row, offset)) in acc.iter().zip(offsets).enumerate() {
        let mut offset_of = [0.0f32; 4];
        // SAFETY: four f32; unaligned.
        unsafe { _mm_storeu_ps(offset_of.as_mut_ptr(), offset) };
        for ((o, a), off) in out.0[4 * r..][..4].iter_mut().zip(row).zip(offset_of) {
            *o = match CODES {
                IQ4 => sum8(*a) - 128.0 * off,
                _ => sum8(*a),
            };
        }
        // SAFETY: four f32 at 4r of sixteen; unaligned.
        unsafe { _mm_storeu_ps(out.1[4 * r..].as_mut_ptr(), offset) };
    }
    out
}

/// Each column quad's per-block scales for [`nibble_tile`]: block i's four
/// `d`, then four `ds`.
pub fn column_scales(x4: &[Q8Row; 4]) -> Vec<[f32; 8]> {
    let n = x4.iter().map(|x| x.packed.len()).min().unwrap_or(0);
    (0..n)
        .map(|i| {
            let b = x4.each_ref().map(|x| &x.packed[i]);
            [
                b[0].d, b[1].d, b[2].d, b[3].d, b[0].ds, b[1].ds, b[2].ds, b[3].ds,
            ]
        })
        .collect()
}

/// Four q4_K/q5_K rows times four columns whose super-blocks share their
/// scale (ggml's q8_K, [`Q8Row::quantize_super`]): d dx Σ sc(s) Σ code·xq
/// - dmin Σ mn(s) dsum(s) over the super-blocks, row r and column j at
///   4r + j. Each sub-block's 16 code dots take their row's scale in
///   integers (`vpmaddubsw`, then `vpdpwssd` into the cell's
///   accumulator): two instructions per dot where the per-row loops take
///   about six, with AVX-512's 32 registers holding the 16 accumulators.
///   The cells' lanes are summed once per super-block.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn k_tile<B>(rows: [&[B]; 4], xs: &[Q8Row; 4], parts: impl Fn(&B) -> KParts<'_>) -> [f32; 16] {
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let supers = rows.iter().map(|r| r.len());
    let supers = supers.chain(cols.iter().map(|c| c.len() / 8));
    let n = supers.min().unwrap_or(0);
    let mut dots = [_mm256_setzero_ps(); 2];
    let mut mins = [_mm256_setzero_ps(); 2];
    for i in 0..n {
        let w = [
            parts(&rows[0][i]),
            parts(&rows[1][i]),
            parts(&rows[2][i]),
            parts(&rows[3][i]),
        ];
        let unpacked = [
            scales_and_mins(w[0].2),
            scales_and_mins(w[1].2),
            scales_and_mins(w[2].2),
            scales_and_mins(w[3].2),
        ];
        // SAFETY (the loads): qh is 32 readable bytes; unaligned.
        let high = |r: usize| {
            w[r].4
                .map(|h| unsafe { _mm256_loadu_si256(h.as_ptr().cast()) })
        };
        let high = [high(0), high(1), high(2), high(3)];
        let mut sums = [_mm256_setzero_si256(); 16];
        for g in 0..4 {
            // SAFETY: this function's CPU has AVX2.
            let c = unsafe {
                [
                    k_codes(w[0].3, high[0], g),
                    k_codes(w[1].3, high[1], g),
                    k_codes(w[2].3, high[2], g),
                    k_codes(w[3].3, high[3], g),
                ]
            };
            for t in 0..2 {
                let s = 2 * g + t;
                let xq = [
                    codes(&cols[0][8 * i + s].q),
                    codes(&cols[1][8 * i + s].q),
                    codes(&cols[2][8 * i + s].q),
                    codes(&cols[3][8 * i + s].q),
                ];
                for (r, (rc, (sc, _))) in c.iter().zip(&unpacked).enumerate() {
                    // Codes below 32 times bytes: pair sums within i16;
                    // times a scale below 64, within i32 over a super-block.
                    let scale = _mm256_set1_epi16(i16::from(sc[s]));
                    for (j, x) in xq.iter().enumerate() {
                        let p = _mm256_maddubs_epi16(rc[t], *x);
                        sums[4 * r + j] = _mm256_dpwssd_epi32(sums[4 * r + j], p, scale);
                    }
                }
            }
        }
        // Cell (r, j)'s step d dx, and its minimums' Σ mn(s) dsum(s).
        let d = [scale(w[0].0), scale(w[1].0), scale(w[2].0), scale(w[3].0)];
        let dmin = [scale(w[0].1), scale(w[1].1), scale(w[2].1), scale(w[3].1)];
        let dx = [0, 1, 2, 3].map(|j| cols[j][8 * i].d);
        let dx = _mm256_setr_ps(dx[0], dx[1], dx[2], dx[3], dx[0], dx[1], dx[2], dx[3]);
        let mut dsums = [_mm256_setzero_ps(); 4];
        for (j, x) in xs.iter().enumerate() {
            // SAFETY: eight f32 of the column's dsums from 8i (its
            // blocks, at least 8 (i + 1)); unaligned.
            dsums[j] = unsafe { _mm256_loadu_ps(x.dsums[8 * i..8 * i + 8].as_ptr()) };
        }
        let mut row_mins = [_mm256_setzero_ps(); 4];
        for (r, (_, mn)) in unpacked.iter().enumerate() {
            let mn = _mm256_cvtepu8_epi32(_mm_set_epi64x(0, i64::from_le_bytes(*mn)));
            row_mins[r] = _mm256_mul_ps(_mm256_cvtepi32_ps(mn), _mm256_set1_ps(dmin[r]));
        }
        for half in 0..2 {
            let (a, b) = (d[2 * half], d[2 * half + 1]);
            let rows_d = _mm256_setr_ps(a, a, a, a, b, b, b, b);
            // SAFETY: this function's CPU has AVX2.
            let total = unsafe { lane_sums_epi32(&sums[8 * half..8 * half + 8]) };
            dots[half] = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(total),
                _mm256_mul_ps(rows_d, dx),
                dots[half],
            );
            let mut products = [_mm256_setzero_ps(); 8];
            for (k, p) in products.iter_mut().enumerate() {
                *p = _mm256_mul_ps(row_mins[2 * half + k / 4], dsums[k % 4]);
            }
            // SAFETY: this function's CPU has AVX2.
            mins[half] = _mm256_add_ps(mins[half], unsafe { lane_sums_ps(&products) });
        }
    }
    let mut out = [0.0f32; 16];
    for half in 0..2 {
        // SAFETY: eight f32 at 8 half of sixteen; unaligned.
        unsafe {
            _mm256_storeu_ps(
                out[8 * half..].as_mut_ptr(),
                _mm256_sub_ps(dots[half], mins[half]),
            )
        };
    }
    out
}

/// Lane k: the sum of the eight lanes of `v[k]` (eight vectors).
///
/// # Safety
/// The CPU has AVX2 (inlined always, into the tile's loop).
#[inline(always)]
unsafe fn lane_sums_epi32(v: &[__m256i]) -> __m256i {
    // SAFETY: the caller's CPU has AVX2.
    unsafe {
        // Each hadd sums neighbouring lanes of two vectors per 128-bit half:
        // after two rounds lane k of each half holds v[k]'s (k < 4) or
        // v[4 + k]'s half sums, which the last add joins.
        let a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(a, b),
            _mm256_permute2x128_si256::<0x31>(a, b),
        )
    }
}

/// [`lane_sums_epi32`] of f32 lanes.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
unsafe fn lane_sums_ps(v: &[__m256]) -> __m256 {
    // SAFETY: the caller's CPU has AVX2.
    unsafe {
        let a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
        let b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(a, b),
            _mm256_permute2f128_ps::<0x31>(a, b),
        )
    }
}
