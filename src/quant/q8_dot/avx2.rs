//! The block loops with AVX2, as ggml's: a block's 32 code bytes times the
//! activations' 32 with `vpmaddubsw` (unsigned x signed bytes, adjacent
//! pairs summed to i16), pairs of those summed to i32 with `vpmaddwd`, then
//! converted and accumulated in f32 with both scales.
//!
//! # Safety
//! Every function here needs a CPU with AVX2, FMA and F16C.

use std::arch::x86_64::*;

use half::f16;

use super::{Q8Row, BLOCK};
use crate::quant::{BlockIQ4NL, BlockQ8_0, IQ4_VALUES};
use crate::quant::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};

mod decode_rows;
mod iq4_xs;
mod k_quants;
use decode_rows::nibble_quad_rows;
pub use iq4_xs::iq4_xs;
pub(super) use k_quants::{k_codes, scales_and_mins, KParts};
pub use k_quants::{q4_k, q5_k, q6_k};

/// Σ of eight f32 lanes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn sum8(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// The 32 codes of 16 nibble bytes, values 0..16 (low nibbles) then
/// 16..32 (high nibbles), as unsigned bytes.
#[target_feature(enable = "avx2,fma")]
fn nibbles(qs: &[u8; 16]) -> __m256i {
    // SAFETY: qs is 16 readable bytes; the load is unaligned.
    let packed = unsafe { _mm_loadu_si128(qs.as_ptr().cast()) };
    let mask = _mm_set1_epi8(0x0f);
    let lo = _mm_and_si128(packed, mask);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(packed), mask);
    _mm256_set_m128i(hi, lo)
}

/// Eight i32 sums of unsigned `u` times signed `s`, four bytes each
/// (`vpmaddubsw`'s pairs saturate at ±32767; codes and activations of at
/// most 127 in magnitude stay under it).
#[target_feature(enable = "avx2,fma")]
fn madd_u8_i8(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// [`madd_u8_i8`]'s sums as f32.
#[target_feature(enable = "avx2,fma")]
pub(super) fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256 {
    _mm256_cvtepi32_ps(madd_u8_i8(u, s))
}

/// How a nibble block's codes read: as stored (q4_0, q4_1), with fifth
/// bits (q5_0, q5_1) or as indices into iq4's table (iq4_nl).
pub(super) const PLAIN: u8 = 0;
pub(super) const FIFTH: u8 = 1;
pub(super) const IQ4: u8 = 2;

/// A nibble block's 32 codes: unsigned bytes, with their fifth bits
/// (q5_0/q5_1's `qh`) where `CODES` is [`FIFTH`]; for [`IQ4`], the signed
/// table values of the codes (which [`unsigned_pair`] makes unsigned).
#[target_feature(enable = "avx2,fma")]
pub(super) fn nibble_codes<const CODES: u8>(qs: &[u8; 16], qh: u32) -> __m256i {
    let c = nibbles(qs);
    match CODES {
        FIFTH => _mm256_or_si256(c, fifth_bits(qh)),
        IQ4 => _mm256_shuffle_epi8(iq4_table(), c),
        _ => c,
    }
}

/// Codes and activation codes as the unsigned and signed operands of a
/// byte dot product: as they are, or for [`IQ4`]'s signed codes, their
/// magnitudes and the activations with the codes' signs.
#[target_feature(enable = "avx2,fma")]
pub(super) fn unsigned_pair<const CODES: u8>(c: __m256i, x: __m256i) -> (__m256i, __m256i) {
    match CODES {
        IQ4 => (_mm256_sign_epi8(c, c), _mm256_sign_epi8(x, c)),
        _ => (c, x),
    }
}

/// Adds column sums `scaled` of one sub-block: in integers until the
/// super-block ends where the columns share one scale per super-block
/// (`SHARED`), else scaled by `step` (d dx) into `acc` now. Not a
/// `target_feature` function, so that it is always inlined.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[inline(always)]
pub(super) unsafe fn add_scaled<const SHARED: bool>(
    sum: &mut __m256i,
    acc: &mut __m256,
    scaled: __m256i,
    step: f32,
) {
    // SAFETY: the caller's CPU has AVX2 and FMA.
    unsafe {
        if SHARED {
            *sum = _mm256_add_epi32(*sum, scaled);
        } else {
            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(scaled), _mm256_set1_ps(step), *acc);
        }
    }
}

