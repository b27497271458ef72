//! iq4_nl and iq4_xs: 4-bit codes that index a fixed table of 16 values
//! spaced more closely near zero (ggml's `kvalues_iq4nl`), where q4_0's
//! codes are evenly spaced. iq4_nl keeps one `f16` scale per 32 values;
//! iq4_xs groups eight such 32-value sub-blocks under one `f16` scale, each
//! with a 6-bit signed sub-scale.
//!
//! Both lay out a 32-value group's codes as q4_0 does: value `j` in the low
//! nibble of byte `j`, value `j + 16` in its high nibble.

use super::{as_block, as_block_mut, max_magnitude, nearest_int, QuantBlock};
use crate::DType;
use half::f16;

/// The value each 4-bit code stands for, in units of the scale (ggml's
/// `kvalues_iq4nl`). Ascending, so the nearest one can be found by bisection.
pub const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// An iq4_nl block (ggml's `block_iq4_nl`, 18 bytes): value `j` (0..16) is
/// `d * IQ4_VALUES[qs[j] & 0xF]`, value `j + 16` is
/// `d * IQ4_VALUES[qs[j] >> 4]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ4NL {
    /// Scale.
    pub d: f16,
    /// Codes of values 0..16 in the low nibbles, of values 16..32 in the high.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockIQ4NL>() == DType::IQ4NL.block_bytes());

/// An iq4_xs block (ggml's `block_iq4_xs`, 136 bytes): eight 32-value
/// sub-blocks laid out as iq4_nl's, sub-block `s` with the step
/// `d * (scale(s) - 32)`, where the 6-bit `scale(s)` keeps its low four bits
/// in nibble `s % 2` of `scales_l[s / 2]` and its top two in bits `2s, 2s + 1`
/// of `scales_h`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ4XS {
    /// Super-scale.
    pub d: f16,
    /// Top two bits of each sub-block's scale.
    pub scales_h: u16,
    /// Low four bits of each sub-block's scale, two per byte.
    pub scales_l: [u8; 4],
    /// Codes, 16 bytes per sub-block.
    pub qs: [u8; 128],
}

const _: () = assert!(size_of::<BlockIQ4XS>() == DType::IQ4XS.block_bytes());

