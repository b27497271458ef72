//! q5_0 and q5_1: 32 values per block as 5-bit codes, the low 4 bits packed
//! as in q4_0/q4_1 and the fifth bits in one 32-bit word. q5_0 centres the
//! codes on 16 with one `f16` scale; q5_1 adds an `f16` minimum.

use super::{as_block, as_block_mut, inverse, max_magnitude, sum_lanes, QuantBlock};
use crate::DType;
use half::f16;

/// Codes (0..31) of values `j` and `j + 16` (j < 16): low nibble and high
/// nibble of `qs[j]`, fifth bits `j` and `j + 16` of `qh` (little-endian).
#[inline(always)]
fn codes(qs: &[u8; 16], qh: [u8; 4], j: usize) -> (f32, f32) {
    let h = u32::from_le_bytes(qh);
    let lo = (qs[j] & 0xF) as u32 | (((h >> j) & 1) << 4);
    let hi = (qs[j] >> 4) as u32 | (((h >> (j + 16)) & 1) << 4);
    (lo as f32, hi as f32)
}

/// Packs 32 codes (0..31, in value order) into `qs` and `qh`.
fn pack(code: impl Fn(usize) -> u8) -> ([u8; 16], [u8; 4]) {
    let (mut qs, mut h) = ([0u8; 16], 0u32);
    for (j, q) in qs.iter_mut().enumerate() {
        let (c0, c1) = (code(j), code(j + 16));
        *q = (c0 & 0xF) | ((c1 & 0xF) << 4);
        h |= u32::from(c0 >> 4) << j | u32::from(c1 >> 4) << (j + 16);
    }
    (qs, h.to_le_bytes())
}

/// `sum codes * x` over a block, the part of the dot product both types share.
#[inline(always)]
fn code_dot(qs: &[u8; 16], qh: [u8; 4], x: &[f32; 32]) -> f32 {
    sum_lanes::<16>(|j| {
        let (q0, q1) = codes(qs, qh, j);
        q0 * x[j] + q1 * x[j + 16]
    })
}

/// A q5_0 block (ggml's `block_q5_0`, 22 bytes): value `p` is
/// `(code(p) - 16) * d`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// Fifth bits of the codes, bit `p` for value `p`.
    pub qh: [u8; 4],
    /// Low 4 bits: values 0..16 in the low nibbles, 16..32 in the high.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ5_0>() == DType::Q5_0.block_bytes());

impl QuantBlock for BlockQ5_0 {
    const DTYPE: DType = DType::Q5_0;

    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 32] = as_block_mut(out);
        let d = self.d.to_f32();
        for j in 0..16 {
            let (q0, q1) = codes(&self.qs, self.qh, j);
            out[j] = (q0 - 16.0) * d;
            out[j + 16] = (q1 - 16.0) * d;
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 32] = as_block(values);
        // The largest-magnitude value gets code 0 (-16), as in q4_0.
        let d = f16::from_f32(max_magnitude(v) / -16.0);
        let id = inverse(d.to_f32());
        let (qs, qh) = pack(|p| (v[p] * id + 16.0).round().clamp(0.0, 31.0) as u8);
        BlockQ5_0 { d, qh, qs }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 32] = as_block(x);
        let sx = sum_lanes::<32>(|j| x[j]);
        self.d.to_f32() * (code_dot(&self.qs, self.qh, x) - 16.0 * sx)
    }
}

/// A q5_1 block (ggml's `block_q5_1`, 24 bytes): value `p` is
/// `code(p) * d + m`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum: the value of code 0.
    pub m: f16,
    /// Fifth bits of the codes, bit `p` for value `p`.
    pub qh: [u8; 4],
    /// Low 4 bits: values 0..16 in the low nibbles, 16..32 in the high.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ5_1>() == DType::Q5_1.block_bytes());