/// Ends a super-block of [`add_scaled`]: with `SHARED`, each column's
/// integer sum times its step (d dx); nothing otherwise.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[inline(always)]
pub(super) unsafe fn flush_scaled<const N: usize, const SHARED: bool>(
    sums: &[__m256i; N],
    acc: &mut [__m256; N],
    step: impl Fn(usize) -> f32,
) {
    if SHARED {
        for j in 0..N {
            // SAFETY: the caller's CPU has AVX2 and FMA.
            acc[j] = unsafe {
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[j]), _mm256_set1_ps(step(j)), acc[j])
            };
        }
    }
}

/// A block's 32 activation codes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn codes(xq: &[i8]) -> __m256i {
    // Guards the unsafe load; never fails: every caller passes a
    // `Q8Block`'s 32 codes, a `chunks_exact(BLOCK)` piece or a q8_0
    // block's 32 `qs`.
    assert!(xq.len() >= BLOCK);
    // SAFETY: checked above: 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(xq.as_ptr().cast()) }
}

/// An f16 scale as f32, from ggml's table of every f16 value: F16C's
/// conversion of one value compiled to an insert into whatever register
/// was free, often a loop's accumulator, which then chained every block
/// of the loop through the conversion (a third of q8_0's mat-vec speed).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scale(h: f16) -> f32 {
    super::f16_to_f32(h)
}

/// Bit j of `qh` as 0x10 in byte j (q5_0/q5_1's fifth bits).
#[target_feature(enable = "avx2,fma")]
fn fifth_bits(qh: u32) -> __m256i {
    // Byte j takes byte j / 8 of qh, then keeps bit j % 8 of it.
    let spread = _mm256_setr_epi64x(
        0,
        0x0101_0101_0101_0101,
        0x0202_0202_0202_0202,
        0x0303_0303_0303_0303,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), spread);
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// Over blocks of 4-bit codes (5-bit with [`FIFTH`]: their fifth bits in
/// the `u32`; table indices with [`IQ4`]), each with its codes, scale `d` and offset factor `o`,
/// and each of N columns: (Σ d dx Σ code·xq, Σ o dx Σ xq). A block's
/// codes are unpacked once for the N columns (a prompt's columns come
/// four at a time). Per block and column, one 128-bit product gives both
/// factors, (d, o) times the column block's (dx, dx Σ xq): the first
/// scales the integer dot into a vector accumulator, the second lane sums
/// the offsets, so no scalar sum chains through the blocks.
#[target_feature(enable = "avx2,fma,f16c")]
fn nibble_sums<'a, const CODES: u8, const N: usize>(
    blocks: impl Iterator<Item = (&'a [u8; 16], u32, [f16; 2])>,
    xs: &[Q8Row; N],
) -> [(f32, f32); N] {
    let mut acc = [_mm256_setzero_ps(); N];
    let mut factors = [_mm_setzero_ps(); N];
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n_blocks = cols.iter().map(|c| c.len()).min().unwrap_or(0);
    for (i, (qs, qh, [d, o])) in blocks.take(n_blocks).enumerate() {
        let c = nibble_codes::<CODES>(qs, qh);
        let pair = u32::from(d.to_bits()) | (u32::from(o.to_bits()) << 16);
        let d_o = _mm_cvtph_ps(_mm_cvtsi32_si128(pair as i32));
        for j in 0..N {
            let x = &cols[j][i];
            let f = _mm_mul_ps(d_o, _mm_setr_ps(x.d, x.ds, 0.0, 0.0));
            let (u, v) = unsigned_pair::<CODES>(c, codes(&x.q));
            let p = dot_u8_i8(u, v);
            acc[j] = _mm256_fmadd_ps(p, _mm256_broadcastss_ps(f), acc[j]);
            factors[j] = _mm_add_ps(factors[j], f);
        }
    }
    let mut sums = [(0.0, 0.0); N];
    for (s, (a, f)) in sums.iter_mut().zip(acc.into_iter().zip(factors)) {
        *s = (sum8(a), _mm_cvtss_f32(_mm_shuffle_ps::<1>(f, f)));
    }
    sums
}

