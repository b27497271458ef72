//! q2_K: 256 values per block as 2-bit codes in 16 sub-blocks of 16, each
//! sub-block with a 4-bit scale and a 4-bit minimum in units of the
//! block's `f16` super-scale and super-minimum.

use super::q4_k::SubBlocks;
use super::{as_block, nearest_int, QuantBlock};
use crate::DType;
use half::f16;

/// A q2_K block (ggml's `block_q2_K`, 84 bytes).
///
/// Value `p` of sub-block `s = p / 16` is `d * sc(s) * code - dmin * mn(s)`
/// with `sc(s)` the low and `mn(s)` the high nibble of `scales[s]`. The codes
/// are laid out as ggml does (see `low_bits`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ2K {
    /// Per-sub-block scale (low nibble) and minimum (high nibble).
    pub scales: [u8; 16],
    /// Codes, four per byte.
    pub qs: [u8; 64],
    /// Super-scale.
    pub d: f16,
    /// Super-minimum.
    pub dmin: f16,
}

const _: () = assert!(size_of::<BlockQ2K>() == DType::Q2K.block_bytes());

/// The 2-bit field of value `p` (0..256) in `qs`, the layout q2_K and q3_K
/// share: per half `h` of 128 values, byte `32h + l` holds values
/// `128h + l`, `+ 32`, `+ 64` and `+ 96` in bits 0-1, 2-3, 4-5 and 6-7.
#[inline(always)]
pub(crate) fn low_bits(qs: &[u8; 64], p: usize) -> u8 {
    (qs[32 * (p / 128) + p % 32] >> (2 * ((p / 32) % 4))) & 3
}

/// The inverse of [`low_bits`] for a whole block: the low two bits of each
/// value's code, in value order.
pub(crate) fn pack_low_bits(codes: &[u8; 256]) -> [u8; 64] {
    let mut qs = [0u8; 64];
    for (p, &c) in codes.iter().enumerate() {
        qs[32 * (p / 128) + p % 32] |= (c & 3) << (2 * ((p / 32) % 4));
    }
    qs
}

/// The stored codes (`code - lowest`, `lowest..=3`) of a q2_K or q3_K
/// block's values against the steps and offsets decoding will use
/// (`step_offset(sub-block)`); sub-blocks whose step is zero keep the codes
/// they have, as in ggml.
pub(crate) fn requantize(
    v: &[f32; 256],
    codes: &mut [u8; 256],
    lowest: i32,
    step_offset: impl Fn(usize) -> (f32, f32),
) {
    for (s, (x, c)) in v
        .chunks_exact(16)
        .zip(codes.chunks_exact_mut(16))
        .enumerate()
    {
        let (step, offset) = step_offset(s);
        if step == 0.0 {
            continue;
        }
        for (&x, c) in x.iter().zip(c) {
            *c = (nearest_int((x + offset) / step).clamp(lowest, 3) - lowest) as u8;
        }
    }
}

/// ggml's `make_qkx2_quants` as q2_K's reference quantizer calls it: codes
/// 0..=3 for one sub-block of 16, with a step and an offset (values are
/// about `step * code - offset`, offset >= 0) that minimize the error
/// weighted by |x| (absolute, not squared): the range split in three, then
/// 16 candidate steps around it, each refitted by weighted least squares.
fn fit_sub_block(x: &[f32; 16]) -> (f32, f32, [u8; 16]) {
    const NMAX: f32 = 3.0;
    let w = x.map(f32::abs);
    let sum_w: f32 = w.iter().sum();
    let sum_x: f32 = w.iter().zip(x).map(|(w, x)| w * x).sum();
    let mut min = x.iter().fold(x[0], |m, &v| if v < m { v } else { m });
    let max = x.iter().fold(x[0], |m, &v| if v > m { v } else { m });
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        return (0.0, -min, [0; 16]);
    }
    let codes_at = |iscale: f32| x.map(|v| nearest_int(iscale * (v - min)).clamp(0, 3) as u8);
    let error = |scale: f32, min: f32, codes: &[u8; 16]| -> f32 {
        let mut e = 0.0;
        for ((&x, &w), &c) in x.iter().zip(&w).zip(codes) {
            e += w * (scale * f32::from(c) + min - x).abs();
        }
        e
    };
    let iscale = NMAX / (max - min);
    let (mut scale, mut best_min) = (1.0 / iscale, min);
    let mut codes = codes_at(iscale);
    let mut best = error(scale, min, &codes);
    for step in 0..=15u8 {
        let candidate = codes_at((-0.5 + 0.1 * f32::from(step) + NMAX) / (max - min));
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((&x, &w), &c) in x.iter().zip(&w).zip(&candidate) {
            let l = f32::from(c);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let e = error(this_scale, this_min, &candidate);
            if e < best {
                (codes, best, scale, best_min) = (candidate, e, this_scale, this_min);
            }
        }
    }
    (scale, -best_min, codes)
}

/// Each of `values` (>= 0) in units of `max / 15`, rounded, as 4 bits, and
/// that unit as an `f16` (zero when `max` is not positive).
fn four_bit_levels(values: &[f32; 16], max: f32) -> ([u8; 16], f16) {
    if max > 0.0 {
        let inv = 15.0 / max;
        let levels = values.map(|v| nearest_int(inv * v).clamp(0, 15) as u8);
        (levels, f16::from_f32(max / 15.0))
    } else {
        ([0; 16], f16::ZERO)
    }
}

