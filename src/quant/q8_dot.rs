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

#[cfg(target_arch = "x86_64")]
use super::{BlockIQ4NL, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K};
use crate::{DType, Error, Result};

#[cfg(target_arch = "x86_64")]
mod avx2;
mod portable;
mod two_bit;
#[cfg(target_arch = "x86_64")]
mod vnni;

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
    /// The code sums of each block's two halves.
    halves: Vec<[i32; 2]>,
    /// Codes, scale and scaled code sum of each block side by side, for
    /// the SIMD loops: a column is then one pointer that steps 40 bytes a
    /// block, where three separate walks of four columns spilled their
    /// iterators' state to the stack.
    packed: Vec<Q8Block>,
    /// Whether each run of [`SUPER`] blocks shares one scale
    /// ([`Q8Row::quantize_super`]).
    shared: bool,
}

/// The most rows the prompt loops take together (one per 32-bit lane of
/// an AVX-512 vector); they take them where the row index is a multiple of
/// it, so callers that split rows at its multiples get the same results
/// however they split them.
pub const TILE_ROWS: usize = 16;

/// Blocks of a 256-value super-block (K-quants, iq4_xs; ggml's q8_K).
pub const SUPER: usize = 8;

/// Each 32-value block of `x` as codes in `q`, its scale (f32) in `d`
/// and the code sums of its two halves in `halves`; compiled for AVX2
/// where the CPU has it, where rounding is a vector instruction rather
/// than a libm call per value (6% of a prompt).
fn encode(x: &[f32], group: usize, q: &mut [i8], d: &mut [f32], halves: &mut [[i32; 2]]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2,fma")]
        fn with_avx2(
            x: &[f32],
            group: usize,
            q: &mut [i8],
            d: &mut [f32],
            halves: &mut [[i32; 2]],
        ) {
            encode_blocks(x, group, q, d, halves);
        }
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { with_avx2(x, group, q, d, halves) };
    }
    encode_blocks(x, group, q, d, halves);
}

/// [`encode`]'s loop, inlined into each instruction set's copy: each run
/// of `group` blocks shares the scale of its largest magnitude.
#[inline(always)]
fn encode_blocks(x: &[f32], group: usize, q: &mut [i8], d: &mut [f32], halves: &mut [[i32; 2]]) {
    let span = BLOCK * group;
    let runs = x.chunks_exact(span).zip(q.chunks_exact_mut(span));
    let scales = d
        .chunks_exact_mut(group)
        .zip(halves.chunks_exact_mut(group));
    for ((xs, qs), (d, halves)) in runs.zip(scales) {
        // The largest magnitude in eight lanes first, so it vectorizes.
        let mut lanes = [0.0f32; 8];
        for v in xs.chunks_exact(8) {
            for (m, v) in lanes.iter_mut().zip(v) {
                *m = m.max(v.abs());
            }
        }
        let amax = lanes.iter().fold(0.0f32, |m, &v| m.max(v));
        let scale = amax / 127.0;
        let id = if scale == 0.0 { 0.0 } else { 1.0 / scale };
        for (q, &v) in qs.iter_mut().zip(xs) {
            *q = (v * id).round() as i8;
        }
        d.fill(scale);
        let sum = |h: &[i8]| h.iter().map(|&q| i32::from(q)).sum::<i32>();
        for (halves, qs) in halves.iter_mut().zip(qs.chunks_exact(BLOCK)) {
            *halves = [sum(&qs[..16]), sum(&qs[16..])];
        }
    }
}

