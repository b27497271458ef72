//! Decode's nibble rows: four weight rows times one column per pass, for
//! the four-stream loop of [`super::nibble_rows`].

use std::arch::x86_64::*;

use super::{codes, madd_u8_i8, nibble_codes, unsigned_pair, Nibbles, PLAIN};
use crate::quant::q8_dot::Q8Row;

/// Four weight rows of nibble blocks, as stored, times one column (decode,
/// where unpacking the rows first would cost more than it saves): (Σ d dx
/// Σ code·xq, Σ o dx Σ xq) of each row. Per block the four rows' dots are
/// summed in integers (two `vphaddd` for all four) and scaled by one
/// multiply-add, and the column's codes load once for the four rows. Each
/// row's sums stay in lanes of their own, so a row's result does not
/// depend on the rows beside it.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn nibble_quad_rows<'a, B, const CODES: u8>(
    rows: [&'a [B]; 4],
    column: &Q8Row,
    unpack: impl Fn(&'a B) -> Nibbles<'a>,
) -> ([f32; 4], [f32; 4]) {
    let col = &column.packed[..];
    let lens = rows.iter().map(|r| r.len()).chain([col.len()]);
    let n_blocks = lens.min().unwrap_or(0);
    let mask = _mm256_set1_epi8(0x0f);
    let mut dots = _mm_setzero_ps();
    let mut offsets = _mm_setzero_ps();
    // Straight-line code, no closures: intrinsics inside a closure are not
    // inlined into this target-feature function.
    for (i, x) in col.iter().enumerate().take(n_blocks) {
        let (w0, w1, w2, w3) = (
            unpack(&rows[0][i]),
            unpack(&rows[1][i]),
            unpack(&rows[2][i]),
            unpack(&rows[3][i]),
        );
        let f = _mm256_cvtph_ps(_mm_setr_epi16(
            w0.2[0].to_bits() as i16,
            w1.2[0].to_bits() as i16,
            w2.2[0].to_bits() as i16,
            w3.2[0].to_bits() as i16,
            w0.2[1].to_bits() as i16,
            w1.2[1].to_bits() as i16,
            w2.2[1].to_bits() as i16,
            w3.2[1].to_bits() as i16,
        ));
        let (d, o) = (_mm256_castps256_ps128(f), _mm256_extractf128_ps::<1>(f));
        let sums = if CODES == PLAIN {
            // Two rows' 16 code bytes side by side: their low nibbles
            // (values 0..16) against the column's first 16 codes in both
            // halves, the high ones against the last 16.
            // SAFETY (all four): 16 bytes each, of two rows' codes and of
            // the column's 32 codes; unaligned.
            let (v01, v23, xlo, xhi) = unsafe {
                (
                    _mm256_loadu2_m128i(w1.0.as_ptr().cast(), w0.0.as_ptr().cast()),
                    _mm256_loadu2_m128i(w3.0.as_ptr().cast(), w2.0.as_ptr().cast()),
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(x.q.as_ptr().cast())),
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(x.q[16..].as_ptr().cast())),
                )
            };
            let lo01 = _mm256_and_si256(v01, mask);
            let hi01 = _mm256_and_si256(_mm256_srli_epi16::<4>(v01), mask);
            let lo23 = _mm256_and_si256(v23, mask);
            let hi23 = _mm256_and_si256(_mm256_srli_epi16::<4>(v23), mask);
            let p01 = _mm256_add_epi32(madd_u8_i8(lo01, xlo), madd_u8_i8(hi01, xhi));
            let p23 = _mm256_add_epi32(madd_u8_i8(lo23, xlo), madd_u8_i8(hi23, xhi));
            // Lanes [r0 r0 r2 r2 | r1 r1 r3 r3], then [r0 r2 . . | r1 r3 . .].
            let t = _mm256_hadd_epi32(p01, p23);
            let t = _mm256_hadd_epi32(t, t);
            _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t))
        } else {
            // A row at a time, as `nibble_codes` gives the codes.
            let xq = codes(&x.q);
            let (u0, v0) = unsigned_pair::<CODES>(nibble_codes::<CODES>(w0.0, w0.1), xq);
            let (u1, v1) = unsigned_pair::<CODES>(nibble_codes::<CODES>(w1.0, w1.1), xq);
            let (u2, v2) = unsigned_pair::<CODES>(nibble_codes::<CODES>(w2.0, w2.1), xq);
            let (u3, v3) = unsigned_pair::<CODES>(nibble_codes::<CODES>(w3.0, w3.1), xq);
            // Lanes [r0 r1 r2 r3] per half, then the halves added.
            let t = _mm256_hadd_epi32(
                _mm256_hadd_epi32(madd_u8_i8(u0, v0), madd_u8_i8(u1, v1)),
                _mm256_hadd_epi32(madd_u8_i8(u2, v2), madd_u8_i8(u3, v3)),
            );
            _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t))
        };
        let step = _mm_mul_ps(d, _mm_set1_ps(x.d));
        dots = _mm_fmadd_ps(_mm_cvtepi32_ps(sums), step, dots);
        offsets = _mm_fmadd_ps(o, _mm_set1_ps(x.ds), offsets);
    }
    let mut out = ([0.0f32; 4], [0.0f32; 4]);
    // SAFETY (both stores): four f32; unaligned.
    unsafe {
        _mm_storeu_ps(out.0.as_mut_ptr(), dots);
        _mm_storeu_ps(out.1.as_mut_ptr(), offsets);
    }
    out
}
