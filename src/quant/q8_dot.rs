//! The CPU fast path's dot products, as ggml computes them: activations
//! quantized to 8 bits per 32-value block ([`Q8Row`], ggml's q8_0/q8_1:
//! codes against the f32 scale, the scale kept as f16), then integer dot
//! products of weight blocks with them, one multiply by both scales per
//! block (per 32-value sub-block for the K-quants; q2_K, q3_K and q6_K
//! sum their 16-value sub-blocks' integer scales first).
//!
//! Every block type has plain-Rust loops; on x86-64, every type also has
//! AVX2 loops (q2_K's and q3_K's in `two_bit`), chosen at run time when
//! the CPU has AVX2, FMA and F16C (ggml's main path there). Quantizing the
//! activations costs accuracy within the limits llama.cpp's test-backend-ops
//! allows for quantized mul_mat; [`crate::quant::dot_row`] stays the exact
//! reference.

use half::f16;

use super::{BlockQ2K, BlockQ3K};
use super::{BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0};
use crate::{DType, Error, Result};

mod two_bit;

const BLOCK: usize = 32;

/// A row of activations as 8-bit codes in blocks of 32: value `i` of block
/// `b` is about `q[32 b + i] * d[b]`.
#[derive(Clone, Debug, Default)]
pub struct Q8Row {
    q: Vec<i8>,
    d: Vec<f32>,
    /// Sum of each block's codes (q4_0's offset and q4_1's minimum use it).
    sums: Vec<i32>,
    /// Each block's scale times its code sum, q8_1's `s`, for the SIMD loops.
    dsums: Vec<f32>,
    /// Each block's scale times the code sums of its two 16-value halves,
    /// for q2_K's minimums and q3_K's code offset (ggml's q8_K `bsums`).
    half_dsums: Vec<[f32; 2]>,
    /// Codes, scale and scaled code sum of each block side by side, for
    /// the SIMD loops: a column is then one pointer that steps 40 bytes a
    /// block, where three separate walks of four columns spilled their
    /// iterators' state to the stack.
    packed: Vec<Q8Block>,
}

/// One block of a [`Q8Row`], its fields together.
#[derive(Clone, Copy, Debug)]
struct Q8Block {
    q: [i8; BLOCK],
    d: f32,
    ds: f32,
}

impl Q8Row {
    /// Quantizes `x`, a whole number of 32-value blocks, into `self`
    /// (reusing its memory): each block's scale maps its largest magnitude
    /// to 127.
    pub fn quantize(&mut self, x: &[f32]) -> Result<()> {
        if !x.len().is_multiple_of(BLOCK) {
            return Err(Error::shape(format!(
                "q8 activations come in blocks of {BLOCK}, got {} values",
                x.len()
            )));
        }
        let blocks = x.len() / BLOCK;
        self.q.resize(x.len(), 0);
        self.d.resize(blocks, 0.0);
        self.sums.resize(blocks, 0);
        self.dsums.resize(blocks, 0.0);
        self.half_dsums.resize(blocks, [0.0; 2]);
        self.packed.clear();
        for (b, (xs, qs)) in x
            .chunks_exact(BLOCK)
            .zip(self.q.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d == 0.0 { 0.0 } else { 1.0 / d };
            let mut halves = [0; 2];
            for (i, (q, &v)) in qs.iter_mut().zip(xs).enumerate() {
                *q = (v * id).round() as i8;
                halves[i / 16] += i32::from(*q);
            }
            let sum = halves[0] + halves[1];
            // Stored as f16, as ggml's q8_0/q8_1 blocks store it: the fast
            // path then computes what llama.cpp's CPU backend does.
            self.d[b] = f16::from_f32(d).to_f32();
            self.sums[b] = sum;
            self.dsums[b] = self.d[b] * sum as f32;
            self.half_dsums[b] = halves.map(|h| self.d[b] * h as f32);
            let mut q = [0i8; BLOCK];
            q.copy_from_slice(qs);
            self.packed.push(Q8Block {
                q,
                d: self.d[b],
                ds: self.dsums[b],
            });
        }
        Ok(())
    }

