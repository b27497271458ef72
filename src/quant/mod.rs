//! ggml's block-quantized formats: block layouts, reference (de)quantization
//! and dot products.
//!
//! Each format stores a fixed number of values per block (32, or 256 for
//! the K-quants) with one or more `f16` scales. The structs here match ggml's byte
//! layout exactly, so rows read from a GGUF file can be cast to them in place.
//! The row functions below are the specification that the GPU kernels are
//! tested against; they favour clarity, with fused loops in [`QuantBlock::dot`]
//! because the CPU matmul calls it in its inner loop.
//!
//! Multi-byte fields are read in native byte order, which is little-endian on
//! every target wgpu supports, as GGUF requires.

pub mod f16_dot;
mod iq4;
mod q2_k;
mod q3_k;
mod q4_0;
mod q4_1;
mod q4_k;
mod q5;
mod q5_k;
mod q6_k;
mod q8_0;
pub mod q8_dot;

pub use iq4::{BlockIQ4NL, BlockIQ4XS, IQ4_VALUES};
pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_0::BlockQ4_0;
pub use q4_1::BlockQ4_1;
pub use q4_k::BlockQ4K;
pub use q5::{BlockQ5_0, BlockQ5_1};
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8_0::BlockQ8_0;

use crate::{DType, Error, Result};
use half::{bf16, f16};

/// One block of a quantized format.
///
/// The slice arguments must hold exactly [`QuantBlock::ELEMS`] values; the
/// methods panic otherwise (the row functions guarantee it).
pub trait QuantBlock: bytemuck::Pod {
    /// The tensor type whose rows are made of these blocks.
    const DTYPE: DType;
    /// Number of values in one block.
    const ELEMS: usize = Self::DTYPE.block_elems();

    /// Writes the block's `ELEMS` values to `out`.
    fn dequantize(&self, out: &mut [f32]);

    /// Quantizes `ELEMS` values into a block (the reference quantizer).
    fn quantize(values: &[f32]) -> Self;

    /// Dot product of the block's values with `x`, without materializing them.
    fn dot(&self, x: &[f32]) -> f32;
}

/// Dequantizes a row of `out.len()` values stored as `dtype` in `bytes`.
///
/// Errors if `dtype` is [`DType::I32`], if `out.len()` is not a whole number of
/// blocks, or if `bytes` is not exactly one such row long.
pub fn dequantize_row(dtype: DType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check_row(dtype, bytes, out.len())?;
    match dtype {
        DType::F32 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        DType::F16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        DType::BF16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = bf16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        DType::Q4_0 => dequantize_blocks::<BlockQ4_0>(bytes, out),
        DType::Q4_1 => dequantize_blocks::<BlockQ4_1>(bytes, out),
        DType::Q5_0 => dequantize_blocks::<BlockQ5_0>(bytes, out),
        DType::Q5_1 => dequantize_blocks::<BlockQ5_1>(bytes, out),
        DType::Q8_0 => dequantize_blocks::<BlockQ8_0>(bytes, out),
        DType::Q2K => dequantize_blocks::<BlockQ2K>(bytes, out),
        DType::Q3K => dequantize_blocks::<BlockQ3K>(bytes, out),
        DType::Q4K => dequantize_blocks::<BlockQ4K>(bytes, out),
        DType::Q5K => dequantize_blocks::<BlockQ5K>(bytes, out),
        DType::Q6K => dequantize_blocks::<BlockQ6K>(bytes, out),
        DType::IQ4NL => dequantize_blocks::<BlockIQ4NL>(bytes, out),
        DType::IQ4XS => dequantize_blocks::<BlockIQ4XS>(bytes, out),
        DType::I32 => return Err(integer_rows(dtype)),
    }
    Ok(())
}