impl BlockIQ4XS {
    /// The 6-bit scale (0..63) of sub-block `s`.
    #[inline(always)]
    pub fn scale(&self, s: usize) -> i32 {
        let lo = (self.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
        let hi = (self.scales_h >> (2 * s)) & 3;
        i32::from(lo) | (i32::from(hi) << 4)
    }

    /// The step of sub-block `s`: its values are the step times a table value.
    #[inline(always)]
    fn step(&self, s: usize) -> f32 {
        self.d.to_f32() * (self.scale(s) - 32) as f32
    }
}

/// The table values of a group's 32 codes, scaled by `step`, into `out`.
fn decode_group(qs: &[u8], step: f32, out: &mut [f32; 32]) {
    let (lo, hi) = out.split_at_mut(16);
    for (j, (lo, hi)) in lo.iter_mut().zip(hi).enumerate() {
        *lo = step * f32::from(IQ4_VALUES[usize::from(qs[j] & 0xF)]);
        *hi = step * f32::from(IQ4_VALUES[usize::from(qs[j] >> 4)]);
    }
}

/// Σ table value * x over a group's 32 codes (unscaled).
fn group_dot(qs: &[u8], x: &[f32; 32]) -> f32 {
    let mut acc = [0.0f32; 8];
    for c in 0..2 {
        for (k, a) in acc.iter_mut().enumerate() {
            let j = 8 * c + k;
            *a += f32::from(IQ4_VALUES[usize::from(qs[j] & 0xF)]) * x[j]
                + f32::from(IQ4_VALUES[usize::from(qs[j] >> 4)]) * x[j + 16];
        }
    }
    acc.iter().sum()
}

/// The code whose table value is nearest `v` (ties to the lower one).
fn nearest_code(v: f32) -> u8 {
    let (mut lo, mut hi) = (0usize, IQ4_VALUES.len() - 1);
    if v <= f32::from(IQ4_VALUES[lo]) {
        return 0;
    }
    if v >= f32::from(IQ4_VALUES[hi]) {
        return hi as u8;
    }
    // Invariant: IQ4_VALUES[lo] < v < IQ4_VALUES[hi].
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if v < f32::from(IQ4_VALUES[mid]) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let below = v - f32::from(IQ4_VALUES[lo]);
    let above = f32::from(IQ4_VALUES[hi]) - v;
    if below <= above {
        lo as u8
    } else {
        hi as u8
    }
}

/// Codes of `x` against the inverse scale `id`, packed two per byte.
fn encode_group(x: &[f32; 32], id: f32) -> [u8; 16] {
    let mut qs = [0u8; 16];
    for (j, q) in qs.iter_mut().enumerate() {
        *q = nearest_code(x[j] * id) | (nearest_code(x[j + 16] * id) << 4);
    }
    qs
}

/// The scale of a 32-value group that best fits it, ggml's way: codes are
/// picked for a range of trial scales (the largest magnitude mapped near
/// each end of the table), and for each set of codes the least-squares
/// scale, weighting each value by its square, scores it. 0 for a group of
/// zeros (or of values too small to matter).
fn best_group_scale(x: &[f32; 32]) -> f32 {
    let max = max_magnitude(x);
    if max.abs() < 1e-15 {
        return 0.0;
    }
    // Σ w x t and Σ w t² for the codes against inverse scale `id`.
    let fit = |id: f32| {
        let (mut sum_xt, mut sum_tt) = (0.0f32, 0.0f32);
        for &v in x {
            let t = f32::from(IQ4_VALUES[usize::from(nearest_code(v * id))]);
            let w = v * v;
            sum_xt += w * v * t;
            sum_tt += w * t * t;
        }
        (sum_xt, sum_tt)
    };
    let first = f32::from(IQ4_VALUES[0]);
    let (sum_xt, sum_tt) = fit(-first / max);
    let mut d = if sum_tt > 0.0 { sum_xt / sum_tt } else { 0.0 };
    let mut best = d * sum_xt;
    for step in -7..=7 {
        let (sum_xt, sum_tt) = fit((step as f32 + first) / max);
        if sum_tt > 0.0 && sum_xt * sum_xt > best * sum_tt {
            d = sum_xt / sum_tt;
            best = d * sum_xt;
        }
    }
    d
}

/// `1 / d`, or 0 where `d` is 0.
fn inverse_or_zero(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

impl QuantBlock for BlockIQ4NL {
    const DTYPE: DType = DType::IQ4NL;

    fn dequantize(&self, out: &mut [f32]) {
        decode_group(&self.qs, self.d.to_f32(), as_block_mut(out));
    }

    fn quantize(values: &[f32]) -> Self {
        let x: &[f32; 32] = as_block(values);
        let d = f16::from_f32(best_group_scale(x));
        // Codes against the stored (rounded) scale, which decoding uses.
        BlockIQ4NL {
            d,
            qs: encode_group(x, inverse_or_zero(d.to_f32())),
        }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        group_dot(&self.qs, as_block(x)) * self.d.to_f32()
    }
}

impl QuantBlock for BlockIQ4XS {
    const DTYPE: DType = DType::IQ4XS;

    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 256] = as_block_mut(out);
        for (s, group) in out.chunks_exact_mut(32).enumerate() {
            decode_group(
                &self.qs[16 * s..16 * s + 16],
                self.step(s),
                as_block_mut(group),
            );
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let x: &[f32; 256] = as_block(values);
        let groups = || x.chunks_exact(32).map(as_block::<32>);
        let scales: Vec<f32> = groups().map(best_group_scale).collect();
        // The sub-scale of largest magnitude gets -32, the end with the
        // most range, as in ggml.
        let d = f16::from_f32(max_magnitude(&scales) / -32.0);
        let id = inverse_or_zero(d.to_f32());
        let mut block = BlockIQ4XS {
            d,
            scales_h: 0,
            scales_l: [0; 4],
            qs: [0; 128],
        };
        for (s, (x, scale)) in groups().zip(scales).enumerate() {
            let l = nearest_int(scale * id).clamp(-32, 31) + 32;
            block.scales_l[s / 2] |= ((l & 0xF) as u8) << (4 * (s % 2));
            block.scales_h |= ((l >> 4) as u16) << (2 * s);
            let step = block.step(s);
            block.qs[16 * s..16 * s + 16].copy_from_slice(&encode_group(x, inverse_or_zero(step)));
        }
        block
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 256] = as_block(x);
        x.chunks_exact(32)
            .enumerate()
            .map(|(s, x)| group_dot(&self.qs[16 * s..16 * s + 16], as_block(x)) * self.step(s))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row, quantize_row};

