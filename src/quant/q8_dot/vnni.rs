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
    codes, k_codes, nibble_codes, scale, scales_and_mins, sum8, KParts, Nibbles, RowQuad, IQ4,
    PLAIN,
};
use super::{Q8Row, TILE_ROWS};
use crate::quant::BlockQ6K;

/// Whether this CPU runs [`nibble_tile`].
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Four weight rows (unpacked) times four columns, as [`super::avx2`]'s
/// tile: (Σ d dx Σ code·xq, Σ o dx Σ xq) of row r and column j at 4r + j.
/// `columns[i]` holds block i's four column scales, then their scaled
/// code sums.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn nibble_tile<const CODES: u8>(
    rows: &RowQuad,
    xs: &[Q8Row; 4],
    columns: &[[f32; 8]],
) -> ([f32; 16], [f32; 16]) {
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let lens = cols
        .iter()
        .map(|c| c.len())
        .chain([rows.codes.len(), columns.len()]);
    let n_blocks = lens.min().unwrap_or(0);
    let mut acc = [[_mm256_setzero_ps(); 4]; 4];
    let mut offsets = [_mm_setzero_ps(); 4];
    // Each pair's scale this block, written then read back as broadcasts
    // (loads; a broadcast from a register would take the shuffle port).
    let mut pair_scales = [0.0f32; 16];
    for i in 0..n_blocks {
        let (c, f) = (rows.codes[i], &rows.factors[i]);
        // iq4's signed table values plus 128, as unsigned bytes: the offset
        // comes off at the end (vpdpbusd does not saturate its pair sums,
        // as vpmaddubsw does).
        let c = match CODES {
            IQ4 => c.map(|c| _mm256_xor_si256(c, _mm256_set1_epi8(-128))),
            _ => c,
        };
        // SAFETY (both loads): eight f32 of columns[i]; unaligned.
        let dx = unsafe { _mm_loadu_ps(columns[i].as_ptr()) };
        let ds = unsafe { _mm_loadu_ps(columns[i][4..].as_ptr()) };
        for r in 0..4 {
            let d = _mm_broadcast_ss(&f[r]);
            let o = _mm_broadcast_ss(&f[4 + r]);
            // SAFETY: four f32 at 4r of sixteen; unaligned.
            unsafe { _mm_storeu_ps(pair_scales[4 * r..].as_mut_ptr(), _mm_mul_ps(d, dx)) };
            offsets[r] = _mm_fmadd_ps(o, ds, offsets[r]);
        }
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
/// scale (ggml's q8_K, [`Q8Row::quantize_super`]): over the super-blocks,
/// d dx Σ sc(s) Σ code·xq less dmin Σ mn(s) dsum(s), row r and column j at
/// 4r + j. Each sub-block's 16 code dots take their row's scale in integers
/// (`vpmaddubsw`, then `vpdpwssd` into the cell's accumulator): two
/// instructions per dot where the per-row loops take about six, with
/// AVX-512's 32 registers holding the 16 accumulators. The cells' lanes are
/// summed once per super-block.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn k_tile<B>(rows: [&[B]; 4], xs: &[Q8Row; 4], parts: impl Fn(&B) -> KParts<'_>) -> [f32; 16] {
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n = super_blocks(rows, xs);
    // SAFETY: this function's CPU has AVX.
    let mut cells = unsafe { Cells::new() };
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
        let offset = |r: usize, j: usize| _mm256_mul_ps(row_mins[r], dsums[j]);
        // SAFETY: this function's CPU has AVX2 and FMA.
        unsafe { cells.add_super(&sums, d, dx, offset) };
    }
    // SAFETY: this function's CPU has AVX2.
    unsafe { cells.result() }
}

/// The super-blocks that all four rows and columns have.
fn super_blocks<B>(rows: [&[B]; 4], xs: &[Q8Row; 4]) -> usize {
    let rows = rows.iter().map(|r| r.len());
    let cols = xs.iter().map(|x| x.packed.len() / 8);
    rows.chain(cols).min().unwrap_or(0)
}