impl SubBlocks<16> for BlockQ2K {
    #[inline(always)]
    fn code(&self, s: usize, l: usize) -> f32 {
        f32::from(low_bits(&self.qs, 16 * s + l))
    }

    #[inline(always)]
    fn step_offset(&self, s: usize) -> (f32, f32) {
        let b = self.scales[s];
        (
            self.d.to_f32() * f32::from(b & 0xF),
            self.dmin.to_f32() * f32::from(b >> 4),
        )
    }
}

impl QuantBlock for BlockQ2K {
    const DTYPE: DType = DType::Q2K;

    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_sub_blocks(out)
    }

    /// ggml's `quantize_row_q2_K_ref`: per sub-block the fit above, the
    /// steps and offsets as 4-bit multiples of the largest of each, then
    /// every code again against the steps and offsets decoding will use.
    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 256] = as_block(values);
        let mut codes = [0u8; 256];
        let (mut steps, mut offsets) = ([0.0f32; 16], [0.0f32; 16]);
        for (s, (x, c)) in v
            .chunks_exact(16)
            .zip(codes.chunks_exact_mut(16))
            .enumerate()
        {
            let (step, offset, fitted) = fit_sub_block(as_block(x));
            (steps[s], offsets[s]) = (step, offset);
            c.copy_from_slice(&fitted);
        }
        let largest = |v: &[f32; 16]| v.iter().fold(0.0f32, |m, &x| if x > m { x } else { m });
        let (sc, d) = four_bit_levels(&steps, largest(&steps));
        let (mn, dmin) = four_bit_levels(&offsets, largest(&offsets));
        let mut block = BlockQ2K {
            scales: std::array::from_fn(|s| sc[s] | (mn[s] << 4)),
            qs: [0; 64],
            d,
            dmin,
        };
        requantize(v, &mut codes, 0, |s| block.step_offset(s));
        block.qs = pack_low_bits(&codes);
        block
    }

    fn dot(&self, x: &[f32]) -> f32 {
        self.dot_sub_blocks(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row};

    /// d = 0.5, dmin = 0.25; sub-block 0: scale 2, min 4; sub-block 4:
    /// scale 10, min 1; sub-block 13: scale 15, min 3; codes zero except
    /// three.
    fn hand_block() -> Vec<u8> {
        let mut b = vec![0u8; 84];
        b[0] = 0x42;
        b[4] = 0x1A;
        b[13] = 0x3F;
        let qs = 16;
        b[qs] = 0b00_10_00_11; // value 0: code 3 (bits 0-1); value 64: code 2 (bits 4-5)
        b[qs + 32 + 25] = 0b01 << 4; // value 128 + 64 + 25 = 217: code 1
        b[80..82].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b[82..84].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        b
    }

    #[test]
    fn hand_worked_block() {
        let mut out = [f32::NAN; 256];
        dequantize_row(DType::Q2K, &hand_block(), &mut out).unwrap();
        let mut want = [0.0f32; 256];
        want[..16].fill(-1.0); // 0.25 * 4
        want[0] = 0.5 * 2.0 * 3.0 - 1.0;
        want[64..80].fill(-0.25);
        want[64] = 0.5 * 10.0 * 2.0 - 0.25;
        want[208..224].fill(-0.75);
        want[217] = 0.5 * 15.0 - 0.75;
        assert_eq!(out, want);
        assert_eq!((out[0], out[64], out[217]), (2.0, 9.75, 6.75));
        let ramp: Vec<f32> = (0..256).map(|i| (i % 7) as f32).collect();
        let dot: f32 = want.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q2K, &hand_block(), &ramp).unwrap(), dot);
    }

    #[test]
    fn low_bits_pack_and_unpack() {
        let codes: [u8; 256] = std::array::from_fn(|p| ((p * 7 + p / 5) % 4) as u8);
        let qs = pack_low_bits(&codes);
        for (p, &c) in codes.iter().enumerate() {
            assert_eq!(low_bits(&qs, p), c, "value {p}");
        }
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // Every sub-block spans codes 0..=3 with a step and offset that are
        // whole multiples of d and dmin, the largest being 15 of them.
        let sc = [15, 1, 4, 7, 9, 12, 3, 15, 8, 2, 11, 5, 6, 10, 13, 14];
        let mn = [0, 15, 3, 7, 1, 9, 12, 5, 0, 4, 2, 8, 6, 10, 11, 13];
        let mut codes = [0u8; 256];
        for (p, c) in codes.iter_mut().enumerate() {
            *c = ((p * 5 + p / 16) % 4) as u8;
        }
        let block = BlockQ2K {
            scales: std::array::from_fn(|s| sc[s] | (mn[s] << 4)),
            qs: pack_low_bits(&codes),
            d: f16::from_f32(1.0 / 16.0),
            dmin: f16::from_f32(1.0 / 32.0),
        };
        let mut v = [0.0; 256];
        block.dequantize(&mut v);
        assert_eq!(BlockQ2K::quantize(&v), block);
    }

    #[test]
    fn zero_and_constant_blocks() {
        let b = BlockQ2K::quantize(&[0.0; 256]);
        let mut out = [f32::NAN; 256];
        b.dequantize(&mut out);
        assert_eq!(out, [0.0; 256]);
        assert_eq!(b.dot(&[1.0; 256]), 0.0);
        // All negative: every sub-block is its offset alone.
        BlockQ2K::quantize(&[-0.75; 256]).dequantize(&mut out);
        assert!(out.iter().all(|&v| (v + 0.75).abs() < 1e-3), "{out:?}");
    }
}
