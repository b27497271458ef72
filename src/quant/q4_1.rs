//! q4_1: 32 values per block as 4-bit codes with an `f16` scale and minimum.

use super::{as_block, as_block_mut, inverse, sum_lanes, QuantBlock};
use crate::DType;
use half::f16;

/// A q4_1 block (ggml's `block_q4_1`, 20 bytes).
///
/// Value `j` (0..16) is `(qs[j] & 0xF) * d + m`; value `j + 16` is
/// `(qs[j] >> 4) * d + m`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum: the value of code 0.
    pub m: f16,
    /// Codes of values 0..16 in the low nibbles, of values 16..32 in the high.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ4_1>() == DType::Q4_1.block_bytes());

impl BlockQ4_1 {
    /// The codes (0..15) of value `j` and value `j + 16`.
    #[inline(always)]
    fn codes(&self, j: usize) -> (f32, f32) {
        let b = self.qs[j];
        ((b & 0xF) as f32, (b >> 4) as f32)
    }
}

impl QuantBlock for BlockQ4_1 {
    const DTYPE: DType = DType::Q4_1;

    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 32] = as_block_mut(out);
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        let (lo, hi) = out.split_at_mut(16);
        for (j, (lo, hi)) in lo.iter_mut().zip(hi).enumerate() {
            let (q0, q1) = self.codes(j);
            *lo = q0 * d + m;
            *hi = q1 * d + m;
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 32] = as_block(values);
        let min = v.iter().copied().fold(f32::INFINITY, f32::min);
        let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        // Codes 0..15 span [min, max].
        let d = f16::from_f32((max - min) / 15.0);
        let m = f16::from_f32(min);
        // Quantize against the stored (rounded) d and m, which decoding uses.
        let (id, m32) = (inverse(d.to_f32()), m.to_f32());
        let code = |x: f32| ((x - m32) * id).round().clamp(0.0, 15.0) as u8;
        let mut qs = [0u8; 16];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = code(v[j]) | (code(v[j + 16]) << 4);
        }
        BlockQ4_1 { d, m, qs }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 32] = as_block(x);
        // sum (q*d + m) * x = d * sum q*x + m * sum x.
        let qx = sum_lanes::<16>(|j| {
            let (q0, q1) = self.codes(j);
            q0 * x[j] + q1 * x[j + 16]
        });
        let sx = sum_lanes::<32>(|j| x[j]);
        self.d.to_f32() * qx + self.m.to_f32() * sx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row, quantize_row};

    /// d = 0.5 (f16 0x3800), m = -1 (f16 0xBC00), every code 0 (value -1)
    /// except three bytes.
    fn hand_block() -> Vec<u8> {
        let mut bytes = vec![0x00, 0x38, 0x00, 0xBC];
        bytes.extend([0x00; 16]);
        bytes[4] = 0xF0; // qs[0]: value 0 code 0 -> -1, value 16 code 15 -> 7.5 - 1
        bytes[5] = 0x19; // qs[1]: value 1 code 9 -> 3.5, value 17 code 1 -> -0.5
        bytes[19] = 0x42; // qs[15]: value 15 code 2 -> 0, value 31 code 4 -> 1
        bytes
    }

    fn hand_values() -> [f32; 32] {
        let mut v = [-1.0; 32];
        (v[0], v[16]) = (-1.0, 6.5);
        (v[1], v[17]) = (3.5, -0.5);
        (v[15], v[31]) = (0.0, 1.0);
        v
    }

    #[test]
    fn hand_worked_block() {
        assert_eq!(f16::from_f32(-1.0).to_bits(), 0xBC00);
        let mut out = [f32::NAN; 32];
        dequantize_row(DType::Q4_1, &hand_block(), &mut out).unwrap();
        assert_eq!(out, hand_values());

        // 27 values of -1 plus 6.5 + 3.5 - 0.5 + 0 + 1.
        assert_eq!(
            dot_row(DType::Q4_1, &hand_block(), &[1.0; 32]).unwrap(),
            -16.5
        );
        let mut x = [0.0; 32];
        (x[16], x[1], x[2]) = (2.0, -1.0, 4.0);
        assert_eq!(
            dot_row(DType::Q4_1, &hand_block(), &x).unwrap(),
            13.0 - 3.5 - 4.0
        );
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // hand_values() spans code 0 (-1) to code 15 (6.5): d = 7.5 / 15 = 0.5.
        assert_eq!(
            quantize_row(DType::Q4_1, &hand_values()).unwrap(),
            hand_block()
        );
        // Every code once, with a positive minimum.
        let v: Vec<f32> = (0..32).map(|i| (i % 16) as f32 * 0.125 + 3.0).collect();
        let b = BlockQ4_1::quantize(&v);
        let mut out = [0.0; 32];
        b.dequantize(&mut out);
        assert_eq!(&out[..], &v[..]);
    }

    #[test]
    fn constant_and_zero_blocks() {
        for c in [0.0, 2.5] {
            let b = BlockQ4_1::quantize(&[c; 32]);
            assert_eq!(b.d.to_f32(), 0.0);
            let mut out = [f32::NAN; 32];
            b.dequantize(&mut out);
            assert_eq!(out, [c; 32]);
            assert_eq!(b.dot(&[1.0; 32]), 32.0 * c);
        }
    }
}