/// `$name(v)`: lane k is the sum of the eight lanes of `v[k]` (eight
/// vectors of `$t`, AVX2). Each hadd sums neighbouring lanes of two
/// vectors per 128-bit half: after two rounds lane k of each half holds
/// v[k]'s (k < 4) or v[4 + k]'s half sums, which the last add joins.
macro_rules! lane_sums {
    ($name:ident, $t:ty, $hadd:ident, $permute:ident, $add:ident) => {
        /// # Safety
        /// The CPU has AVX2 (inlined always, into the tiles).
        #[inline(always)]
        unsafe fn $name(v: &[$t]) -> $t {
            // SAFETY: the caller's CPU has AVX2.
            unsafe {
                let a = $hadd($hadd(v[0], v[1]), $hadd(v[2], v[3]));
                let b = $hadd($hadd(v[4], v[5]), $hadd(v[6], v[7]));
                $add($permute::<0x20>(a, b), $permute::<0x31>(a, b))
            }
        }
    };
}

lane_sums!(
    lane_sums_epi32,
    __m256i,
    _mm256_hadd_epi32,
    _mm256_permute2x128_si256,
    _mm256_add_epi32
);
lane_sums!(
    lane_sums_ps,
    __m256,
    _mm256_hadd_ps,
    _mm256_permute2f128_ps,
    _mm256_add_ps
);

/// The 16 cells of a K-quant tile, rows by columns, as two vectors of
/// eight (rows 0-1, rows 2-3): the scaled code dots and the offsets
/// (minimums, q6_K's 32) to take off them.
struct Cells {
    dots: [__m256; 2],
    offsets: [__m256; 2],
}

impl Cells {
    /// # Safety
    /// The CPU has AVX.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: the caller's CPU has AVX.
        let zero = unsafe { _mm256_setzero_ps() };
        Cells {
            dots: [zero; 2],
            offsets: [zero; 2],
        }
    }

    /// Adds a super-block: each cell's integer `sums` (row r, column j at
    /// 4r + j) times d_r dx_j, and the lane sums of `offset(r, j)`.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA (inlined always, into the tiles).
    #[inline(always)]
    unsafe fn add_super(
        &mut self,
        sums: &[__m256i; 16],
        d: [f32; 4],
        dx: [f32; 4],
        offset: impl Fn(usize, usize) -> __m256,
    ) {
        // SAFETY: the caller's CPU has AVX2 and FMA.
        unsafe {
            let dx = _mm256_setr_ps(dx[0], dx[1], dx[2], dx[3], dx[0], dx[1], dx[2], dx[3]);
            for half in 0..2 {
                let (a, b) = (d[2 * half], d[2 * half + 1]);
                let step = _mm256_mul_ps(_mm256_setr_ps(a, a, a, a, b, b, b, b), dx);
                let total = lane_sums_epi32(&sums[8 * half..8 * half + 8]);
                self.dots[half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), step, self.dots[half]);
                let mut products = [_mm256_setzero_ps(); 8];
                for (k, p) in products.iter_mut().enumerate() {
                    *p = offset(2 * half + k / 4, k % 4);
                }
                self.offsets[half] = _mm256_add_ps(self.offsets[half], lane_sums_ps(&products));
            }
        }
    }

    /// Dots less offsets, row r and column j at 4r + j.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn result(self) -> [f32; 16] {
        let mut out = [0.0f32; 16];
        for half in 0..2 {
            // SAFETY: the caller's CPU has AVX2; eight f32 at 8 half of
            // sixteen, unaligned.
            unsafe {
                let v = _mm256_sub_ps(self.dots[half], self.offsets[half]);
                _mm256_storeu_ps(out[8 * half..].as_mut_ptr(), v);
            }
        }
        out
    }
}