/// Each column's dot into `out`: four columns at a time through `four`
/// (which reads each weight block once for them), the rest through `one`.
#[inline(always)]
pub(super) fn by_fours(
    xs: &[Q8Row],
    out: &mut [f32],
    four: impl Fn(&[Q8Row; 4]) -> [f32; 4],
    one: impl Fn(&Q8Row) -> f32,
) {
    let mut quads = xs.chunks_exact(4);
    let mut dst = out.chunks_exact_mut(4);
    for (x4, o4) in (&mut quads).zip(&mut dst) {
        // Always a whole array: the chunks are exact.
        if let Ok(x4) = <&[Q8Row; 4]>::try_from(x4) {
            o4.copy_from_slice(&four(x4));
        }
    }
    for (o, x) in dst.into_remainder().iter_mut().zip(quads.remainder()) {
        *o = one(x);
    }
}

/// Every column of `xs` through `$cols::<N>($blocks, columns)` into `out`:
/// four at a time, then one ([`by_fours`]).
macro_rules! cols_by_fours {
    ($cols:ident($blocks:expr), $xs:expr, $out:expr) => {
        by_fours(
            $xs,
            $out,
            |x4| $cols::<4>($blocks, x4),
            |x| $cols::<1>($blocks, std::array::from_ref(x))[0],
        )
    };
}
pub(super) use cols_by_fours;

/// A nibble block's codes, fifth bits (q5_0/q5_1) and (scale, offset
/// factor).
pub(super) type Nibbles<'a> = (&'a [u8; 16], u32, [f16; 2]);

/// `finish(dot, offset)` of each column's [`nibble_sums`] into `out`.
#[target_feature(enable = "avx2,fma,f16c")]
fn nibble_columns<'a, const CODES: u8, I>(
    blocks: impl Fn() -> I,
    xs: &[Q8Row],
    out: &mut [f32],
    finish: impl Fn(f32, f32) -> f32,
) where
    I: Iterator<Item = Nibbles<'a>>,
{
    by_fours(
        xs,
        out,
        |x4| nibble_sums::<CODES, 4>(blocks(), x4).map(|(dot, offset)| finish(dot, offset)),
        |x| {
            let [(dot, offset)] = nibble_sums::<CODES, 1>(blocks(), std::array::from_ref(x));
            finish(dot, offset)
        },
    );
}

/// Four weight rows' nibble blocks, unpacked once for all of a prompt's
/// column quads (the tiles read them): per block, the rows' codes as
/// [`nibble_codes`] gives them, and their four scales then four offset
/// factors. Unpacked per column quad, the codes (the fifth bits of q5 above
/// all) took half a tile's instructions at 64 columns.
#[derive(Default)]
pub(super) struct RowQuad {
    pub(super) codes: Vec<[__m256i; 4]>,
    pub(super) factors: Vec<[f32; 8]>,
}

impl RowQuad {
    /// Unpacks `rows` (their common length of blocks) into `self`,
    /// reusing its memory.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn unpack<B, const CODES: u8>(&mut self, rows: [&[B]; 4], unpack: impl Fn(&B) -> Nibbles<'_>) {
        let n_blocks = rows.iter().map(|r| r.len()).min().unwrap_or(0);
        self.codes.resize(n_blocks, [_mm256_setzero_si256(); 4]);
        self.factors.resize(n_blocks, [0.0; 8]);
        let blocks = self.codes.iter_mut().zip(self.factors.iter_mut());
        for (i, (codes, factors)) in blocks.enumerate() {
            let w = rows.map(|r| unpack(&r[i]));
            *codes = w.map(|(qs, qh, _)| nibble_codes::<CODES>(qs, qh));
            let h = |r: usize, k: usize| w[r].2[k].to_bits() as i16;
            let f = _mm256_cvtph_ps(_mm_setr_epi16(
                h(0, 0),
                h(1, 0),
                h(2, 0),
                h(3, 0),
                h(0, 1),
                h(1, 1),
                h(2, 1),
                h(3, 1),
            ));
            // SAFETY: eight f32; unaligned.
            unsafe { _mm256_storeu_ps(factors.as_mut_ptr(), f) };
        }
    }
}