    #[test]
    fn nearest_code_bisects_the_table() {
        for (c, &t) in IQ4_VALUES.iter().enumerate() {
            assert_eq!(usize::from(nearest_code(f32::from(t))), c);
        }
        assert_eq!(nearest_code(-500.0), 0);
        assert_eq!(nearest_code(500.0), 15);
        assert_eq!(nearest_code(-4.5), 7); // -10 and 1: the tie goes down
        assert_eq!(nearest_code(-4.0), 8);
        assert_eq!(nearest_code(100.0), 14); // 89 is nearer than 113
    }

    /// iq4_nl with d = 0.5: every code once in the low nibbles, reversed in
    /// the high ones.
    #[test]
    fn hand_worked_iq4_nl_block() {
        let mut bytes = f16::from_f32(0.5).to_le_bytes().to_vec();
        bytes.extend((0u8..16).map(|j| j | ((15 - j) << 4)));
        let mut out = [0.0; 32];
        dequantize_row(DType::IQ4NL, &bytes, &mut out).unwrap();
        for j in 0..16 {
            assert_eq!(out[j], 0.5 * f32::from(IQ4_VALUES[j]));
            assert_eq!(out[j + 16], 0.5 * f32::from(IQ4_VALUES[15 - j]));
        }
        // Each code occurs twice: the sum is d * 2 * Σ table = Σ table.
        let sum: f32 = IQ4_VALUES.iter().map(|&v| f32::from(v)).sum();
        assert_eq!(dot_row(DType::IQ4NL, &bytes, &[1.0; 32]).unwrap(), sum);
        // Values that are the table times a representable scale come back.
        assert_eq!(quantize_row(DType::IQ4NL, &out).unwrap(), bytes);
    }

    /// iq4_xs: sub-block s has scale 32 + s - 4 (steps -4d..3d), all codes 8
    /// (table value 1) except one per sub-block.
    #[test]
    fn hand_worked_iq4_xs_block() {
        let mut b = BlockIQ4XS {
            d: f16::from_f32(0.25),
            scales_h: 0,
            scales_l: [0; 4],
            qs: [0x88; 128],
        };
        for s in 0..8 {
            let l = 28 + s as u16;
            b.scales_l[s / 2] |= ((l & 0xF) as u8) << (4 * (s % 2));
            b.scales_h |= (l >> 4) << (2 * s);
            b.qs[16 * s + s] = 0x80; // value s: code 0, table value -127
        }
        let mut out = [0.0; 256];
        b.dequantize(&mut out);
        for s in 0..8 {
            assert_eq!(b.scale(s), 28 + s as i32);
            let step = 0.25 * (s as f32 - 4.0);
            for j in 0..32 {
                let t = if j == s { -127.0 } else { 1.0 };
                assert_eq!(out[32 * s + j], step * t, "sub-block {s} value {j}");
            }
        }
        let ramp: Vec<f32> = (0..256).map(|i| (i % 7) as f32 - 3.0).collect();
        let want: f32 = out.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert!((b.dot(&ramp) - want).abs() < 1e-3);
    }

    #[test]
    fn zero_blocks() {
        let nl = BlockIQ4NL::quantize(&[0.0; 32]);
        assert_eq!(nl.d.to_f32(), 0.0);
        let xs = BlockIQ4XS::quantize(&[0.0; 256]);
        let mut out = [f32::NAN; 256];
        xs.dequantize(&mut out);
        assert_eq!(out, [0.0; 256]);
    }

    /// The fitted scale is at least as good as mapping the largest value
    /// to the table's end.
    #[test]
    fn quantizing_fits_better_than_the_plain_scale() {
        let x: [f32; 32] = std::array::from_fn(|i| ((i as f32) * 0.37).sin() * 3.0);
        let err = |d: f32| {
            let b = BlockIQ4NL {
                d: f16::from_f32(d),
                qs: encode_group(&x, inverse_or_zero(f16::from_f32(d).to_f32())),
            };
            let mut out = [0.0; 32];
            b.dequantize(&mut out);
            out.iter()
                .zip(&x)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f32>()
        };
        let fitted = BlockIQ4NL::quantize(&x).d.to_f32();
        assert!(err(fitted) <= err(max_magnitude(&x) / -127.0));
    }
}
