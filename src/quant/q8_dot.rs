//! The CPU fast path's dot products, as ggml computes them: activations
//! quantized to 8 bits per 32-value block ([`Q8Row`], ggml's q8_0/q8_1:
//! codes against the f32 scale, the scale kept as f16), then integer dot products of weight blocks with them, one
//! multiply by both scales per block.
//!
//! The block loops exist in plain Rust and, on x86-64, with AVX2
//! intrinsics chosen at run time when the CPU has AVX2 and FMA (ggml's
//! main path there); other CPUs run the plain loops. Quantizing the activations costs accuracy within
//! the limits llama.cpp's test-backend-ops allows for quantized mul_mat;
//! [`crate::quant::dot_row`] stays the exact reference.

use half::f16;

use super::{BlockQ4_0, BlockQ4_1, BlockQ8_0};
use crate::{DType, Error, Result};

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
        for (b, (xs, qs)) in x
            .chunks_exact(BLOCK)
            .zip(self.q.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d == 0.0 { 0.0 } else { 1.0 / d };
            let mut sum = 0;
            for (q, &v) in qs.iter_mut().zip(xs) {
                *q = (v * id).round() as i8;
                sum += i32::from(*q);
            }
            // Stored as f16, as ggml's q8_0/q8_1 blocks store it: the fast
            // path then computes what llama.cpp's CPU backend does.
            self.d[b] = f16::from_f32(d).to_f32();
            self.sums[b] = sum;
            self.dsums[b] = self.d[b] * sum as f32;
        }
        Ok(())
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
    matches!(dtype, DType::Q4_0 | DType::Q4_1 | DType::Q8_0)
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
        DType::Q4_0 => with_blocks(bytes, |b| each_column(b, xs, out, kernels.q4_0)),
        DType::Q4_1 => with_blocks(bytes, |b| each_column(b, xs, out, kernels.q4_1)),
        _ => with_blocks(bytes, |b| each_column(b, xs, out, kernels.q8_0)),
    }
    Ok(())
}

fn each_column<B>(blocks: &[B], xs: &[Q8Row], out: &mut [f32], kernel: fn(&[B], &Q8Row) -> f32) {
    for (o, x) in out.iter_mut().zip(xs) {
        *o = kernel(blocks, x);
    }
}

/// The block loops of one instruction set.
struct Kernels {
    q4_0: fn(&[BlockQ4_0], &Q8Row) -> f32,
    q4_1: fn(&[BlockQ4_1], &Q8Row) -> f32,
    q8_0: fn(&[BlockQ8_0], &Q8Row) -> f32,
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
            return Kernels {
                q4_0: |b, x| unsafe { avx2::q4_0(b, x) },
                q4_1: |b, x| unsafe { avx2::q4_1(b, x) },
                q8_0: |b, x| unsafe { avx2::q8_0(b, x) },
            };
        }
        Kernels {
            q4_0: portable::q4_0,
            q4_1: portable::q4_1,
            q8_0: portable::q8_0,
        }
    })
}

/// The block loops in plain Rust (integer sums are exact, so every
/// instruction set's kernels agree up to the f32 accumulation order).
mod portable {
    use super::{f16_to_f32, Q8Row, BLOCK};
    use crate::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0};

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
    use crate::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0};

    /// Σ of eight f32 lanes.
    #[target_feature(enable = "avx2,fma")]
    fn sum8(v: __m256) -> f32 {
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
    fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256 {
        let pairs = _mm256_maddubs_epi16(u, s);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
    }

    /// A block's 32 activation codes.
    #[target_feature(enable = "avx2,fma")]
    fn codes(xq: &[i8]) -> __m256i {
        assert!(xq.len() >= BLOCK);
        // SAFETY: checked above: 32 readable bytes; the load is unaligned.
        unsafe { _mm256_loadu_si256(xq.as_ptr().cast()) }
    }

    /// An f16 scale as f32, with F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn scale(h: f16) -> f32 {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h.to_bits()))))
    }

    /// Over blocks of 4-bit codes, each with its codes, scale `d` and
    /// offset factor `o`: (Σ d dx Σ code·xq, Σ o dx Σ xq). Two vector
    /// accumulators, the second holding one eighth of its sum per lane, so
    /// no scalar sum chains through the blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn nibble_sums<'a>(
        blocks: impl Iterator<Item = (&'a [u8; 16], f16, f16)>,
        x: &Q8Row,
    ) -> (f32, f32) {
        let mut acc = _mm256_setzero_ps();
        let mut offsets = _mm256_setzero_ps();
        for ((qs, d, o), (xq, (&dx, &ds))) in
            blocks.zip(x.q.chunks_exact(BLOCK).zip(x.d.iter().zip(&x.dsums)))
        {
            let p = dot_u8_i8(nibbles(qs), codes(xq));
            acc = _mm256_fmadd_ps(p, _mm256_set1_ps(scale(d) * dx), acc);
            offsets = _mm256_fmadd_ps(_mm256_set1_ps(scale(o)), _mm256_set1_ps(ds), offsets);
        }
        (sum8(acc), sum8(offsets) / 8.0)
    }

    /// q4_0: codes are stored plus 8, so Σ d (code - 8) x = Σ d code x - 8 d Σ x.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q4_0(blocks: &[BlockQ4_0], x: &Q8Row) -> f32 {
        let (dot, offset) = nibble_sums(blocks.iter().map(|w| (&w.qs, w.d, w.d)), x);
        dot - 8.0 * offset
    }

    /// q4_1: d * code + m.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn q4_1(blocks: &[BlockQ4_1], x: &Q8Row) -> f32 {
        let (dot, offset) = nibble_sums(blocks.iter().map(|w| (&w.qs, w.d, w.m)), x);
        dot + offset
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
fn f16_to_f32(h: f16) -> f32 {
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
        for dtype in [DType::Q4_0, DType::Q4_1, DType::Q8_0] {
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
                _ => with_blocks(&w, |b| portable::q8_0(b, &xq)),
            };
            // Integer sums are exact; only the f32 accumulation order may differ.
            assert!((portable - fast).abs() <= 1e-4 * fast.abs().max(1.0));
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