    /// Each block's codes, scale and scaled code sum, in order (for the
    /// SIMD loops).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn blocks(&self) -> impl Iterator<Item = (&[i8], f32, f32)> {
        self.packed.iter().map(|b| (&b.q[..], b.d, b.ds))
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether the row holds no values.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// Whether [`dot`] takes rows of `dtype`.
pub fn supports(dtype: DType) -> bool {
    dtype.is_quantized()
}

/// Dot product of a row of `dtype` weights (`bytes`, dense blocks) with
/// quantized activations of the same length.
pub fn dot(dtype: DType, bytes: &[u8], x: &Q8Row) -> Result<f32> {
    let mut out = [0.0];
    dots(dtype, bytes, std::slice::from_ref(x), &mut out)?;
    Ok(out[0])
}

/// Dot products of one row of `dtype` weights with each of `xs`, into
/// `out`: the checks and the kernel choice once per weight row, which for
/// short rows (576 values) cost as much as a dot.
pub fn dots(dtype: DType, bytes: &[u8], xs: &[Q8Row], out: &mut [f32]) -> Result<()> {
    let k = xs.first().map_or(0, Q8Row::len);
    let need = dtype.row_bytes(k)?;
    if bytes.len() != need || !supports(dtype) || xs.iter().any(|x| x.len() != k) {
        return Err(Error::shape(format!(
            "q8 dots need one {dtype} row of {k} values ({need} bytes) and columns as long, got {} bytes",
            bytes.len()
        )));
    }
    if out.len() != xs.len() {
        return Err(Error::shape(format!(
            "{} q8 dots into {} values",
            xs.len(),
            out.len()
        )));
    }
    let kernels = kernels();
    match dtype {
        DType::Q4_0 => with_blocks(bytes, |b| (kernels.q4_0)(b, xs, out)),
        DType::Q4_1 => with_blocks(bytes, |b| (kernels.q4_1)(b, xs, out)),
        DType::Q8_0 => with_blocks(bytes, |b| (kernels.q8_0)(b, xs, out)),
        DType::Q5_0 => with_blocks(bytes, |b| (kernels.q5_0)(b, xs, out)),
        DType::Q5_1 => with_blocks(bytes, |b| (kernels.q5_1)(b, xs, out)),
        DType::Q4K => with_blocks(bytes, |b| (kernels.q4_k)(b, xs, out)),
        DType::Q5K => with_blocks(bytes, |b| (kernels.q5_k)(b, xs, out)),
        DType::Q6K => with_blocks(bytes, |b| (kernels.q6_k)(b, xs, out)),
        DType::Q2K => with_blocks(bytes, |b| (kernels.q2_k)(b, xs, out)),
        DType::Q3K => with_blocks(bytes, |b| (kernels.q3_k)(b, xs, out)),
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => {
            return Err(Error::UnsupportedType(format!("q8 dots of {dtype} rows")))
        }
    }
    Ok(())
}

fn each_column<B>(blocks: &[B], xs: &[Q8Row], out: &mut [f32], kernel: fn(&[B], &Q8Row) -> f32) {
    for (o, x) in out.iter_mut().zip(xs) {
        *o = kernel(blocks, x);
    }
}

/// A weight row's blocks dotted with every column, into `out`.
type Columns<B> = fn(&[B], &[Q8Row], &mut [f32]);

/// The block loops of one instruction set.
struct Kernels {
    q4_0: Columns<BlockQ4_0>,
    q4_1: Columns<BlockQ4_1>,
    q8_0: Columns<BlockQ8_0>,
    q5_0: Columns<BlockQ5_0>,
    q5_1: Columns<BlockQ5_1>,
    q4_k: Columns<BlockQ4K>,
    q5_k: Columns<BlockQ5K>,
    q6_k: Columns<BlockQ6K>,
    q2_k: Columns<BlockQ2K>,
    q3_k: Columns<BlockQ3K>,
}

/// Calls `f` with `bytes` as blocks: in place when aligned (GGUF aligns
/// tensor data), else from a copy.
fn with_blocks<B: bytemuck::Pod, T>(bytes: &[u8], f: impl FnOnce(&[B]) -> T) -> T {
    match bytemuck::try_cast_slice::<u8, B>(bytes) {
        Ok(blocks) => f(blocks),
        Err(_) => {
            let copy: Vec<B> = bytes
                .chunks_exact(size_of::<B>())
                .map(bytemuck::pod_read_unaligned)
                .collect();
            f(&copy)
        }
    }
}

/// The fastest kernels this CPU runs, chosen once.
fn kernels() -> &'static Kernels {
    static CHOSEN: std::sync::OnceLock<Kernels> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY (every closure): the CPU has AVX2, FMA and F16C.
            return Kernels {
                q4_0: |b, xs, out| unsafe { avx2::q4_0(b, xs, out) },
                q4_1: |b, xs, out| unsafe { avx2::q4_1(b, xs, out) },
                q8_0: |b, xs, out| each_column(b, xs, out, |b, x| unsafe { avx2::q8_0(b, x) }),
                q5_0: |b, xs, out| unsafe { avx2::q5_0(b, xs, out) },
                q5_1: |b, xs, out| unsafe { avx2::q5_1(b, xs, out) },
                q4_k: |b, xs, out| unsafe { avx2::q4_k(b, xs, out) },
                q5_k: |b, xs, out| unsafe { avx2::q5_k(b, xs, out) },
                q6_k: |b, xs, out| unsafe { avx2::q6_k(b, xs, out) },
                q2_k: |b, xs, out| unsafe { two_bit::avx2::q2_k(b, xs, out) },
                q3_k: |b, xs, out| unsafe { two_bit::avx2::q3_k(b, xs, out) },
            };
        }
        Kernels {
            q4_0: |b, xs, out| each_column(b, xs, out, portable::q4_0),
            q4_1: |b, xs, out| each_column(b, xs, out, portable::q4_1),
            q8_0: |b, xs, out| each_column(b, xs, out, portable::q8_0),
            q5_0: |b, xs, out| each_column(b, xs, out, portable::q5_0),
            q5_1: |b, xs, out| each_column(b, xs, out, portable::q5_1),
            q4_k: |b, xs, out| each_column(b, xs, out, portable::q4_k),
            q5_k: |b, xs, out| each_column(b, xs, out, portable::q5_k),
            q6_k: |b, xs, out| each_column(b, xs, out, portable::q6_k),
            q2_k: |b, xs, out| each_column(b, xs, out, two_bit::portable::q2_k),
            q3_k: |b, xs, out| each_column(b, xs, out, two_bit::portable::q3_k),
        }
    })
}