/// The 32 codes (0..64) of group `t` (0..4) of half `h` of a q6_K block:
/// ql's low or high nibbles as the low bits, qh's bit pair 2t as the
/// high ones (values 128h + 32t.., activations' block 4h + t).
///
/// # Safety
/// The CPU has AVX2 (inlined always, into the tile's loop).
#[inline(always)]
unsafe fn q6_codes(w: &BlockQ6K, h: usize, t: usize) -> __m256i {
    // SAFETY: the caller's CPU has AVX2; the loads read 32 bytes of ql's
    // 128 from 64h + 32 (t % 2) and of qh's 64 from 32h, unaligned.
    unsafe {
        let ql = _mm256_loadu_si256(w.ql[64 * h + 32 * (t % 2)..][..32].as_ptr().cast());
        let qh = _mm256_loadu_si256(w.qh[32 * h..][..32].as_ptr().cast());
        let low4 = _mm256_set1_epi8(0x0f);
        let lo = match t {
            0 | 1 => _mm256_and_si256(ql, low4),
            _ => _mm256_and_si256(_mm256_srli_epi16::<4>(ql), low4),
        };
        let hi = match t {
            0 => qh,
            1 => _mm256_srli_epi16::<2>(qh),
            2 => _mm256_srli_epi16::<4>(qh),
            _ => _mm256_srli_epi16::<6>(qh),
        };
        let hi = _mm256_and_si256(hi, _mm256_set1_epi8(0x03));
        _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hi))
    }
}

/// Four q6_K rows times four columns whose super-blocks share their scale,
/// as [`k_tile`]: d dx Σ sc(s) Σ code·xq over each 16-value sub-block s,
/// less the codes' offset 32 d Σ sc(s) dsum(s) (the activations' half
/// sums), row r and column j at 4r + j.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn q6_k_tile(rows: [&[BlockQ6K]; 4], xs: &[Q8Row; 4]) -> [f32; 16] {
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n = super_blocks(rows, xs);
    // SAFETY: this function's CPU has AVX.
    let mut cells = unsafe { Cells::new() };
    for i in 0..n {
        let w = [&rows[0][i], &rows[1][i], &rows[2][i], &rows[3][i]];
        let mut sums = [_mm256_setzero_si256(); 16];
        for h in 0..2 {
            for t in 0..4 {
                // SAFETY: this function's CPU has AVX2.
                let c = unsafe {
                    [
                        q6_codes(w[0], h, t),
                        q6_codes(w[1], h, t),
                        q6_codes(w[2], h, t),
                        q6_codes(w[3], h, t),
                    ]
                };
                let b = 8 * i + 4 * h + t;
                let xq = [
                    codes(&cols[0][b].q),
                    codes(&cols[1][b].q),
                    codes(&cols[2][b].q),
                    codes(&cols[3][b].q),
                ];
                for (r, rc) in c.iter().enumerate() {
                    // Codes below 64 times bytes: pair sums within i16;
                    // times 8-bit scales, within i32 over a super-block.
                    let sc = |g: usize| i16::from(w[r].scales[8 * h + 2 * t + g]);
                    let scale = _mm256_setr_m128i(_mm_set1_epi16(sc(0)), _mm_set1_epi16(sc(1)));
                    for (j, x) in xq.iter().enumerate() {
                        let p = _mm256_maddubs_epi16(*rc, *x);
                        sums[4 * r + j] = _mm256_dpwssd_epi32(sums[4 * r + j], p, scale);
                    }
                }
            }
        }
        let d = [scale(w[0].d), scale(w[1].d), scale(w[2].d), scale(w[3].d)];
        let dx = [0, 1, 2, 3].map(|j| cols[j][8 * i].d);
        // Each row's 16 scales times 32 d, and each column's 16 half sums.
        let mut row_scales = [[_mm256_setzero_ps(); 2]; 4];
        for (r, rs) in row_scales.iter_mut().enumerate() {
            for (k, v) in rs.iter_mut().enumerate() {
                let bytes: [u8; 8] = std::array::from_fn(|l| w[r].scales[8 * k + l] as u8);
                let s = _mm256_cvtepi8_epi32(_mm_set_epi64x(0, i64::from_le_bytes(bytes)));
                *v = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(32.0 * d[r]));
            }
        }
        let mut halves = [[_mm256_setzero_ps(); 2]; 4];
        for (j, x) in xs.iter().enumerate() {
            let h = x.half_dsums[8 * i..8 * i + 8].as_flattened();
            // SAFETY (both loads): eight f32 of the column's 16 half sums
            // of super-block i; unaligned.
            halves[j] = unsafe {
                [
                    _mm256_loadu_ps(h.as_ptr()),
                    _mm256_loadu_ps(h[8..].as_ptr()),
                ]
            };
        }
        let offset = |r: usize, j: usize| {
            let (rs, hs) = (&row_scales[r], &halves[j]);
            _mm256_fmadd_ps(rs[1], hs[1], _mm256_mul_ps(rs[0], hs[0]))
        };
        // SAFETY: this function's CPU has AVX2 and FMA.
        unsafe { cells.add_super(&sums, d, dx, offset) };
    }
    // SAFETY: this function's CPU has AVX2.
    unsafe { cells.result() }
}

