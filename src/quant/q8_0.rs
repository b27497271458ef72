//! q8_0: 32 values per block as signed 8-bit codes, one `f16` scale.

use super::{as_block, as_block_mut, inverse, sum_lanes, QuantBlock};
use crate::DType;
use half::f16;

/// A q8_0 block (ggml's `block_q8_0`, 34 bytes): value `j` is `qs[j] * d`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Signed codes, one per value.
    pub qs: [i8; 32],
}

const _: () = assert!(size_of::<BlockQ8_0>() == DType::Q8_0.block_bytes());

impl QuantBlock for BlockQ8_0 {
    const DTYPE: DType = DType::Q8_0;

    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 32] = as_block_mut(out);
        let d = self.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 32] = as_block(values);
        // Symmetric: the largest magnitude maps to +-127 (-128 is never used).
        let amax = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let d = f16::from_f32(amax / 127.0);
        // Against the stored (rounded) d; the clamp absorbs its rounding.
        let id = inverse(d.to_f32());
        let qs = v.map(|x| (x * id).round().clamp(-127.0, 127.0) as i8);
        BlockQ8_0 { d, qs }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 32] = as_block(x);
        sum_lanes::<32>(|j| self.qs[j] as f32 * x[j]) * self.d.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row, quantize_row};

    /// d = 0.25 (f16 0x3400), every code 0 except four.
    fn hand_block() -> Vec<u8> {
        let mut bytes = vec![0x00, 0x34];
        bytes.extend([0x00; 32]);
        bytes[2] = 0x81; // qs[0] = -127 -> -31.75
        bytes[3] = 0x04; // qs[1] = 4 -> 1.0
        bytes[4] = 0xFF; // qs[2] = -1 -> -0.25
        bytes[33] = 0x7F; // qs[31] = 127 -> 31.75
        bytes
    }

    fn hand_values() -> [f32; 32] {
        let mut v = [0.0; 32];
        (v[0], v[1], v[2], v[31]) = (-31.75, 1.0, -0.25, 31.75);
        v
    }

    #[test]
    fn hand_worked_block() {
        assert_eq!(f16::from_f32(0.25).to_bits(), 0x3400);
        let mut out = [f32::NAN; 32];
        dequantize_row(DType::Q8_0, &hand_block(), &mut out).unwrap();
        assert_eq!(out, hand_values());

        assert_eq!(
            dot_row(DType::Q8_0, &hand_block(), &[1.0; 32]).unwrap(),
            0.75
        );
        let mut x = [0.0; 32];
        (x[0], x[2], x[31]) = (2.0, 8.0, -1.0);
        assert_eq!(
            dot_row(DType::Q8_0, &hand_block(), &x).unwrap(),
            -63.5 - 2.0 - 31.75
        );
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // amax = 31.75 = 127 * 0.25 recovers d and every code.
        assert_eq!(
            quantize_row(DType::Q8_0, &hand_values()).unwrap(),
            hand_block()
        );
        // A spread of codes with the largest magnitude negative.
        let v: Vec<f32> = (0..32).map(|i| (i * 8 - 127) as f32 / 64.0).collect();
        let b = BlockQ8_0::quantize(&v);
        let mut out = [0.0; 32];
        b.dequantize(&mut out);
        assert_eq!(&out[..], &v[..]);
    }

    #[test]
    fn zero_block() {
        let b = BlockQ8_0::quantize(&[0.0; 32]);
        assert_eq!(b.d.to_f32(), 0.0);
        assert_eq!(b.qs, [0; 32]);
        let mut out = [f32::NAN; 32];
        b.dequantize(&mut out);
        assert_eq!(out, [0.0; 32]);
    }
}