/// The block loops in plain Rust (integer sums are exact, so every
/// instruction set's kernels agree up to the f32 accumulation order).
mod portable {
    use super::{f16_to_f32, Q8Row, BLOCK};
    use crate::quant::q4_k::step_offset;
    use crate::quant::q6_k::unpack;
    use crate::quant::{BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1};
    use crate::quant::{BlockQ6K, BlockQ8_0};

    /// Σ code * x-code over one block of 4-bit codes (low nibbles are
    /// values 0..16, high nibbles 16..32).
    fn nibble_dot(qs: &[u8; 16], xq: &[i8]) -> i32 {
        let (lo, hi) = xq.split_at(16);
        let mut sum = 0i32;
        for j in 0..16 {
            sum += i32::from(qs[j] & 0xf) * i32::from(lo[j]);
            sum += i32::from(qs[j] >> 4) * i32::from(hi[j]);
        }
        sum
    }

    /// q4_0: d * (code - 8), so Σ = d dx (Σ code * xq - 8 Σ xq).
    pub fn q4_0(blocks: &[BlockQ4_0], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
            let s = nibble_dot(&w.qs, xq) - 8 * x.sums[b];
            acc += f16_to_f32(w.d) * x.d[b] * s as f32;
        }
        acc
    }

    /// q4_1: d * code + m, so Σ = d dx Σ code * xq + m dx Σ xq.
    pub fn q4_1(blocks: &[BlockQ4_1], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
            let s = nibble_dot(&w.qs, xq);
            acc += x.d[b] * (f16_to_f32(w.d) * s as f32 + f16_to_f32(w.m) * x.sums[b] as f32);
        }
        acc
    }

    /// The 5-bit codes of a q5_0/q5_1 block dotted with its x-codes.
    fn q5_dot(qs: &[u8; 16], qh: [u8; 4], xq: &[i8]) -> i32 {
        let h = u32::from_le_bytes(qh);
        let (lo, hi) = xq.split_at(16);
        let mut sum = 0i32;
        for j in 0..16 {
            let c0 = (qs[j] & 0xf) as i32 | ((h >> j) as i32 & 1) << 4;
            let c1 = (qs[j] >> 4) as i32 | ((h >> (j + 16)) as i32 & 1) << 4;
            sum += c0 * i32::from(lo[j]) + c1 * i32::from(hi[j]);
        }
        sum
    }

    /// q5_0: d * (code - 16).
    pub fn q5_0(blocks: &[BlockQ5_0], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
            let s = q5_dot(&w.qs, w.qh, xq) - 16 * x.sums[b];
            acc += f16_to_f32(w.d) * x.d[b] * s as f32;
        }
        acc
    }

    /// q5_1: d * code + m.
    pub fn q5_1(blocks: &[BlockQ5_1], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
            let s = q5_dot(&w.qs, w.qh, xq);
            acc += x.d[b] * (f16_to_f32(w.d) * s as f32 + f16_to_f32(w.m) * x.sums[b] as f32);
        }
        acc
    }

    /// Σ code * x-code over 32 values.
    fn dot32(codes: &[u8; 32], xq: &[i8]) -> i32 {
        codes
            .iter()
            .zip(xq)
            .map(|(&c, &x)| i32::from(c) * i32::from(x))
            .sum()
    }

    /// A K-quant row whose sub-blocks of 32 line up with the x-blocks.
    /// `codes(block, g)` unpacks the codes of sub-blocks 2g and 2g + 1,
    /// `step_offset(block, s)` gives sub-block s's values as step * code -
    /// offset, so its dot is dx (step Σ code * xq - offset Σ xq).
    fn k_quant<B>(
        blocks: &[B],
        x: &Q8Row,
        step_offset: impl Fn(&B, usize) -> (f32, f32),
        codes: impl Fn(&B, usize) -> [[u8; 32]; 2],
    ) -> f32 {
        let mut acc = 0.0f32;
        for (i, w) in blocks.iter().enumerate() {
            for g in 0..4 {
                for (h, c) in codes(w, g).iter().enumerate() {
                    let (s, b) = (2 * g + h, 8 * i + 2 * g + h);
                    let dot = dot32(c, &x.q[BLOCK * b..][..BLOCK]);
                    let (step, offset) = step_offset(w, s);
                    acc += x.d[b] * (step * dot as f32 - offset * x.sums[b] as f32);
                }
            }
        }
        acc
    }

    /// The low and high nibbles of 32 bytes.
    fn nibbles(qs: &[u8]) -> [[u8; 32]; 2] {
        let (mut lo, mut hi) = ([0u8; 32], [0u8; 32]);
        for ((l, h), &q) in lo.iter_mut().zip(&mut hi).zip(qs) {
            (*l, *h) = (q & 0xf, q >> 4);
        }
        [lo, hi]
    }

    pub fn q4_k(blocks: &[BlockQ4K], x: &Q8Row) -> f32 {
        k_quant(
            blocks,
            x,
            |w, s| step_offset(w.d, w.dmin, &w.scales, s),
            |w, g| nibbles(&w.qs[32 * g..][..32]),
        )
    }

    pub fn q5_k(blocks: &[BlockQ5K], x: &Q8Row) -> f32 {
        k_quant(
            blocks,
            x,
            |w, s| step_offset(w.d, w.dmin, &w.scales, s),
            |w, g| {
                let [mut lo, mut hi] = nibbles(&w.qs[32 * g..][..32]);
                for l in 0..32 {
                    lo[l] |= ((w.qh[l] >> (2 * g)) & 1) << 4;
                    hi[l] |= ((w.qh[l] >> (2 * g + 1)) & 1) << 4;
                }
                [lo, hi]
            },
        )
    }

    /// Σ code * x-code over each 16-value half of a 32-value x-block (the
    /// K-quants with 16-value sub-blocks give each half its own scale).
    pub fn half_dots(codes: &[i8], xq: &[i8]) -> [i32; 2] {
        let mut sums = [0i32; 2];
        for (s, (c, x)) in sums.iter_mut().zip(codes.chunks(16).zip(xq.chunks(16))) {
            *s = c
                .iter()
                .zip(x)
                .map(|(&c, &x)| i32::from(c) * i32::from(x))
                .sum();
        }
        sums
    }

    /// q6_K: d * scale * code, one scale per 16 values (two per x-block).
    pub fn q6_k(blocks: &[BlockQ6K], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        let mut codes = [0i8; 256];
        for (i, w) in blocks.iter().enumerate() {
            for h in 0..2 {
                for l in 0..32 {
                    let q = unpack(w.ql[64 * h + l], w.ql[64 * h + l + 32], w.qh[32 * h + l]);
                    for (t, q) in q.into_iter().enumerate() {
                        codes[128 * h + 32 * t + l] = q as i8;
                    }
                }
            }
            let mut block = 0.0f32;
            for (s, (c, xq)) in codes
                .chunks_exact(BLOCK)
                .zip(x.q[BLOCK * 8 * i..][..256].chunks_exact(BLOCK))
                .enumerate()
            {
                let [s0, s1] = half_dots(c, xq);
                let sc = |g: usize| i32::from(w.scales[2 * s + g]);
                block += x.d[8 * i + s] * (sc(0) * s0 + sc(1) * s1) as f32;
            }
            acc += f16_to_f32(w.d) * block;
        }
        acc
    }

    /// q8_0: d * code.
    pub fn q8_0(blocks: &[BlockQ8_0], x: &Q8Row) -> f32 {
        let mut acc = 0.0f32;
        for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
            let s: i32 =
                w.qs.iter()
                    .zip(xq)
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
            acc += f16_to_f32(w.d) * x.d[b] * s as f32;
        }
        acc
    }
}