/// Sixteen weight rows' nibble blocks, unpacked once for all of a prompt's
/// columns ([`row_tile_columns`] reads them): per block, eight vectors of
/// sixteen words, one per group of four values, whose lane r holds row r's
/// four codes of the group, then the rows' scales and offset factors.
#[derive(Default)]
pub struct RowTile {
    groups: Vec<[[u32; TILE_ROWS]; 8]>,
    factors: Vec<[[f32; TILE_ROWS]; 2]>,
}

impl RowTile {
    /// Unpacks `rows` (their common length of blocks) into `self`,
    /// reusing its memory. Not for [`IQ4`] codes, which are signed.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub fn unpack<B, const CODES: u8>(
        &mut self,
        rows: [&[B]; TILE_ROWS],
        unpack: impl Fn(&B) -> Nibbles<'_>,
    ) {
        let n_blocks = rows.iter().map(|r| r.len()).min().unwrap_or(0);
        self.groups.resize(n_blocks, [[0; TILE_ROWS]; 8]);
        self.factors.resize(n_blocks, [[0.0; TILE_ROWS]; 2]);
        let blocks = self.groups.iter_mut().zip(self.factors.iter_mut());
        for (i, (groups, factors)) in blocks.enumerate() {
            // Loops rather than array maps: through the maps' closures,
            // the target-feature calls were not inlined.
            let mut halves = [[0i16; TILE_ROWS]; 2];
            let mut qs = [&[0u8; 16]; TILE_ROWS];
            let mut qh = [0u32; TILE_ROWS];
            for (r, row) in rows.iter().enumerate() {
                let (q, h, [d, o]) = unpack(&row[i]);
                (qs[r], qh[r]) = (q, h);
                halves[0][r] = d.to_bits() as i16;
                halves[1][r] = o.to_bits() as i16;
            }
            *groups = match CODES {
                PLAIN => plain_groups(&qs),
                _ => coded_groups::<CODES>(&qs, &qh),
            };
            for (f, h) in factors.iter_mut().zip(halves) {
                // SAFETY: sixteen f16 read, sixteen f32 written; unaligned.
                unsafe {
                    let v = _mm512_cvtph_ps(_mm256_loadu_si256(h.as_ptr().cast()));
                    _mm512_storeu_ps(f.as_mut_ptr(), v);
                }
            }
        }
    }
}