/// Quantizes `values` into a row of `dtype`, returned as raw bytes.
///
/// Errors if `dtype` is [`DType::I32`] or `values.len()` is not a whole number
/// of blocks.
pub fn quantize_row(dtype: DType, values: &[f32]) -> Result<Vec<u8>> {
    reject_i32(dtype)?;
    let mut bytes = Vec::with_capacity(dtype.row_bytes(values.len())?);
    match dtype {
        DType::F32 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes())),
        DType::F16 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&f16::from_f32(*v).to_le_bytes())),
        // Rounded to nearest even, NaNs kept NaN: ggml's fp32_to_bf16.
        DType::BF16 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&bf16::from_f32(*v).to_le_bytes())),
        DType::Q4_0 => quantize_blocks::<BlockQ4_0>(values, &mut bytes),
        DType::Q4_1 => quantize_blocks::<BlockQ4_1>(values, &mut bytes),
        DType::Q5_0 => quantize_blocks::<BlockQ5_0>(values, &mut bytes),
        DType::Q5_1 => quantize_blocks::<BlockQ5_1>(values, &mut bytes),
        DType::Q8_0 => quantize_blocks::<BlockQ8_0>(values, &mut bytes),
        DType::Q2K => quantize_blocks::<BlockQ2K>(values, &mut bytes),
        DType::Q3K => quantize_blocks::<BlockQ3K>(values, &mut bytes),
        DType::Q4K => quantize_blocks::<BlockQ4K>(values, &mut bytes),
        DType::Q5K => quantize_blocks::<BlockQ5K>(values, &mut bytes),
        DType::Q6K => quantize_blocks::<BlockQ6K>(values, &mut bytes),
        DType::IQ4NL => quantize_blocks::<BlockIQ4NL>(values, &mut bytes),
        DType::IQ4XS => quantize_blocks::<BlockIQ4XS>(values, &mut bytes),
        DType::I32 => return Err(integer_rows(dtype)),
    }
    Ok(bytes)
}

/// Dot product of a row stored as `dtype` in `bytes` with `x` (`x.len()`
/// values). Errors as [`dequantize_row`] does.
pub fn dot_row(dtype: DType, bytes: &[u8], x: &[f32]) -> Result<f32> {
    check_row(dtype, bytes, x.len())?;
    Ok(match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .zip(x)
            .map(|(b, x)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * x)
            .sum(),
        DType::F16 => bytes
            .chunks_exact(2)
            .zip(x)
            .map(|(b, x)| f16::from_le_bytes([b[0], b[1]]).to_f32() * x)
            .sum(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .zip(x)
            .map(|(b, x)| bf16::from_le_bytes([b[0], b[1]]).to_f32() * x)
            .sum(),
        DType::Q4_0 => dot_blocks::<BlockQ4_0>(bytes, x),
        DType::Q4_1 => dot_blocks::<BlockQ4_1>(bytes, x),
        DType::Q5_0 => dot_blocks::<BlockQ5_0>(bytes, x),
        DType::Q5_1 => dot_blocks::<BlockQ5_1>(bytes, x),
        DType::Q8_0 => dot_blocks::<BlockQ8_0>(bytes, x),
        DType::Q2K => dot_blocks::<BlockQ2K>(bytes, x),
        DType::Q3K => dot_blocks::<BlockQ3K>(bytes, x),
        DType::Q4K => dot_blocks::<BlockQ4K>(bytes, x),
        DType::Q5K => dot_blocks::<BlockQ5K>(bytes, x),
        DType::Q6K => dot_blocks::<BlockQ6K>(bytes, x),
        DType::IQ4NL => dot_blocks::<BlockIQ4NL>(bytes, x),
        DType::IQ4XS => dot_blocks::<BlockIQ4XS>(bytes, x),
        DType::I32 => return Err(integer_rows(dtype)),
    })
}

fn integer_rows(dtype: DType) -> Error {
    Error::UnsupportedType(format!("{dtype}: integer rows cannot be (de)quantized"))
}

fn reject_i32(dtype: DType) -> Result<()> {
    match dtype {
        DType::I32 => Err(integer_rows(dtype)),
        _ => Ok(()),
    }
}