/// The block loops with AVX2, as ggml's: a block's 32 code bytes times the
/// activations' 32 with `vpmaddubsw` (unsigned x signed bytes, adjacent
/// pairs summed to i16), pairs of those summed to i32 with `vpmaddwd`, then
/// converted and accumulated in f32 with both scales.
///
/// # Safety
/// Every function here needs a CPU with AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use half::f16;

    use super::{Q8Row, BLOCK};
    use crate::quant::q4_k::scale_min;
    use crate::quant::{BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1};
    use crate::quant::{BlockQ6K, BlockQ8_0};

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

    /// Eight i32 partial sums of unsigned `u` times signed `s`, bytewise.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256 {
        let pairs = _mm256_maddubs_epi16(u, s);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
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

    /// An f16 scale as f32, with F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn scale(h: f16) -> f32 {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h.to_bits()))))
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

    /// Over blocks of 4-bit codes (5-bit with `FIFTH`: their fifth bits in
    /// the `u32`), each with its codes, scale `d` and offset factor `o`,
    /// and each of N columns: (Σ d dx Σ code·xq, Σ o dx Σ xq). A block's
    /// codes are unpacked once for the N columns (a prompt's columns come
    /// four at a time). Two vector accumulators per column, the second
    /// holding one eighth of its sum per lane, so no scalar sum chains
    /// through the blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn nibble_sums<'a, const FIFTH: bool, const N: usize>(
        blocks: impl Iterator<Item = (&'a [u8; 16], u32, f16, f16)>,
        xs: &[Q8Row; N],
    ) -> [(f32, f32); N] {
        let mut acc = [_mm256_setzero_ps(); N];
        let mut offsets = [_mm256_setzero_ps(); N];
        let mut cols = xs.each_ref().map(Q8Row::blocks);
        for (qs, qh, d, o) in blocks {
            let mut c = nibbles(qs);
            if FIFTH {
                c = _mm256_or_si256(c, fifth_bits(qh));
            }
            let (d, o) = (scale(d), _mm256_set1_ps(scale(o)));
            for (j, col) in cols.iter_mut().enumerate() {
                let Some((xq, dx, ds)) = col.next() else {
                    break;
                };
                let p = dot_u8_i8(c, codes(xq));
                acc[j] = _mm256_fmadd_ps(p, _mm256_set1_ps(d * dx), acc[j]);
                offsets[j] = _mm256_fmadd_ps(o, _mm256_set1_ps(ds), offsets[j]);
            }
        }
        std::array::from_fn(|j| (sum8(acc[j]), sum8(offsets[j]) / 8.0))
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

    /// `finish(dot, offset)` of each column's [`nibble_sums`] into `out`.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn nibble_columns<'a, const FIFTH: bool, I>(
        blocks: impl Fn() -> I,
        xs: &[Q8Row],
        out: &mut [f32],
        finish: impl Fn(f32, f32) -> f32,
    ) where
        I: Iterator<Item = (&'a [u8; 16], u32, f16, f16)>,
    {
        by_fours(
            xs,
            out,
            |x4| nibble_sums::<FIFTH, 4>(blocks(), x4).map(|(dot, offset)| finish(dot, offset)),
            |x| {
                let [(dot, offset)] = nibble_sums::<FIFTH, 1>(blocks(), std::array::from_ref(x));
                finish(dot, offset)
            },
        );
    }

    /// q4_0: codes are stored plus 8, so Σ d (code - 8) x = Σ d code x - 8 d Σ x.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q4_0(blocks: &[BlockQ4_0], xs: &[Q8Row], out: &mut [f32]) {
        let each = || blocks.iter().map(|w| (&w.qs, 0, w.d, w.d));
        nibble_columns::<false, _>(each, xs, out, |dot, offset| dot - 8.0 * offset);
    }

    /// q4_1: d * code + m.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q4_1(blocks: &[BlockQ4_1], xs: &[Q8Row], out: &mut [f32]) {
        let each = || blocks.iter().map(|w| (&w.qs, 0, w.d, w.m));
        nibble_columns::<false, _>(each, xs, out, |dot, offset| dot + offset);
    }

    /// q5_0: codes are stored plus 16.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q5_0(blocks: &[BlockQ5_0], xs: &[Q8Row], out: &mut [f32]) {
        let each = || {
            blocks
                .iter()
                .map(|w| (&w.qs, u32::from_le_bytes(w.qh), w.d, w.d))
        };
        nibble_columns::<true, _>(each, xs, out, |dot, offset| dot - 16.0 * offset);
    }

    /// q5_1: d * code + m.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q5_1(blocks: &[BlockQ5_1], xs: &[Q8Row], out: &mut [f32]) {
        let each = || {
            blocks
                .iter()
                .map(|w| (&w.qs, u32::from_le_bytes(w.qh), w.d, w.m))
        };
        nibble_columns::<true, _>(each, xs, out, |dot, offset| dot + offset);
    }

    /// q4_K and q5_K: per sub-block s and each of N columns, d sc(s) dx Σ
    /// code xq - dmin mn(s) dx Σ xq. `qh` holds q5_K's fifth bits (bit s
    /// of byte l for value l of sub-block s). A sub-block's codes and scales
    /// are unpacked once for the N columns.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn k_quant<'a, const N: usize>(
        blocks: impl Iterator<Item = (f16, f16, &'a [u8; 12], &'a [u8; 128], Option<&'a [u8; 32]>)>,
        xs: &[Q8Row; N],
    ) -> [f32; N] {
        let mask = _mm256_set1_epi8(0x0f);
        let one = _mm256_set1_epi8(1);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut offsets = [0.0f32; N];
        let mut cols = xs.each_ref().map(Q8Row::blocks);
        for (d, dmin, scales, qs, qh) in blocks {
            let (d, dmin) = (scale(d), scale(dmin));
            // SAFETY: qh is 32 readable bytes; the load is unaligned.
            let high = qh.map(|h| unsafe { _mm256_loadu_si256(h.as_ptr().cast()) });
            for g in 0..4 {
                // SAFETY: 32 bytes of the 128 from 32g; the load is unaligned.
                let packed = unsafe { _mm256_loadu_si256(qs[32 * g..].as_ptr().cast()) };
                let mut pair = [
                    _mm256_and_si256(packed, mask),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(packed), mask),
                ];
                if let Some(h) = high {
                    for (t, c) in pair.iter_mut().enumerate() {
                        let n = _mm_cvtsi32_si128((2 * g + t) as i32);
                        let bit = _mm256_and_si256(_mm256_srl_epi16(h, n), one);
                        *c = _mm256_or_si256(*c, _mm256_slli_epi16::<4>(bit));
                    }
                }
                for (t, c) in pair.into_iter().enumerate() {
                    let (sc, mn) = scale_min(scales, 2 * g + t);
                    let (step, offset) = (d * f32::from(sc), dmin * f32::from(mn));
                    // The columns' x-blocks of this sub-block, in order.
                    for (j, col) in cols.iter_mut().enumerate() {
                        let Some((xq, dx, ds)) = col.next() else {
                            break;
                        };
                        let p = dot_u8_i8(c, codes(xq));
                        acc[j] = _mm256_fmadd_ps(p, _mm256_set1_ps(step * dx), acc[j]);
                        offsets[j] += offset * ds;
                    }
                }
            }
        }
        std::array::from_fn(|j| sum8(acc[j]) - offsets[j])
    }

    /// [`k_quant`] of every column into `out`.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn k_quant_columns<'a, I>(blocks: impl Fn() -> I, xs: &[Q8Row], out: &mut [f32])
    where
        I: Iterator<Item = (f16, f16, &'a [u8; 12], &'a [u8; 128], Option<&'a [u8; 32]>)>,
    {
        by_fours(
            xs,
            out,
            |x4| k_quant::<4>(blocks(), x4),
            |x| k_quant::<1>(blocks(), std::array::from_ref(x))[0],
        );
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q4_k(blocks: &[BlockQ4K], xs: &[Q8Row], out: &mut [f32]) {
        let each = || blocks.iter().map(|w| (w.d, w.dmin, &w.scales, &w.qs, None));
        k_quant_columns(each, xs, out);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q5_k(blocks: &[BlockQ5K], xs: &[Q8Row], out: &mut [f32]) {
        let each = || {
            blocks
                .iter()
                .map(|w| (w.d, w.dmin, &w.scales, &w.qs, Some(&w.qh)))
        };
        k_quant_columns(each, xs, out);
    }

    /// q6_K: per 32-value group, 6-bit codes (0..64) from 32 ql nibbles
    /// and 32 qh bit pairs, Σ (code - 32) xq per 16 values (vpmaddubsw of
    /// the codes minus that of 32), times the two 16-value sub-blocks'
    /// scales (vpmaddwd), times d dx. Each group's codes are built once for
    /// the N columns.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q6_k_cols<const N: usize>(blocks: &[BlockQ6K], xs: &[Q8Row; N]) -> [f32; N] {
        let low4 = _mm256_set1_epi8(0x0f);
        let low2 = _mm256_set1_epi8(0x03);
        let bias = _mm256_set1_epi8(32);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut cols = xs.each_ref().map(Q8Row::blocks);
        for w in blocks {
            let d = scale(w.d);
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
                    for (j, col) in cols.iter_mut().enumerate() {
                        let Some((xq, dx, _)) = col.next() else { break };
                        let x = codes(xq);
                        let pairs = _mm256_sub_epi16(
                            _mm256_maddubs_epi16(c, x),
                            _mm256_maddubs_epi16(bias, x),
                        );
                        let sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, scales));
                        acc[j] = _mm256_fmadd_ps(sums, _mm256_set1_ps(d * dx), acc[j]);
                    }
                }
            }
        }
        acc.map(|a| sum8(a))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q6_k(blocks: &[BlockQ6K], xs: &[Q8Row], out: &mut [f32]) {
        by_fours(
            xs,
            out,
            |x4| q6_k_cols::<4>(blocks, x4),
            |x| q6_k_cols::<1>(blocks, std::array::from_ref(x))[0],
        );
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q8_0(blocks: &[BlockQ8_0], x: &Q8Row) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for ((w, xq), &dx) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).zip(&x.d) {
            let wq = codes(&w.qs);
            // |w| times x with w's sign: unsigned x signed, as vpmaddubsw takes.
            let p = dot_u8_i8(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(codes(xq), wq));
            acc = _mm256_fmadd_ps(p, _mm256_set1_ps(scale(w.d) * dx), acc);
        }
        sum8(acc)
    }
}

