//! q4_K: 256 values per block as 4-bit codes in 8 sub-blocks of 32, each
//! sub-block with a 6-bit scale and a 6-bit minimum, all of them in units
//! of the block's `f16` super-scale and super-minimum.

use super::{as_block, as_block_mut, inverse, sum_lanes, QuantBlock};
use crate::DType;
use half::f16;

/// A q4_K block (ggml's `block_q4_K`, 144 bytes).
///
/// Value `32s + l` of sub-block `s` is `d * sc(s) * code - dmin * mn(s)`.
/// Codes are packed per pair of sub-blocks: `qs[32g + l]` holds value `l` of
/// sub-block `2g` in its low nibble and of sub-block `2g + 1` in its high one.
/// `scales` packs the eight 6-bit scales and mins as ggml does: bytes 0..4
/// hold scales 0..4 and bytes 4..8 mins 0..4 in their low 6 bits; scales and
/// mins 4..8 keep their low 4 bits in bytes 8..12 (scale low, min high) and
/// their top 2 bits in the top bits of bytes 0..4 (scales) and 4..8 (mins).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4K {
    /// Super-scale.
    pub d: f16,
    /// Super-minimum.
    pub dmin: f16,
    /// Packed 6-bit scales and minimums.
    pub scales: [u8; 12],
    /// Codes, two sub-blocks per 32 bytes.
    pub qs: [u8; 128],
}

const _: () = assert!(size_of::<BlockQ4K>() == DType::Q4K.block_bytes());

/// Scale and minimum (0..63) of sub-block `s` (ggml's `get_scale_min_k4`).
pub(crate) fn scale_min(scales: &[u8; 12], s: usize) -> (u8, u8) {
    if s < 4 {
        (scales[s] & 63, scales[s + 4] & 63)
    } else {
        (
            (scales[s + 4] & 0xF) | ((scales[s - 4] >> 6) << 4),
            (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4),
        )
    }
}

/// The inverse of [`scale_min`] for all eight sub-blocks.
pub(crate) fn pack_scales(sc: &[u8; 8], mn: &[u8; 8]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for s in 0..4 {
        out[s] = sc[s] | ((sc[s + 4] >> 4) << 6);
        out[s + 4] = mn[s] | ((mn[s + 4] >> 4) << 6);
        out[s + 8] = (sc[s + 4] & 0xF) | ((mn[s + 4] & 0xF) << 4);
    }
    out
}

/// Step and offset of sub-block `s` of a K-quant block with super-scale `d`,
/// super-minimum `dmin` and packed `scales`: its values are
/// `step * code - offset`.
#[inline(always)]
pub(crate) fn step_offset(d: f16, dmin: f16, scales: &[u8; 12], s: usize) -> (f32, f32) {
    let (sc, mn) = scale_min(scales, s);
    (d.to_f32() * sc as f32, dmin.to_f32() * mn as f32)
}

/// The super-scale, super-minimum and packed scales of a K-quant block
/// whose sub-blocks of 32 use codes `0..=max_code`: per sub-block, the codes
/// span [min(lowest, 0), highest], and the sub-blocks' steps and offsets
/// are quantized to 6 bits of the largest of each. Simpler than ggml's
/// iterative search, and within test-quantize-fns' error bound.
pub(crate) fn quantize_scales(v: &[f32; 256], max_code: f32) -> (f16, f16, [u8; 12]) {
    let (mut step, mut offset) = ([0.0f32; 8], [0.0f32; 8]);
    for (s, chunk) in v.chunks_exact(32).enumerate() {
        let lo = chunk.iter().copied().fold(0.0f32, f32::min);
        let hi = chunk.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        step[s] = (hi - lo) / max_code;
        offset[s] = -lo;
    }
    let d = f16::from_f32(step.iter().copied().fold(0.0, f32::max) / 63.0);
    let dmin = f16::from_f32(offset.iter().copied().fold(0.0, f32::max) / 63.0);
    let six_bits = |x: f32, unit: f16| (x * inverse(unit.to_f32())).round().clamp(0.0, 63.0) as u8;
    let sc = step.map(|x| six_bits(x, d));
    let mn = offset.map(|x| six_bits(x, dmin));
    (d, dmin, pack_scales(&sc, &mn))
}

/// Codes (`0..=max_code`) of a block's values against the steps and
/// offsets that decoding will use, in value order.
pub(crate) fn quantize_codes(
    v: &[f32; 256],
    max_code: f32,
    d: f16,
    dmin: f16,
    scales: &[u8; 12],
) -> [u8; 256] {
    let mut codes = [0u8; 256];
    for (s, (chunk, out)) in v
        .chunks_exact(32)
        .zip(codes.chunks_exact_mut(32))
        .enumerate()
    {
        let (step, offset) = step_offset(d, dmin, scales, s);
        let inv = inverse(step);
        for (&x, q) in chunk.iter().zip(out) {
            *q = ((x + offset) * inv).round().clamp(0.0, max_code) as u8;
        }
    }
    codes
}

/// What the K-quant blocks with minimums or signed codes share: 256
/// values in sub-blocks of `LEN` (32 for q4_K and q5_K, 16 for q2_K and
/// q3_K), each `step * code - offset`.
pub(crate) trait SubBlocks<const LEN: usize> {
    /// Code of value `l` of sub-block `s`.
    fn code(&self, s: usize, l: usize) -> f32;
    /// Step and offset of sub-block `s`.
    fn step_offset(&self, s: usize) -> (f32, f32);

