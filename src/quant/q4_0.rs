//! q4_0: 32 values per block as 4-bit codes offset by 8, one `f16` scale.

use super::{as_block, as_block_mut, inverse, max_magnitude, sum_lanes, QuantBlock};
use crate::DType;
use half::f16;

/// A q4_0 block (ggml's `block_q4_0`, 18 bytes).
///
/// Value `j` (0..16) is `((qs[j] & 0xF) - 8) * d`; value `j + 16` is
/// `((qs[j] >> 4) - 8) * d`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Codes of values 0..16 in the low nibbles, of values 16..32 in the high.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ4_0>() == DType::Q4_0.block_bytes());

impl BlockQ4_0 {
    /// The signed codes (-8..7) of value `j` and value `j + 16`.
    #[inline(always)]
    fn codes(&self, j: usize) -> (f32, f32) {
        let b = self.qs[j];
        (((b & 0xF) as i32 - 8) as f32, ((b >> 4) as i32 - 8) as f32)
    }
}

impl QuantBlock for BlockQ4_0 {
    const DTYPE: DType = DType::Q4_0;

    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 32] = as_block_mut(out);
        let d = self.d.to_f32();
        let (lo, hi) = out.split_at_mut(16);
        for (j, (lo, hi)) in lo.iter_mut().zip(hi).enumerate() {
            let (q0, q1) = self.codes(j);
            *lo = q0 * d;
            *hi = q1 * d;
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 32] = as_block(values);
        // The largest-magnitude value gets code -8, the end with the most range.
        let d = f16::from_f32(max_magnitude(v) / -8.0);
        // Quantize with the stored (rounded) scale, which is what decoding uses.
        let id = inverse(d.to_f32());
        let code = |x: f32| (x * id + 8.0).round().clamp(0.0, 15.0) as u8;
        let mut qs = [0u8; 16];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = code(v[j]) | (code(v[j + 16]) << 4);
        }
        BlockQ4_0 { d, qs }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 32] = as_block(x);
        // The scale is common to the block: sum codes * x first, scale once.
        let sum = sum_lanes::<16>(|j| {
            let (q0, q1) = self.codes(j);
            q0 * x[j] + q1 * x[j + 16]
        });
        sum * self.d.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row, quantize_row};

    /// d = 0.5 (f16 0x3800), every byte 0x88 (codes 8, 8: zero) except three.
    fn hand_block() -> Vec<u8> {
        let mut bytes = vec![0x00, 0x38];
        bytes.extend([0x88; 16]);
        bytes[2] = 0xF0; // qs[0]: value 0 code 0 -> -8 * 0.5, value 16 code 15 -> 7 * 0.5
        bytes[3] = 0x19; // qs[1]: value 1 code 9 -> 0.5, value 17 code 1 -> -3.5
        bytes[17] = 0x7C; // qs[15]: value 15 code 12 -> 2.0, value 31 code 7 -> -0.5
        bytes
    }

    fn hand_values() -> [f32; 32] {
        let mut v = [0.0; 32];
        (v[0], v[16]) = (-4.0, 3.5);
        (v[1], v[17]) = (0.5, -3.5);
        (v[15], v[31]) = (2.0, -0.5);
        v
    }

    #[test]
    fn hand_worked_block() {
        assert_eq!(f16::from_f32(0.5).to_bits(), 0x3800);
        let mut out = [f32::NAN; 32];
        dequantize_row(DType::Q4_0, &hand_block(), &mut out).unwrap();
        assert_eq!(out, hand_values());

        // Sum of the six non-zero values, and a weighted sum.
        assert_eq!(
            dot_row(DType::Q4_0, &hand_block(), &[1.0; 32]).unwrap(),
            -2.0
        );
        let ramp: Vec<f32> = (0..32).map(|i| i as f32).collect();
        let want = 16.0 * 3.5 + 0.5 + 17.0 * -3.5 + 15.0 * 2.0 + 31.0 * -0.5;
        assert_eq!(dot_row(DType::Q4_0, &hand_block(), &ramp).unwrap(), want);
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // hand_values() holds -8 * d, so quantizing recovers d = 0.5 and every code.
        assert_eq!(
            quantize_row(DType::Q4_0, &hand_values()).unwrap(),
            hand_block()
        );
        // Every code once, scale 0.25, largest magnitude at code 0.
        let v: Vec<f32> = (0..32).map(|i| ((i % 16) - 8) as f32 * 0.25).collect();
        let b = BlockQ4_0::quantize(&v);
        let mut out = [0.0; 32];
        b.dequantize(&mut out);
        assert_eq!(&out[..], &v[..]);
    }

    #[test]
    fn zero_block() {
        let b = BlockQ4_0::quantize(&[0.0; 32]);
        assert_eq!(b.d.to_f32(), 0.0);
        assert_eq!(b.qs, [0x88; 16]);
        let mut out = [f32::NAN; 32];
        b.dequantize(&mut out);
        assert_eq!(out, [0.0; 32]);
        assert_eq!(b.dot(&[1.0; 32]), 0.0);
    }
}