/// Checks that `bytes` is exactly one `dtype` row of `n` values.
fn check_row(dtype: DType, bytes: &[u8], n: usize) -> Result<()> {
    reject_i32(dtype)?;
    let need = dtype.row_bytes(n)?;
    if bytes.len() != need {
        return Err(Error::shape(format!(
            "a {dtype} row of {n} values is {need} bytes, got {}",
            bytes.len()
        )));
    }
    Ok(())
}

/// Calls `f` with the index and contents of each block in `bytes`, a whole
/// number of blocks. Casts in place when `bytes` is aligned for `B` (the usual
/// case: GGUF aligns tensor data) and copies each block out otherwise.
fn for_each_block<B: QuantBlock>(bytes: &[u8], mut f: impl FnMut(usize, &B)) {
    match bytemuck::try_cast_slice::<u8, B>(bytes) {
        Ok(blocks) => blocks.iter().enumerate().for_each(|(i, b)| f(i, b)),
        Err(_) => bytes
            .chunks_exact(size_of::<B>())
            .enumerate()
            .for_each(|(i, c)| f(i, &bytemuck::pod_read_unaligned(c))),
    }
}

fn dequantize_blocks<B: QuantBlock>(bytes: &[u8], out: &mut [f32]) {
    for_each_block(bytes, |i, b: &B| {
        b.dequantize(&mut out[i * B::ELEMS..(i + 1) * B::ELEMS])
    });
}

fn quantize_blocks<B: QuantBlock>(values: &[f32], bytes: &mut Vec<u8>) {
    for chunk in values.chunks_exact(B::ELEMS) {
        bytes.extend_from_slice(bytemuck::bytes_of(&B::quantize(chunk)));
    }
}

fn dot_blocks<B: QuantBlock>(bytes: &[u8], x: &[f32]) -> f32 {
    let mut sum = 0.0;
    for_each_block(bytes, |i, b: &B| {
        sum += b.dot(&x[i * B::ELEMS..(i + 1) * B::ELEMS])
    });
    sum
}

/// The value of largest magnitude, sign kept (the first one on ties; 0 for an
/// empty slice). Quantizers map it to the most negative code, which has one
/// more step of range than the positive side.
fn max_magnitude(values: &[f32]) -> f32 {
    values
        .iter()
        .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
}

/// ggml's `nearest_int`: `x` rounded half to even (the K-quant reference
/// quantizers ported from ggml round with it), saturating.
fn nearest_int(x: f32) -> i32 {
    x.round_ties_even() as i32
}

/// `1 / d`, or 0 for `d == 0` so that an all-zero block quantizes to zeros
/// instead of NaN.
fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// Views a block-sized slice as an array; the length check is what lets the
/// compiler drop bounds checks in the block loops.
///
/// The panic is [`QuantBlock`]'s documented contract for a wrong-length
/// slice. No file or argument reaches it: the crate's callers pass
/// `chunks_exact(ELEMS)` pieces, fixed sub-blocks of a block, or
/// `ELEMS`-long windows of a row whose length `check_row` checked first.
fn as_block<const N: usize>(values: &[f32]) -> &[f32; N] {
    values
        .try_into()
        .unwrap_or_else(|_| panic!("a block holds {N} values, got {}", values.len()))
}

/// [`as_block`] for writing (the same contract).
fn as_block_mut<const N: usize>(values: &mut [f32]) -> &mut [f32; N] {
    let len = values.len();
    values
        .try_into()
        .unwrap_or_else(|_| panic!("a block holds {N} values, got {len}"))
}

/// Sums `term(i)` for `i` in `0..N` (a multiple of 8) in 8 independent lanes,
/// so that the dot loops vectorize instead of waiting on one accumulator.
#[inline(always)]
fn sum_lanes<const N: usize>(term: impl Fn(usize) -> f32) -> f32 {
    let mut acc = [0.0f32; 8];
    for c in 0..N / 8 {
        for (k, a) in acc.iter_mut().enumerate() {
            *a += term(8 * c + k);
        }
    }
    acc.iter().sum()
}