/// Four weight rows times four columns, (Σ d dx Σ code·xq, Σ o dx Σ xq)
/// of row r and column j at 4r + j. Each of the 16 block dots is summed
/// in integers across its vector (`vphaddd`), so per block two vectors of
/// eight sums take the scales: about half the instructions per dot of
/// [`nibble_sums`], whose sums stay in lanes, with the rows' codes and
/// the columns' loads each shared four ways.
#[target_feature(enable = "avx2,fma,f16c")]
fn nibble_tile<const CODES: u8>(rows: &RowQuad, xs: &[Q8Row; 4]) -> ([f32; 16], [f32; 16]) {
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let lens = cols.iter().map(|c| c.len()).chain([rows.codes.len()]);
    let n_blocks = lens.min().unwrap_or(0);
    let ones = _mm256_set1_epi16(1);
    // Lanes of [d0 d1 d2 d3 o0 o1 o2 o3] for row pairs (0, 1) and (2, 3),
    // each row's four times: scales, then offset factors.
    let pick =
        [(0, 1), (2, 3), (4, 5), (6, 7)].map(|(a, b)| _mm256_setr_epi32(a, a, a, a, b, b, b, b));
    let mut dots = [_mm256_setzero_ps(); 2];
    let mut offsets = [_mm256_setzero_ps(); 2];
    for i in 0..n_blocks {
        let c = rows.codes[i];
        // SAFETY: eight f32; unaligned.
        let factors = unsafe { _mm256_loadu_ps(rows.factors[i].as_ptr()) };
        let x = cols.map(|c| &c[i]);
        let dx = _mm_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d);
        let ds = _mm_setr_ps(x[0].ds, x[1].ds, x[2].ds, x[3].ds);
        let (dx, ds) = (_mm256_set_m128(dx, dx), _mm256_set_m128(ds, ds));
        let xq = x.map(|b| codes(&b.q));
        for pair in 0..2 {
            let p = |r: usize, j: usize| {
                let (u, v) = unsigned_pair::<CODES>(c[2 * pair + r], xq[j]);
                _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), ones)
            };
            // Per 128-bit half: the four columns' sums over that half's lanes.
            let first = _mm256_hadd_epi32(
                _mm256_hadd_epi32(p(0, 0), p(0, 1)),
                _mm256_hadd_epi32(p(0, 2), p(0, 3)),
            );
            let second = _mm256_hadd_epi32(
                _mm256_hadd_epi32(p(1, 0), p(1, 1)),
                _mm256_hadd_epi32(p(1, 2), p(1, 3)),
            );
            let sums = _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(first, second),
                _mm256_permute2x128_si256::<0x31>(first, second),
            );
            let scale = _mm256_mul_ps(_mm256_permutevar8x32_ps(factors, pick[pair]), dx);
            dots[pair] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, dots[pair]);
            let offset = _mm256_permutevar8x32_ps(factors, pick[2 + pair]);
            offsets[pair] = _mm256_fmadd_ps(offset, ds, offsets[pair]);
        }
    }
    let mut out = ([0.0f32; 16], [0.0f32; 16]);
    for pair in 0..2 {
        // SAFETY: eight f32 at 8 pair of each 16; the stores are unaligned.
        unsafe {
            _mm256_storeu_ps(out.0[8 * pair..].as_mut_ptr(), dots[pair]);
            _mm256_storeu_ps(out.1[8 * pair..].as_mut_ptr(), offsets[pair]);
        }
    }
    out
}

