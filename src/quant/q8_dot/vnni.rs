//! The four-by-four nibble tile with AVX-512 VNNI, for CPUs that have it
//! (Intel since Ice Lake, AMD since Zen 4). [`super::avx2`]'s tile sums
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

use super::avx2::{codes, nibble_codes, sum8, Nibbles, IQ4};
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