#[cfg(test)]
mod tests {
    /// bf16 rounds to nearest even and keeps NaN a NaN, as ggml's
    /// fp32_to_bf16; values come back as the top halves of f32s.
    #[test]
    fn bf16_rounds_to_nearest_even() {
        use super::{dequantize_row, quantize_row, DType};
        let cases: [(u32, u16); 5] = [
            (0x3f80_0000, 0x3f80), // 1.0
            (0x3f80_8000, 0x3f80), // a tie below an even mantissa: down
            (0x3f81_8000, 0x3f82), // a tie below an odd mantissa: up
            (0x3f80_8001, 0x3f81), // past the tie: up
            (0xc2f7_7fff, 0xc2f7), // below the tie: down (negative)
        ];
        for (bits, want) in cases {
            let bytes = quantize_row(DType::BF16, &[f32::from_bits(bits)]).unwrap();
            assert_eq!(u16::from_le_bytes([bytes[0], bytes[1]]), want, "{bits:#x}");
            let mut back = [0.0f32];
            dequantize_row(DType::BF16, &bytes, &mut back).unwrap();
            assert_eq!(back[0].to_bits(), u32::from(want) << 16);
        }
        let nan = quantize_row(DType::BF16, &[f32::NAN]).unwrap();
        let mut back = [0.0f32];
        dequantize_row(DType::BF16, &nan, &mut back).unwrap();
        assert!(back[0].is_nan());
    }

    use super::*;

    #[test]
    fn unaligned_bytes_read_like_aligned() {
        let values: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
        for dtype in DType::ALL.into_iter().filter(|t| t.is_quantized()) {
            let bytes = quantize_row(dtype, &values).unwrap();
            // Place the row at an odd address so that the in-place cast fails.
            let mut buf = vec![0u8; bytes.len() + 1];
            let start = usize::from((buf.as_ptr() as usize).is_multiple_of(2));
            buf[start..start + bytes.len()].copy_from_slice(&bytes);
            let odd = &buf[start..start + bytes.len()];
            assert!(!(odd.as_ptr() as usize).is_multiple_of(2));

            let (mut a, mut b) = (vec![0.0; 256], vec![0.0; 256]);
            dequantize_row(dtype, &bytes, &mut a).unwrap();
            dequantize_row(dtype, odd, &mut b).unwrap();
            assert_eq!(a, b, "{dtype}");
            assert_eq!(
                dot_row(dtype, &bytes, &values).unwrap(),
                dot_row(dtype, odd, &values).unwrap(),
                "{dtype}"
            );
        }
    }

    #[test]
    fn i32_is_unsupported() {
        let mut out = [0.0; 4];
        let err = dequantize_row(DType::I32, &[0; 16], &mut out).unwrap_err();
        assert!(matches!(err, Error::UnsupportedType(_)));
        assert!(matches!(
            quantize_row(DType::I32, &out),
            Err(Error::UnsupportedType(_))
        ));
        assert!(matches!(
            dot_row(DType::I32, &[0; 16], &out),
            Err(Error::UnsupportedType(_))
        ));
    }

    #[test]
    fn f32_rows_are_little_endian() {
        let bytes = quantize_row(DType::F32, &[1.0, -2.5]).unwrap();
        assert_eq!(bytes, [0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0]);
        let mut out = [0.0; 2];
        dequantize_row(DType::F32, &bytes, &mut out).unwrap();
        assert_eq!(out, [1.0, -2.5]);
        assert_eq!(dot_row(DType::F32, &bytes, &[2.0, 1.0]).unwrap(), -0.5);
    }

    #[test]
    fn max_magnitude_keeps_sign() {
        assert_eq!(max_magnitude(&[1.0, -3.0, 2.0, 3.0]), -3.0);
        assert_eq!(max_magnitude(&[0.0; 4]), 0.0);
    }
}