    fn dequantize_sub_blocks(&self, out: &mut [f32]) {
        let out: &mut [f32; 256] = as_block_mut(out);
        for (s, y) in out.chunks_exact_mut(LEN).enumerate() {
            let (step, offset) = self.step_offset(s);
            for (l, y) in y.iter_mut().enumerate() {
                *y = step * self.code(s, l) - offset;
            }
        }
    }

    /// Σ over sub-blocks of step Σ code x - offset Σ x.
    fn dot_sub_blocks(&self, x: &[f32]) -> f32 {
        let x: &[f32; 256] = as_block(x);
        let mut sum = 0.0;
        for (s, xs) in x.chunks_exact(LEN).enumerate() {
            let (step, offset) = self.step_offset(s);
            let qx = sum_lanes::<LEN>(|l| self.code(s, l) * xs[l]);
            let sx = sum_lanes::<LEN>(|l| xs[l]);
            sum += step * qx - offset * sx;
        }
        sum
    }
}

impl SubBlocks<32> for BlockQ4K {
    #[inline(always)]
    fn code(&self, s: usize, l: usize) -> f32 {
        let b = self.qs[32 * (s / 2) + l];
        ((b >> (4 * (s % 2))) & 0xF) as f32
    }

    #[inline(always)]
    fn step_offset(&self, s: usize) -> (f32, f32) {
        step_offset(self.d, self.dmin, &self.scales, s)
    }
}

impl QuantBlock for BlockQ4K {
    const DTYPE: DType = DType::Q4K;

    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_sub_blocks(out)
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 256] = as_block(values);
        let (d, dmin, scales) = quantize_scales(v, 15.0);
        let codes = quantize_codes(v, 15.0, d, dmin, &scales);
        let mut qs = [0u8; 128];
        for (p, &q) in codes.iter().enumerate() {
            let s = p / 32;
            qs[32 * (s / 2) + p % 32] |= q << (4 * (s % 2));
        }
        BlockQ4K {
            d,
            dmin,
            scales,
            qs,
        }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        self.dot_sub_blocks(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row};

    #[test]
    fn scales_pack_and_unpack() {
        let sc = [0, 63, 17, 32, 63, 5, 48, 33];
        let mn = [63, 1, 0, 20, 47, 16, 31, 60];
        let packed = pack_scales(&sc, &mn);
        for s in 0..8 {
            assert_eq!(scale_min(&packed, s), (sc[s], mn[s]), "sub-block {s}");
        }
    }

    /// d = 0.5, dmin = 0.25; sub-block 0: scale 2, min 4; sub-block 5:
    /// scale 33 (top bits in byte 1), min 18 (top bits in byte 5); codes
    /// zero except three.
    fn hand_block() -> Vec<u8> {
        let mut b = vec![0u8; 144];
        b[0..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b[2..4].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        let scales = &mut b[4..16];
        scales[0] = 2; // scale 0
        scales[4] = 4; // min 0
        scales[1] = 0b10 << 6; // scale 5 = 0b10_0001: top bits
        scales[5] = 0b01 << 6; // min 5 = 0b01_0010: top bits
        scales[9] = 0x21; // scale 5 low bits 1, min 5 low bits 2
        b[16] = 0x07; // qs[0]: sub-block 0 value 0 code 7, sub-block 1 code 0
        b[16 + 31] = 0x0F; // sub-block 0 value 31 code 15
        b[16 + 64 + 3] = 0xA0; // qs[67]: sub-block 5 value 3 code 10
        b
    }

    #[test]
    fn hand_worked_block() {
        let mut out = [f32::NAN; 256];
        dequantize_row(DType::Q4K, &hand_block(), &mut out).unwrap();
        let mut want = [0.0f32; 256];
        want[..32].fill(-1.0); // 0.25 * 4
        want[0] = 0.5 * 2.0 * 7.0 - 1.0;
        want[31] = 0.5 * 2.0 * 15.0 - 1.0;
        want[160..192].fill(-4.5); // 0.25 * 18
        want[163] = 0.5 * 33.0 * 10.0 - 4.5;
        assert_eq!(out, want);
        assert_eq!((out[0], out[31], out[163]), (6.0, 14.0, 160.5));
        let ramp: Vec<f32> = (0..256).map(|i| (i % 7) as f32).collect();
        let dot: f32 = want.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q4K, &hand_block(), &ramp).unwrap(), dot);
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // Every sub-block spans codes 0..=15 with a step and offset that are
        // whole multiples of d and dmin, the largest being 63 of them.
        let sc = [63, 10, 20, 30, 40, 50, 60, 5];
        let mn = [0, 63, 7, 14, 21, 28, 35, 42];
        let d = f16::from_f32(1.0 / 64.0);
        let dmin = f16::from_f32(1.0 / 32.0);
        let mut qs = [0u8; 128];
        for (i, q) in qs.iter_mut().enumerate() {
            *q = (i % 16) as u8 | (((i + 5) % 16) as u8) << 4;
        }
        let block = BlockQ4K {
            d,
            dmin,
            scales: pack_scales(&sc, &mn),
            qs,
        };
        let mut v = [0.0; 256];
        block.dequantize(&mut v);
        assert_eq!(BlockQ4K::quantize(&v), block);
    }

    #[test]
    fn zero_block() {
        let b = BlockQ4K::quantize(&[0.0; 256]);
        let mut out = [f32::NAN; 256];
        b.dequantize(&mut out);
        assert_eq!(out, [0.0; 256]);
        assert_eq!(b.dot(&[1.0; 256]), 0.0);
    }
}