/// Rows of blocks `B` (`per_row` each; the first is row `first_row` of
/// its matrix) dotted with every column into `out`, a row's results after
/// another's. Rows whose index is a multiple of four go four at a time
/// through `tile(rows, q, columns)` by column quads (`q` the quad's
/// index), whatever rows the caller's run starts at, so a row's results
/// do not depend on how the rows were split over threads; the other rows,
/// and the columns past the last quad, through `columns(row, xs, out)`.
#[inline(always)]
pub(super) fn by_tiles<B>(
    blocks: &[B],
    per_row: usize,
    first_row: usize,
    xs: &[Q8Row],
    out: &mut [f32],
    mut tile: impl FnMut([&[B]; 4], usize, &[Q8Row; 4]) -> [f32; 16],
    mut columns: impl FnMut(&[B], &[Q8Row], &mut [f32]),
) {
    let n = xs.len();
    if per_row == 0 || n == 0 {
        return;
    }
    let row = |r: usize| &blocks[r * per_row..][..per_row];
    let n_rows = (blocks.len() / per_row).min(out.len() / n);
    let (quads, rest) = (xs.chunks_exact(4), &xs[n - n % 4..]);
    let mut r = 0;
    while r < n_rows {
        let dst = &mut out[r * n..];
        if quads.len() > 0 && (first_row + r).is_multiple_of(4) && r + 4 <= n_rows {
            let rows = [row(r), row(r + 1), row(r + 2), row(r + 3)];
            for (q, x4) in quads.clone().enumerate() {
                let Ok(x4) = <&[Q8Row; 4]>::try_from(x4) else {
                    continue;
                };
                for (t, v) in tile(rows, q, x4).into_iter().enumerate() {
                    dst[(t / 4) * n + 4 * q + t % 4] = v;
                }
            }
            for (k, w) in rows.iter().enumerate() {
                columns(w, rest, &mut dst[k * n + n - rest.len()..][..rest.len()]);
            }
            r += 4;
        } else {
            columns(row(r), xs, &mut dst[..n]);
            r += 1;
        }
    }
}