/// f16 to f32 through a 64 Ki-entry table, as ggml does: `half`'s
/// conversion without F16C in the build's baseline is a branchy software
/// routine, once per block of every weight row.
#[inline(always)]
pub(super) fn f16_to_f32(h: f16) -> f32 {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect());
    table[usize::from(h.to_bits())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dot_row, quantize_row};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    #[test]
    fn q8_dots_are_close_to_the_reference_for_every_type() {
        let n = 256;
        let x = values(n, 7);
        let mut xq = Q8Row::default();
        xq.quantize(&x).unwrap();
        for dtype in DType::ALL.into_iter().filter(|t| supports(*t)) {
            let w = quantize_row(dtype, &values(n, 99)).unwrap();
            let exact = dot_row(dtype, &w, &x).unwrap();
            let fast = dot(dtype, &w, &xq).unwrap();
            assert!(
                (exact - fast).abs() <= 0.01 * exact.abs().max(1.0),
                "{dtype}: {exact} vs {fast}"
            );
            let mut both = [0.0; 2];
            dots(dtype, &w, &[xq.clone(), xq.clone()], &mut both).unwrap();
            assert_eq!(both, [fast, fast]);
            let portable = match dtype {
                DType::Q4_0 => with_blocks(&w, |b| portable::q4_0(b, &xq)),
                DType::Q4_1 => with_blocks(&w, |b| portable::q4_1(b, &xq)),
                DType::Q8_0 => with_blocks(&w, |b| portable::q8_0(b, &xq)),
                DType::Q5_0 => with_blocks(&w, |b| portable::q5_0(b, &xq)),
                DType::Q5_1 => with_blocks(&w, |b| portable::q5_1(b, &xq)),
                DType::Q4K => with_blocks(&w, |b| portable::q4_k(b, &xq)),
                DType::Q5K => with_blocks(&w, |b| portable::q5_k(b, &xq)),
                DType::Q6K => with_blocks(&w, |b| portable::q6_k(b, &xq)),
                DType::Q2K => with_blocks(&w, |b| two_bit::portable::q2_k(b, &xq)),
                DType::Q3K => with_blocks(&w, |b| two_bit::portable::q3_k(b, &xq)),
                _ => fast,
            };
            // Integer sums are exact; only the f32 accumulation order may differ.
            assert!((portable - fast).abs() <= 1e-4 * fast.abs().max(1.0));
        }
    }

    #[test]
    fn column_groups_give_each_column_its_own_dot() {
        // Six columns: one group of four, then two one by one.
        let n = 256;
        let xs: Vec<Q8Row> = (0..6)
            .map(|c| {
                let mut q = Q8Row::default();
                q.quantize(&values(n, 11 + c)).unwrap();
                q
            })
            .collect();
        for dtype in DType::ALL.into_iter().filter(|t| supports(*t)) {
            let w = quantize_row(dtype, &values(n, 5)).unwrap();
            let mut got = [0.0; 6];
            dots(dtype, &w, &xs, &mut got).unwrap();
            let one_by_one: Vec<f32> = xs.iter().map(|x| dot(dtype, &w, x).unwrap()).collect();
            assert_eq!(got.to_vec(), one_by_one, "{dtype}");
        }
    }

    #[test]
    fn bad_rows_are_errors() {
        let mut xq = Q8Row::default();
        assert!(xq.quantize(&[1.0; 33]).is_err());
        xq.quantize(&[1.0; 64]).unwrap();
        assert!(dot(DType::Q4_0, &[0; 18], &xq).is_err());
        assert!(dot(DType::F16, &[0; 128], &xq).is_err());
        assert_eq!(dot(DType::Q8_0, &[0; 68], &xq).unwrap(), 0.0);
    }
}
