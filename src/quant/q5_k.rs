//! q5_K: q4_K with a fifth bit per code: 256 values per block as 5-bit
//! codes in 8 sub-blocks of 32, scales and minimums packed as in q4_K.

use super::q4_k::{quantize_codes, quantize_scales, step_offset, SubBlocks};
use super::{as_block, QuantBlock};
use crate::DType;
use half::f16;

/// A q5_K block (ggml's `block_q5_K`, 176 bytes).
///
/// Value `32s + l` of sub-block `s` is `d * sc(s) * code - dmin * mn(s)`,
/// with the code's low 4 bits where q4_K keeps them (`qs[32(s / 2) + l]`,
/// low nibble for even `s`) and its fifth bit in bit `s` of `qh[l]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5K {
    /// Super-scale.
    pub d: f16,
    /// Super-minimum.
    pub dmin: f16,
    /// Packed 6-bit scales and minimums (see [`super::BlockQ4K`]).
    pub scales: [u8; 12],
    /// Fifth bits: bit `s` of `qh[l]` for value `l` of sub-block `s`.
    pub qh: [u8; 32],
    /// Low 4 bits of the codes, two sub-blocks per 32 bytes.
    pub qs: [u8; 128],
}

const _: () = assert!(size_of::<BlockQ5K>() == DType::Q5K.block_bytes());

impl SubBlocks<32> for BlockQ5K {
    #[inline(always)]
    fn code(&self, s: usize, l: usize) -> f32 {
        let lo = (self.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
        let hi = (self.qh[l] >> s) & 1;
        (lo | (hi << 4)) as f32
    }

    #[inline(always)]
    fn step_offset(&self, s: usize) -> (f32, f32) {
        step_offset(self.d, self.dmin, &self.scales, s)
    }
}

impl QuantBlock for BlockQ5K {
    const DTYPE: DType = DType::Q5K;

    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_sub_blocks(out)
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 256] = as_block(values);
        let (d, dmin, scales) = quantize_scales(v, 31.0);
        let codes = quantize_codes(v, 31.0, d, dmin, &scales);
        let (mut qs, mut qh) = ([0u8; 128], [0u8; 32]);
        for (p, &q) in codes.iter().enumerate() {
            let (s, l) = (p / 32, p % 32);
            qs[32 * (s / 2) + l] |= (q & 0xF) << (4 * (s % 2));
            qh[l] |= (q >> 4) << s;
        }
        BlockQ5K {
            d,
            dmin,
            scales,
            qh,
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
    use crate::quant::q4_k::pack_scales;
    use crate::quant::{dequantize_row, dot_row};

    /// d = 0.5, dmin = 0.25; sub-block 0: scale 2, min 4; sub-block 7:
    /// scale 40, min 8; codes zero except three, two with fifth bits.
    fn hand_block() -> Vec<u8> {
        let mut sc = [0u8; 8];
        let mut mn = [0u8; 8];
        (sc[0], mn[0], sc[7], mn[7]) = (2, 4, 40, 8);
        let mut b = vec![0u8; 176];
        b[0..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b[2..4].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        b[4..16].copy_from_slice(&pack_scales(&sc, &mn));
        let (qh, qs) = (16, 48);
        b[qs] = 0x07; // sub-block 0 value 0: low bits 7
        b[qh] = 0x01; // ... and fifth bit: code 23
        b[qs + 31] = 0x0F; // sub-block 0 value 31: code 15
        b[qs + 96 + 2] = 0x30; // sub-block 7 value 2: low bits 3
        b[qh + 2] = 0x80; // ... and fifth bit: code 19
        b
    }

    #[test]
    fn hand_worked_block() {
        let mut out = [f32::NAN; 256];
        dequantize_row(DType::Q5K, &hand_block(), &mut out).unwrap();
        let mut want = [0.0f32; 256];
        want[..32].fill(-1.0); // 0.25 * 4
        want[0] = 0.5 * 2.0 * 23.0 - 1.0;
        want[31] = 0.5 * 2.0 * 15.0 - 1.0;
        want[224..].fill(-2.0); // 0.25 * 8
        want[226] = 0.5 * 40.0 * 19.0 - 2.0;
        assert_eq!(out, want);
        assert_eq!((out[0], out[31], out[226]), (22.0, 14.0, 378.0));
        let ramp: Vec<f32> = (0..256).map(|i| (i % 5) as f32).collect();
        let dot: f32 = want.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q5K, &hand_block(), &ramp).unwrap(), dot);
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // Every sub-block spans codes 0..=31; steps and offsets are whole
        // multiples of d and dmin, the largest being 63 of them.
        let sc = [63, 10, 20, 30, 40, 50, 60, 5];
        let mn = [0, 63, 7, 14, 21, 28, 35, 42];
        let (d, dmin) = (f16::from_f32(1.0 / 64.0), f16::from_f32(1.0 / 32.0));
        let mut block = BlockQ5K {
            d,
            dmin,
            scales: pack_scales(&sc, &mn),
            qh: [0; 32],
            qs: [0; 128],
        };
        for p in 0..256 {
            let (s, l) = (p / 32, p % 32);
            let q = ((l + 3 * s) % 32) as u8;
            block.qs[32 * (s / 2) + l] |= (q & 0xF) << (4 * (s % 2));
            block.qh[l] |= (q >> 4) << s;
        }
        let mut v = [0.0; 256];
        block.dequantize(&mut v);
        assert_eq!(BlockQ5K::quantize(&v), block);
    }
}