/// Rows of nibble blocks (`per_row` each; the first is row `first_row`
/// of its matrix) dotted with every column, `finish(dot, offset)` into
/// `out`, a row's results after another's. Rows whose index is a multiple
/// of four go four at a time through [`nibble_tile`] (or, where the CPU
/// has AVX-512 VNNI, [`super::vnni::nibble_tile`]), by column quads,
/// whatever rows the caller's run starts at, so a row's results do not
/// depend on how the rows were split over threads; the rest, and columns
/// past the last quad, take [`nibble_columns`]'s loops; with fewer
/// columns than a quad (decode), every row takes [`nibble_quad_rows`]. The loop is
/// [`by_tiles`]'s, written out: through `by_tiles` and its closures the
/// default model's q4_1 prompts and decode measured 3-5% slower.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
fn nibble_rows<B, const CODES: u8>(
    blocks: &[B],
    per_row: usize,
    first_row: usize,
    xs: &[Q8Row],
    out: &mut [f32],
    unpack: impl Fn(&B) -> Nibbles<'_> + Copy,
    finish: impl Fn(f32, f32) -> f32 + Copy,
) {
    let n = xs.len();
    if per_row == 0 || n == 0 {
        return;
    }
    let row = |r: usize| &blocks[r * per_row..][..per_row];
    let n_rows = (blocks.len() / per_row).min(out.len() / n);
    let (quads, rest) = (xs.chunks_exact(4), &xs[n - n % 4..]);
    // The VNNI tile reads each column quad's scales side by side, gathered
    // once for all the rows, when a row quad first takes it (where rows go
    // sixteen at a time, only the rows left over do).
    let vnni = super::vnni::available() && n_rows >= 4;
    let mut quad_scales: Option<Vec<Vec<[f32; 8]>>> = None;
    let gather_scales = || -> Vec<Vec<[f32; 8]>> {
        if !vnni {
            return Vec::new();
        }
        quads
            .clone()
            .filter_map(|x4| <&[Q8Row; 4]>::try_from(x4).ok())
            .map(super::vnni::column_scales)
            .collect()
    };
    let ahead = super::prefetch_rows::<B>(per_row);
    let mut unpacked = RowQuad::default();
    let mut tile = super::vnni::RowTile::default();
    let tiles = vnni && CODES != IQ4 && quads.len() > 0;
    const TILE: usize = super::TILE_ROWS;
    let mut r = 0;
    while r < n_rows {
        let dst = &mut out[r * n..];
        if tiles && (first_row + r).is_multiple_of(TILE) && r + TILE <= n_rows {
            let rows: [&[B]; TILE] = std::array::from_fn(|k| row(r + k));
            // SAFETY (each call): the CPU has AVX-512 VNNI (checked above).
            unsafe { tile.unpack::<B, CODES>(rows, unpack) };
            let mut put = |j: usize, (dots, offsets): ([f32; TILE], [f32; TILE])| {
                for (k, (dot, offset)) in dots.into_iter().zip(offsets).enumerate() {
                    dst[k * n + j] = finish(dot, offset);
                }
            };
            // The next tile's rows are asked for a few per column quad,
            // so that they are cached by the time they are unpacked (the
            // unpacking waited on them: 11% of a 1B-class prompt's samples,
            // 3% with the prefetches).
            let n_quads = quads.len();
            for (q, x4) in quads.clone().enumerate() {
                for k in q * TILE / n_quads..(q + 1) * TILE / n_quads {
                    super::prefetch_row(blocks, per_row, r + TILE + k);
                }
                let x4 = [&x4[0], &x4[1], &x4[2], &x4[3]];
                let cols = unsafe { super::vnni::row_tile_columns(&tile, x4) };
                for (j, col) in cols.into_iter().enumerate() {
                    put(4 * q + j, col);
                }
            }
            for (j, x) in rest.iter().enumerate() {
                let [col] = unsafe { super::vnni::row_tile_columns(&tile, [x]) };
                put(n - rest.len() + j, col);
            }
            r += TILE;
        } else if quads.len() > 0 && (first_row + r).is_multiple_of(4) && r + 4 <= n_rows {
            let rows = [row(r), row(r + 1), row(r + 2), row(r + 3)];
            unpacked.unpack::<B, CODES>(rows, unpack);
            let quad_scales = quad_scales.get_or_insert_with(gather_scales);
            for (q, x4) in quads.clone().enumerate() {
                let Ok(x4) = <&[Q8Row; 4]>::try_from(x4) else {
                    continue;
                };
                let (dots, offsets) = match quad_scales.get(q) {
                    // SAFETY: the CPU has AVX-512 VNNI (checked above).
                    Some(scales) => unsafe {
                        super::vnni::nibble_tile::<CODES>(&unpacked, x4, scales)
                    },
                    None => nibble_tile::<CODES>(&unpacked, x4),
                };
                for (t, (dot, offset)) in dots.into_iter().zip(offsets).enumerate() {
                    dst[(t / 4) * n + 4 * q + t % 4] = finish(dot, offset);
                }
            }
            for (k, w) in rows.iter().enumerate() {
                let tail = &mut dst[k * n + n - rest.len()..][..rest.len()];
                nibble_columns::<CODES, _>(|| w.iter().map(unpack), rest, tail, finish);
            }
            r += 4;
        } else if quads.len() == 0 && per_row >= STREAM_FROM_BLOCKS {
            // A few columns (decode): the rest of the rows as four streams
            // of consecutive rows, a row of each at a time, every stream
            // reading memory in order for the CPU's prefetcher (four rows
            // side by side, or with software prefetches, measured slower
            // than one row at a time). A row's result does not depend on
            // the three read beside it, so the last rows repeat a row.
            let left = n_rows - r;
            let span = left.div_ceil(4);
            for t in 0..span {
                let at = [t, t + span, t + 2 * span, t + 3 * span].map(|i| r + i.min(left - 1));
                let rows = at.map(row);
                for (j, x) in xs.iter().enumerate() {
                    let (dots, offsets) = nibble_quad_rows::<B, CODES>(rows, x, unpack);
                    for (&row, (dot, offset)) in at.iter().zip(dots.into_iter().zip(offsets)) {
                        out[row * n + j] = finish(dot, offset);
                    }
                }
            }
            break;
        } else {
            super::prefetch_row(blocks, per_row, r + ahead);
            let w = row(r);
            nibble_columns::<CODES, _>(|| w.iter().map(unpack), xs, &mut dst[..n], finish);
            r += 1;
        }
    }
}

/// Blocks per row from which decode reads nibble rows as four streams:
/// rows of 2048 values and more, whose matrices stream from memory. Shorter
/// ones (the 135M shape's 576 and 1536) mostly sit in cache, where the
/// one-row loop's fewer shuffles win (its decode on 8 of a 16-core Xeon's
/// threads: 241 / 265 tok/s with one row at a time, 223 / 239 as streams).
/// The choice depends on the row length alone, so a row's result does not
/// depend on the thread split.
const STREAM_FROM_BLOCKS: usize = 64;