impl QuantBlock for BlockQ5_1 {
    const DTYPE: DType = DType::Q5_1;

    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 32] = as_block_mut(out);
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for j in 0..16 {
            let (q0, q1) = codes(&self.qs, self.qh, j);
            out[j] = q0 * d + m;
            out[j + 16] = q1 * d + m;
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 32] = as_block(values);
        let min = v.iter().copied().fold(f32::INFINITY, f32::min);
        let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        // Codes 0..31 span [min, max]; quantize against the stored d and m.
        let (d, m) = (f16::from_f32((max - min) / 31.0), f16::from_f32(min));
        let (id, m32) = (inverse(d.to_f32()), m.to_f32());
        let (qs, qh) = pack(|p| ((v[p] - m32) * id).round().clamp(0.0, 31.0) as u8);
        BlockQ5_1 { d, m, qh, qs }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 32] = as_block(x);
        let sx = sum_lanes::<32>(|j| x[j]);
        self.d.to_f32() * code_dot(&self.qs, self.qh, x) + self.m.to_f32() * sx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row, quantize_row};

    /// Codes: value 0 -> 31, 1 -> 16, 16 -> 0, 17 -> 17, 31 -> 5, others 16.
    fn hand_codes() -> [u8; 32] {
        let mut c = [16u8; 32];
        (c[0], c[1], c[16], c[17], c[31]) = (31, 16, 0, 17, 5);
        c
    }

    /// The codes above packed by hand: qs[j] = low nibbles of codes j and
    /// j + 16, qh bit p = bit 4 of code p.
    fn hand_payload() -> Vec<u8> {
        // Fifth bits: codes 31, 16, 17 and every other 16 have it; 0 and 5 not.
        let qh: u32 = !(1 << 16 | 1 << 31);
        let mut b = qh.to_le_bytes().to_vec();
        let mut qs = [0x00u8; 16]; // codes 16 and 16: low nibbles 0
        qs[0] = 0x0F; // value 0 low 15, value 16 low 0
        qs[1] = 0x10; // value 1 low 0, value 17 low 1
        qs[15] = 0x50; // value 15 low 0, value 31 low 5
        b.extend(qs);
        b
    }

    #[test]
    fn hand_worked_q5_0_block() {
        let mut bytes = f16::from_f32(0.25).to_le_bytes().to_vec();
        bytes.extend(hand_payload());
        let mut out = [f32::NAN; 32];
        dequantize_row(DType::Q5_0, &bytes, &mut out).unwrap();
        let want = hand_codes().map(|c| (c as f32 - 16.0) * 0.25);
        assert_eq!(out, want);
        assert_eq!((out[0], out[16], out[31]), (3.75, -4.0, -2.75));
        let ramp: Vec<f32> = (0..32).map(|i| i as f32).collect();
        let dot: f32 = want.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q5_0, &bytes, &ramp).unwrap(), dot);
        // Those values are representable: quantizing gives the block back.
        assert_eq!(quantize_row(DType::Q5_0, &want).unwrap(), bytes);
    }

    #[test]
    fn hand_worked_q5_1_block() {
        let mut bytes = f16::from_f32(0.5).to_le_bytes().to_vec();
        bytes.extend(f16::from_f32(-2.0).to_le_bytes());
        bytes.extend(hand_payload());
        let mut out = [f32::NAN; 32];
        dequantize_row(DType::Q5_1, &bytes, &mut out).unwrap();
        let want = hand_codes().map(|c| c as f32 * 0.5 - 2.0);
        assert_eq!(out, want);
        assert_eq!((out[0], out[16], out[31]), (13.5, -2.0, 0.5));
        let ramp: Vec<f32> = (0..32).map(|i| i as f32).collect();
        let dot: f32 = want.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q5_1, &bytes, &ramp).unwrap(), dot);
        assert_eq!(quantize_row(DType::Q5_1, &want).unwrap(), bytes);
    }

    #[test]
    fn constant_and_zero_blocks() {
        for c in [0.0, 2.5] {
            let b = BlockQ5_1::quantize(&[c; 32]);
            let mut out = [f32::NAN; 32];
            b.dequantize(&mut out);
            assert_eq!(out, [c; 32]);
        }
        let b = BlockQ5_0::quantize(&[0.0; 32]);
        let mut out = [f32::NAN; 32];
        b.dequantize(&mut out);
        assert_eq!(out, [0.0; 32]);
        assert_eq!(b.dot(&[1.0; 32]), 0.0);
    }
}