/// Sixteen rows' plain nibble codes as [`RowTile`]'s groups: four words
/// of each row's bytes, transposed (row r to lane r) in 128-bit lanes that
/// hold four rows each, then split into their low nibbles (groups 0..4)
/// and high nibbles (groups 4..8).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn plain_groups(qs: &[&[u8; 16]; TILE_ROWS]) -> [[u32; TILE_ROWS]; 8] {
    // z[k]'s 128-bit lane l: row 4l + k's sixteen bytes.
    let z: [__m512i; 4] = std::array::from_fn(|k| {
        // SAFETY (each load): sixteen readable bytes; unaligned.
        let lane = |l: usize| unsafe { _mm_loadu_si128(qs[4 * l + k].as_ptr().cast()) };
        let lo = _mm256_set_m128i(lane(1), lane(0));
        let hi = _mm256_set_m128i(lane(3), lane(2));
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    });
    // A 4 x 4 transpose of words within each 128-bit lane: word w of lane
    // l of z[k] goes to word k of lane l of w[w], that is, to lane 4l + k.
    let t = [
        _mm512_unpacklo_epi32(z[0], z[1]),
        _mm512_unpackhi_epi32(z[0], z[1]),
        _mm512_unpacklo_epi32(z[2], z[3]),
        _mm512_unpackhi_epi32(z[2], z[3]),
    ];
    let words = [
        _mm512_unpacklo_epi64(t[0], t[2]),
        _mm512_unpackhi_epi64(t[0], t[2]),
        _mm512_unpacklo_epi64(t[1], t[3]),
        _mm512_unpackhi_epi64(t[1], t[3]),
    ];
    let mask = _mm512_set1_epi8(0x0f);
    let mut groups = [[0u32; TILE_ROWS]; 8];
    for (w, v) in words.into_iter().enumerate() {
        let lo = _mm512_and_si512(v, mask);
        let hi = _mm512_and_si512(_mm512_srli_epi32::<4>(v), mask);
        // SAFETY (both stores): sixteen u32; unaligned.
        unsafe {
            _mm512_storeu_si512(groups[w].as_mut_ptr().cast(), lo);
            _mm512_storeu_si512(groups[4 + w].as_mut_ptr().cast(), hi);
        }
    }
    groups
}

/// Sixteen rows' codes with their fifth bits (or another [`nibble_codes`]
/// form) as [`RowTile`]'s groups: each row's 32 codes, eight rows
/// transposed at a time.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn coded_groups<const CODES: u8>(
    qs: &[&[u8; 16]; TILE_ROWS],
    qh: &[u32; TILE_ROWS],
) -> [[u32; TILE_ROWS]; 8] {
    let mut groups = [[0u32; TILE_ROWS]; 8];
    for at in [0, 8] {
        let mut codes = [_mm256_setzero_si256(); 8];
        for (r, c) in codes.iter_mut().enumerate() {
            *c = nibble_codes::<CODES>(qs[at + r], qh[at + r]);
        }
        for (group, v) in groups.iter_mut().zip(transpose8(codes)) {
            // SAFETY: eight u32 at 0 or 8 of sixteen; unaligned.
            unsafe { _mm256_storeu_si256(group[at..].as_mut_ptr().cast(), v) };
        }
    }
    groups
}