/// One block of a [`Q8Row`], its fields together. Only the AVX2 loops
/// read them, so other targets would warn that nothing does.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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
        self.quantize_runs(x, 1)
    }

    /// Quantizes `x`, a whole number of 256-value super-blocks, as ggml's
    /// q8_K does for K-quant weights: the eight blocks of a super-block
    /// share one scale (f32), so that a K-quant's sub-block dots can be
    /// scaled and summed in integers before one conversion per
    /// super-block.
    pub fn quantize_super(&mut self, x: &[f32]) -> Result<()> {
        self.quantize_runs(x, SUPER)
    }

    /// Whether each run of [`SUPER`] blocks shares one scale.
    pub fn shares_scales(&self) -> bool {
        self.shared
    }

    fn quantize_runs(&mut self, x: &[f32], group: usize) -> Result<()> {
        if !x.len().is_multiple_of(BLOCK * group) {
            return Err(Error::shape(format!(
                "q8 activations come in blocks of {}, got {} values",
                BLOCK * group,
                x.len()
            )));
        }
        self.shared = group == SUPER;
        let blocks = x.len() / BLOCK;
        self.q.resize(x.len(), 0);
        self.d.resize(blocks, 0.0);
        self.sums.resize(blocks, 0);
        self.dsums.resize(blocks, 0.0);
        self.half_dsums.resize(blocks, [0.0; 2]);
        self.halves.resize(blocks, [0; 2]);
        self.packed.clear();
        encode(x, group, &mut self.q, &mut self.d, &mut self.halves);
        for (b, qs) in self.q.chunks_exact(BLOCK).enumerate() {
            let halves = self.halves[b];
            let sum = halves[0] + halves[1];
            // Stored as f16, as ggml's q8_0/q8_1 blocks store it (q8_K's
            // is f32): the fast path then computes what llama.cpp's CPU
            // backend does.
            if !self.shared {
                self.d[b] = f16::from_f32(self.d[b]).to_f32();
            }
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
/// `out`.
pub fn dots(dtype: DType, bytes: &[u8], xs: &[Q8Row], out: &mut [f32]) -> Result<()> {
    let k = xs.first().map_or(0, Q8Row::len);
    RowDots::new(dtype, k)?.rows(bytes, 0, xs, out)
}

/// The dot loops of one weight type and row length, checked and chosen
/// once for a whole mul_mat and run over many rows per call: per row, the
/// checks and calls cost as much as a dot of a short row (576 values).
#[derive(Clone, Copy)]
pub struct RowDots {
    dtype: DType,
    k: usize,
    row_bytes: usize,
    kernel: RowKernel,
}

impl RowDots {
    /// The loops for rows of `k` values of `dtype`.
    pub fn new(dtype: DType, k: usize) -> Result<Self> {
        let row_bytes = dtype.row_bytes(k)?;
        let kernel = kernels()
            .of(dtype)
            .ok_or_else(|| Error::UnsupportedType(format!("q8 dots of {dtype} rows")))?;
        Ok(Self {
            dtype,
            k,
            row_bytes,
            kernel,
        })
    }

    /// Dot products of each weight row in `bytes` (whole rows, dense
    /// blocks, one after another; the first is row `first_row` of its
    /// matrix) with each of `xs`, into `out`, a row's results after
    /// another's. Rows whose index is a multiple of four (or of
    /// [`TILE_ROWS`]) may go four (or that many) at a time (results within
    /// rounding of one at a time), so a caller that splits a matrix's rows
    /// at multiples of [`TILE_ROWS`] gets the same results however it
    /// splits them.
    pub fn rows(
        &self,
        bytes: &[u8],
        first_row: usize,
        xs: &[Q8Row],
        out: &mut [f32],
    ) -> Result<()> {
        let (dtype, k, row_bytes) = (self.dtype, self.k, self.row_bytes);
        if row_bytes == 0 || xs.is_empty() {
            out.fill(0.0);
            return Ok(());
        }
        if !bytes.len().is_multiple_of(row_bytes) || xs.iter().any(|x| x.len() != k) {
            return Err(Error::shape(format!(
                "q8 dots need {dtype} rows of {k} values ({row_bytes} bytes each) and columns as long, got {} bytes",
                bytes.len()
            )));
        }
        if out.len() != bytes.len() / row_bytes * xs.len() {
            return Err(Error::shape(format!(
                "{} rows' q8 dots with {} columns into {} values",
                bytes.len() / row_bytes,
                xs.len(),
                out.len()
            )));
        }
        (self.kernel)(bytes, row_bytes, first_row, xs, out);
        Ok(())
    }
}

fn each_column<B>(blocks: &[B], xs: &[Q8Row], out: &mut [f32], kernel: fn(&[B], &Q8Row) -> f32) {
    for (o, x) in out.iter_mut().zip(xs) {
        *o = kernel(blocks, x);
    }
}

/// Whole weight rows (bytes, bytes per row, the first row's index in its
/// matrix) dotted with every column, into `out`.
type RowKernel = fn(&[u8], usize, usize, &[Q8Row], &mut [f32]);

/// Each row of `bytes` (rows of `row_bytes`, as blocks `B`) dotted with
/// every column by `row`, into its `xs.len()` values of `out`.
fn by_rows<B: bytemuck::Pod>(
    bytes: &[u8],
    row_bytes: usize,
    xs: &[Q8Row],
    out: &mut [f32],
    row: impl Fn(&[B], &[Q8Row], &mut [f32]),
) {
    let per_row = (row_bytes / size_of::<B>()).max(1);
    with_blocks(bytes, |blocks: &[B]| {
        let rows = blocks.chunks_exact(per_row);
        let ahead = prefetch_rows::<B>(per_row);
        let prefetch = row_bytes < PREFETCH_ROWS_BELOW;
        for (r, (w, o)) in rows.zip(out.chunks_exact_mut(xs.len().max(1))).enumerate() {
            if prefetch {
                prefetch_row(blocks, per_row, r + ahead);
            }
            row(w, xs, o);
        }
    });
}

/// How far ahead of the row being dotted the row loops prefetch: a decode
/// step reads each weight once, in rows of a few hundred bytes (Gemma 3's
/// 262,144 x 640 q8_0 output product is most of its decode), and the
/// hardware prefetcher alone fell behind.
const PREFETCH_BYTES: usize = 8 << 10;

/// Rows from this many bytes on stream well enough without (a 1B model's
/// q4_K rows of 1,152 bytes decoded 30% faster without the prefetches,
/// the 612-byte q8_0 rows of SmolLM2's output product 10% slower).
const PREFETCH_ROWS_BELOW: usize = 1024;

/// Rows of `per_row` blocks `B` in [`PREFETCH_BYTES`].
fn prefetch_rows<B>(per_row: usize) -> usize {
    (PREFETCH_BYTES / (per_row * size_of::<B>()).max(1)).max(1)
}

/// Asks for row `r` of `blocks` (rows of `per_row` blocks) to be cached,
/// if it exists.
fn prefetch_row<B>(blocks: &[B], per_row: usize, r: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(row) = blocks.get(r * per_row..(r + 1) * per_row) {
        let bytes = std::mem::size_of_val(row);
        let start = row.as_ptr().cast::<i8>();
        for at in (0..bytes).step_by(64) {
            // SAFETY: a prefetch reads nothing the program can observe;
            // the address lies inside `row`.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    start.add(at),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (blocks, per_row, r);
}

/// The block loops of one instruction set, one per quantized type.
struct Kernels {
    q4_0: RowKernel,
    q4_1: RowKernel,
    q8_0: RowKernel,
    q5_0: RowKernel,
    q5_1: RowKernel,
    q4_k: RowKernel,
    q5_k: RowKernel,
    q6_k: RowKernel,
    q2_k: RowKernel,
    q3_k: RowKernel,
    iq4_nl: RowKernel,
    iq4_xs: RowKernel,
}

impl Kernels {
    fn of(&self, dtype: DType) -> Option<RowKernel> {
        Some(match dtype {
            DType::Q4_0 => self.q4_0,
            DType::Q4_1 => self.q4_1,
            DType::Q8_0 => self.q8_0,
            DType::Q5_0 => self.q5_0,
            DType::Q5_1 => self.q5_1,
            DType::Q4K => self.q4_k,
            DType::Q5K => self.q5_k,
            DType::Q6K => self.q6_k,
            DType::Q2K => self.q2_k,
            DType::Q3K => self.q3_k,
            DType::IQ4NL => self.iq4_nl,
            DType::IQ4XS => self.iq4_xs,
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => return None,
        })
    }
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

/// A [`RowKernel`] of a loop over one row's typed blocks.
macro_rules! on_blocks {
    (|$b:ident, $xs:ident, $out:ident| $body:expr) => {
        |bytes: &[u8], row_bytes: usize, _first_row: usize, xs: &[Q8Row], out: &mut [f32]| {
            by_rows(bytes, row_bytes, xs, out, |$b, $xs, $out| $body)
        }
    };
}

/// A [`RowKernel`] of a loop over many rows of blocks `B` at once.
#[cfg(target_arch = "x86_64")]
macro_rules! on_rows {
    ($block:ty, |$b:ident, $per_row:ident, $first:ident, $xs:ident, $out:ident| $body:expr) => {
        |bytes: &[u8], row_bytes: usize, $first: usize, $xs: &[Q8Row], $out: &mut [f32]| {
            let $per_row = row_bytes / size_of::<$block>();
            with_blocks(bytes, |$b: &[$block]| $body)
        }
    };
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
                q4_0: on_rows!(BlockQ4_0, |b, per_row, first, xs, out| unsafe {
                    avx2::q4_0(b, per_row, first, xs, out)
                }),
                q4_1: on_rows!(BlockQ4_1, |b, per_row, first, xs, out| unsafe {
                    avx2::q4_1(b, per_row, first, xs, out)
                }),
                q8_0: on_blocks!(|b, xs, out| unsafe { avx2::q8_0(b, xs, out) }),
                q5_0: on_rows!(BlockQ5_0, |b, per_row, first, xs, out| unsafe {
                    avx2::q5_0(b, per_row, first, xs, out)
                }),
                q5_1: on_rows!(BlockQ5_1, |b, per_row, first, xs, out| unsafe {
                    avx2::q5_1(b, per_row, first, xs, out)
                }),
                q4_k: on_rows!(BlockQ4K, |b, per_row, first, xs, out| unsafe {
                    avx2::q4_k(b, per_row, first, xs, out)
                }),
                q5_k: on_rows!(BlockQ5K, |b, per_row, first, xs, out| unsafe {
                    avx2::q5_k(b, per_row, first, xs, out)
                }),
                q6_k: on_rows!(BlockQ6K, |b, per_row, first, xs, out| unsafe {
                    avx2::q6_k(b, per_row, first, xs, out)
                }),
                q2_k: on_blocks!(|b, xs, out| unsafe { two_bit::avx2::q2_k(b, xs, out) }),
                q3_k: on_blocks!(|b, xs, out| unsafe { two_bit::avx2::q3_k(b, xs, out) }),
                iq4_nl: on_rows!(BlockIQ4NL, |b, per_row, first, xs, out| unsafe {
                    avx2::iq4_nl(b, per_row, first, xs, out)
                }),
                iq4_xs: on_blocks!(|b, xs, out| unsafe { avx2::iq4_xs(b, xs, out) }),
            };
        }
        Kernels {
            q4_0: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q4_0)),
            q4_1: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q4_1)),
            q8_0: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q8_0)),
            q5_0: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q5_0)),
            q5_1: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q5_1)),
            q4_k: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q4_k)),
            q5_k: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q5_k)),
            q6_k: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::q6_k)),
            q2_k: on_blocks!(|b, xs, out| each_column(b, xs, out, two_bit::portable::q2_k)),
            q3_k: on_blocks!(|b, xs, out| each_column(b, xs, out, two_bit::portable::q3_k)),
            iq4_nl: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::iq4_nl)),
            iq4_xs: on_blocks!(|b, xs, out| each_column(b, xs, out, portable::iq4_xs)),
        }
    })
}

/// f16 to f32 through a 64 Ki-entry table, as ggml does: `half`'s
/// conversion without F16C in the build's baseline is a branchy software
/// routine, once per block of every weight row.
#[inline(always)]
pub(super) fn f16_to_f32(h: f16) -> f32 {
    f16_table()[usize::from(h.to_bits())]
}

/// [`f16_to_f32`]'s table, for loops that look it up many times (one
/// check of its initialisation rather than one per value).
pub(super) fn f16_table() -> &'static [f32; 1 << 16] {
    static TABLE: std::sync::OnceLock<Box<[f32; 1 << 16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0.0f32; 1 << 16]);
        for (b, v) in t.iter_mut().enumerate() {
            *v = f16::from_bits(b as u16).to_f32();
        }
        t
    })
}

#[cfg(test)]
mod tests;