/// q4_0: codes are stored plus 8, so Σ d (code - 8) x = Σ d code x - 8 d Σ x.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q4_0(blocks: &[BlockQ4_0], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    fn unpack(w: &BlockQ4_0) -> Nibbles<'_> {
        (&w.qs, 0, [w.d, w.d])
    }
    nibble_rows::<_, PLAIN>(
        blocks,
        per_row,
        first_row,
        xs,
        out,
        unpack,
        |dot, offset| dot - 8.0 * offset,
    );
}

/// q4_1: d * code + m.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q4_1(blocks: &[BlockQ4_1], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    fn unpack(w: &BlockQ4_1) -> Nibbles<'_> {
        (&w.qs, 0, [w.d, w.m])
    }
    nibble_rows::<_, PLAIN>(
        blocks,
        per_row,
        first_row,
        xs,
        out,
        unpack,
        |dot, offset| dot + offset,
    );
}

/// q5_0: codes are stored plus 16.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q5_0(blocks: &[BlockQ5_0], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    fn unpack(w: &BlockQ5_0) -> Nibbles<'_> {
        (&w.qs, u32::from_le_bytes(w.qh), [w.d, w.d])
    }
    nibble_rows::<_, FIFTH>(
        blocks,
        per_row,
        first_row,
        xs,
        out,
        unpack,
        |dot, offset| dot - 16.0 * offset,
    );
}

/// q5_1: d * code + m.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q5_1(blocks: &[BlockQ5_1], per_row: usize, first_row: usize, xs: &[Q8Row], out: &mut [f32]) {
    fn unpack(w: &BlockQ5_1) -> Nibbles<'_> {
        (&w.qs, u32::from_le_bytes(w.qh), [w.d, w.m])
    }
    nibble_rows::<_, FIFTH>(
        blocks,
        per_row,
        first_row,
        xs,
        out,
        unpack,
        |dot, offset| dot + offset,
    );
}

/// q8_0 against N columns: |w| times x with w's sign, unsigned times
/// signed as `vpmaddubsw` takes them; each block's |w| is made once for
/// the N columns.
#[target_feature(enable = "avx2,fma,f16c")]
fn q8_0_cols<const N: usize>(blocks: &[BlockQ8_0], xs: &[Q8Row; N]) -> [f32; N] {
    let mut acc = [_mm256_setzero_ps(); N];
    let cols = xs.each_ref().map(|x| &x.packed[..]);
    let n_blocks = cols.iter().map(|c| c.len()).min().unwrap_or(0);
    for (i, w) in blocks.iter().take(n_blocks).enumerate() {
        let (wq, d) = (codes(&w.qs), scale(w.d));
        let magnitude = _mm256_sign_epi8(wq, wq);
        for j in 0..N {
            let x = &cols[j][i];
            let p = dot_u8_i8(magnitude, _mm256_sign_epi8(codes(&x.q), wq));
            acc[j] = _mm256_fmadd_ps(p, _mm256_set1_ps(d * x.d), acc[j]);
        }
    }
    acc.map(|a| sum8(a))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q8_0(blocks: &[BlockQ8_0], xs: &[Q8Row], out: &mut [f32]) {
    cols_by_fours!(q8_0_cols(blocks), xs, out);
}

/// The iq4 table in both lanes, for `vpshufb` by codes.
#[target_feature(enable = "avx2,fma")]
fn iq4_table() -> __m256i {
    // SAFETY: the table is 16 readable bytes; the load is unaligned.
    let table = unsafe { _mm_loadu_si128(IQ4_VALUES.as_ptr().cast()) };
    _mm256_broadcastsi128_si256(table)
}

/// iq4_nl: d * table(code); the nibble loops with the codes looked up in
/// the table (no offset).
#[target_feature(enable = "avx2,fma,f16c")]
pub fn iq4_nl(
    blocks: &[BlockIQ4NL],
    per_row: usize,
    first_row: usize,
    xs: &[Q8Row],
    out: &mut [f32],
) {
    fn unpack(w: &BlockIQ4NL) -> Nibbles<'_> {
        (&w.qs, 0, [w.d, w.d])
    }
    nibble_rows::<_, IQ4>(blocks, per_row, first_row, xs, out, unpack, |dot, _| dot);
}

#[cfg(test)]
mod tests;