/// The 8 x 8 transpose of eight vectors of eight 32-bit words: word g of
/// vector r becomes word r of vector g.
#[target_feature(enable = "avx2")]
fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
    // Pairs of rows interleaved, then quads, then the 128-bit halves swapped.
    let lo = |a, b| _mm256_unpacklo_epi32(a, b);
    let hi = |a, b| _mm256_unpackhi_epi32(a, b);
    let t = [
        lo(r[0], r[1]),
        hi(r[0], r[1]),
        lo(r[2], r[3]),
        hi(r[2], r[3]),
        lo(r[4], r[5]),
        hi(r[4], r[5]),
        lo(r[6], r[7]),
        hi(r[6], r[7]),
    ];
    // u[k] (k < 4): rows 0..4 of words k and k + 4; u[4 + k]: rows 4..8.
    let u = [
        _mm256_unpacklo_epi64(t[0], t[2]),
        _mm256_unpackhi_epi64(t[0], t[2]),
        _mm256_unpacklo_epi64(t[1], t[3]),
        _mm256_unpackhi_epi64(t[1], t[3]),
        _mm256_unpacklo_epi64(t[4], t[6]),
        _mm256_unpackhi_epi64(t[4], t[6]),
        _mm256_unpacklo_epi64(t[5], t[7]),
        _mm256_unpackhi_epi64(t[5], t[7]),
    ];
    [
        _mm256_permute2x128_si256::<0x20>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x20>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x20>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x20>(u[3], u[7]),
        _mm256_permute2x128_si256::<0x31>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x31>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x31>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x31>(u[3], u[7]),
    ]
}

/// Sixteen unpacked rows times N columns: (Σ d dx Σ code·xq, Σ o dx Σ xq)
/// of row r and column j at `[j].0[r]` and `[j].1[r]`. Each 32-bit lane of
/// a 512-bit vector is one row, so per block and column eight `vpdpbusd`
/// (codes times the column's four codes of a group, broadcast) sum sixteen
/// rows' 32 products in integers, and one conversion and one multiply-add
/// scale them all: about a sixth of [`nibble_tile`]'s vector instructions
/// per product, which converts and scales each row and column's dot
/// separately. (Eight rows in 256-bit vectors took twice the instructions;
/// on a CPU with full-width 512-bit units that is twice the time.)
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn row_tile_columns<const N: usize>(
    rows: &RowTile,
    xs: [&Q8Row; N],
) -> [([f32; TILE_ROWS], [f32; TILE_ROWS]); N] {
    let cols = xs.map(|x| &x.packed[..]);
    let lens = cols.iter().map(|c| c.len()).chain([rows.groups.len()]);
    let n_blocks = lens.min().unwrap_or(0);
    let mut dots = [_mm512_setzero_ps(); N];
    let mut offsets = [_mm512_setzero_ps(); N];
    for (i, groups) in rows.groups.iter().enumerate().take(n_blocks) {
        let mut sums = [_mm512_setzero_si512(); N];
        for (g, group) in groups.iter().enumerate() {
            // SAFETY: sixteen u32; unaligned.
            let c = unsafe { _mm512_loadu_si512(group.as_ptr().cast()) };
            for (s, col) in sums.iter_mut().zip(&cols) {
                // The column's codes 4g..4g + 4 as one word, in every lane.
                // SAFETY: word g of the block's 32 codes; unaligned.
                let word = unsafe { col[i].q.as_ptr().cast::<i32>().add(g).read_unaligned() };
                *s = _mm512_dpbusd_epi32(*s, c, _mm512_set1_epi32(word));
            }
        }
        let [d, o] = &rows.factors[i];
        // SAFETY (both loads): sixteen f32; unaligned.
        let (d, o) = unsafe { (_mm512_loadu_ps(d.as_ptr()), _mm512_loadu_ps(o.as_ptr())) };
        for j in 0..N {
            let x = &cols[j][i];
            let step = _mm512_mul_ps(d, _mm512_set1_ps(x.d));
            dots[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[j]), step, dots[j]);
            offsets[j] = _mm512_fmadd_ps(o, _mm512_set1_ps(x.ds), offsets[j]);
        }
    }
    std::array::from_fn(|j| {
        let mut out = ([0.0f32; TILE_ROWS], [0.0f32; TILE_ROWS]);
        // SAFETY (both stores): sixteen f32; unaligned.
        unsafe {
            _mm512_storeu_ps(out.0.as_mut_ptr(), dots[j]);
            _mm512_storeu_ps(out.1.as_mut_ptr(), offsets[j]);
        }
        out
    })
}
