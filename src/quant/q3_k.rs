//! q3_K: 256 values per block as signed 3-bit codes (-4..=3) in 16
//! sub-blocks of 16, each sub-block with a signed 6-bit scale in units of
//! the block's `f16` super-scale.

use super::q2_k::{low_bits, pack_low_bits, requantize};
use super::q4_k::SubBlocks;
use super::{as_block, max_magnitude, nearest_int, QuantBlock};
use crate::DType;
use half::f16;

/// A q3_K block (ggml's `block_q3_K`, 110 bytes).
///
/// Value `p` of sub-block `s = p / 16` is `d * (sc(s) - 32) * code` with
/// `code = low - 4 * (1 - high)`: `low` the 2-bit field of `qs` in q2_K's
/// layout (`quant::q2_k`), `high` bit `p / 32` of `hmask[p % 32]` (a set
/// bit means no offset). `sc(s)` is 6 bits (see `scale`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ3K {
    /// High bits of the codes: bit `p / 32` of byte `p % 32`.
    pub hmask: [u8; 32],
    /// Low 2 bits of the codes, four per byte.
    pub qs: [u8; 64],
    /// Packed 6-bit scales, stored plus 32.
    pub scales: [u8; 12],
    /// Super-scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockQ3K>() == DType::Q3K.block_bytes());

/// The stored scale (0..63, the scale plus 32) of sub-block `s`: its low 4
/// bits are nibble `s / 8` of byte `s % 8`, its top 2 bits bits
/// `2 (s / 4)`.. of byte `8 + s % 4`.
#[inline(always)]
pub(crate) fn scale(scales: &[u8; 12], s: usize) -> u8 {
    let lo = (scales[s % 8] >> (4 * (s / 8))) & 0xF;
    let hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    lo | (hi << 4)
}

/// All 16 stored scales, as [`scale`] gives them one by one, unpacked a
/// word (four scales) at a time as ggml does.
pub(crate) fn scales(packed: &[u8; 12]) -> [u8; 16] {
    let word = |i: usize| u32::from_le_bytes([0, 1, 2, 3].map(|b| packed[4 * i + b]));
    let (a, b, top) = (word(0), word(1), word(2));
    let (low4, low2) = (0x0f0f_0f0f, 0x0303_0303);
    let words = [
        (a & low4) | ((top & low2) << 4),
        (b & low4) | (((top >> 2) & low2) << 4),
        ((a >> 4) & low4) | (((top >> 4) & low2) << 4),
        ((b >> 4) & low4) | (((top >> 6) & low2) << 4),
    ];
    let mut out = [0u8; 16];
    for (o, w) in out.chunks_exact_mut(4).zip(words) {
        o.copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// The inverse of [`scale`] for all 16 sub-blocks.
pub(crate) fn pack_scales(sc: &[u8; 16]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for (s, &v) in sc.iter().enumerate() {
        out[s % 8] |= (v & 0xF) << (4 * (s / 8));
        out[8 + s % 4] |= ((v >> 4) & 3) << (2 * (s / 4));
    }
    out
}

/// The signed code (-4..=3) of value `p`.
#[inline(always)]
pub(crate) fn code(hmask: &[u8; 32], qs: &[u8; 64], p: usize) -> i8 {
    let high = (hmask[p % 32] >> (p / 32)) & 1;
    (low_bits(qs, p) | (high << 2)) as i8 - 4
}

/// ggml's `make_q3_quants` with its weighted search, as q3_K's reference
/// quantizer calls it: codes -4..=3 (stored plus 4) for one sub-block of
/// 16 and a scale (values are about `scale * code`). The value of largest
/// magnitude first maps to -4; then single codes move while that raises
/// the x²-weighted fit (Σ w x l)² / Σ w l², at most five passes.
fn fit_sub_block(x: &[f32; 16]) -> (f32, [u8; 16]) {
    const NMAX: i32 = 4;
    let max = max_magnitude(x);
    if max.abs() < 1e-15 {
        return (0.0, [0; 16]);
    }
    let iscale = -(NMAX as f32) / max;
    let mut l = x.map(|v| nearest_int(iscale * v).clamp(-NMAX, NMAX - 1));
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (&x, &l) in x.iter().zip(&l) {
        let w = x * x;
        sumlx += w * x * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (&x, l) in x.iter().zip(&mut l) {
            let w = x * x;
            let mut slx = sumlx - w * x * *l as f32;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * *l as f32 * *l as f32;
                let new = nearest_int(x * sl2 / slx).clamp(-NMAX, NMAX - 1);
                if new != *l {
                    slx += w * x * new as f32;
                    sl2 += w * new as f32 * new as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        (*l, sumlx, suml2) = (new, slx, sl2);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let scale = if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    (scale, l.map(|l| (l + NMAX) as u8))
}

impl SubBlocks<16> for BlockQ3K {
    #[inline(always)]
    fn code(&self, s: usize, l: usize) -> f32 {
        f32::from(code(&self.hmask, &self.qs, 16 * s + l))
    }

    /// No offset: the codes are signed.
    #[inline(always)]
    fn step_offset(&self, s: usize) -> (f32, f32) {
        let sc = i16::from(scale(&self.scales, s)) - 32;
        (self.d.to_f32() * f32::from(sc), 0.0)
    }
}

impl QuantBlock for BlockQ3K {
    const DTYPE: DType = DType::Q3K;

    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_sub_blocks(out)
    }

    /// ggml's `quantize_row_q3_K_ref`: per sub-block the fit above, the
    /// scales as 6-bit multiples of the largest in magnitude (which maps
    /// to -32), then every code again against the steps decoding will use.
    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 256] = as_block(values);
        let mut codes = [0u8; 256];
        let mut fitted = [0.0f32; 16];
        for (s, (x, c)) in v
            .chunks_exact(16)
            .zip(codes.chunks_exact_mut(16))
            .enumerate()
        {
            let (scale, sub) = fit_sub_block(as_block(x));
            fitted[s] = scale;
            c.copy_from_slice(&sub);
        }
        let max_scale = max_magnitude(&fitted);
        let mut block = BlockQ3K {
            hmask: [0; 32],
            qs: [0; 64],
            scales: [0; 12],
            d: f16::ZERO,
        };
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            let sc = fitted.map(|s| (nearest_int(iscale * s).clamp(-32, 31) + 32) as u8);
            block.scales = pack_scales(&sc);
            block.d = f16::from_f32(1.0 / iscale);
        }
        requantize(v, &mut codes, -4, |s| block.step_offset(s));
        for (p, &c) in codes.iter().enumerate() {
            block.hmask[p % 32] |= (c >> 2) << (p / 32);
        }
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

    /// d = 0.5; sub-block 0: scale 2 (stored 34), sub-block 9: -31
    /// (stored 1), sub-block 15: 31 (stored 63), the others -32 (stored 0);
    /// every high bit set (codes 0) except two, three codes non-zero.
    fn hand_block() -> Vec<u8> {
        let mut b = vec![0u8; 110];
        let (qs, sc) = (32, 96);
        b[..32].fill(0xFF);
        b[0] = 0xFE; // value 0: high bit clear
        b[qs] = 0b11; // ... low bits 3: code 3 - 4 = -1
        b[22] = !(1 << 4); // value 4 * 32 + 22 = 150: high bit clear
        b[qs + 32 + 22] = 0b10; // ... low bits 2: code -2
        b[qs + 63] = 0b11 << 6; // value 255 (high bit set): code 3
        b[sc] = 2; // sub-block 0: low bits 2
        b[sc + 8] = 2; // ... top bits 2: 34
        b[sc + 1] = 1 << 4; // sub-block 9: low bits 1 (top bits 0)
        b[sc + 7] = 0xF << 4; // sub-block 15: low bits 15
        b[sc + 11] = 3 << 6; // ... top bits 3: 63
        b[108..].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b
    }

    #[test]
    fn hand_worked_block() {
        let mut out = [f32::NAN; 256];
        dequantize_row(DType::Q3K, &hand_block(), &mut out).unwrap();
        let mut want = [0.0f32; 256];
        want[0] = -(0.5 * 2.0); // scale 2, code -1
        want[150] = 0.5 * -31.0 * -2.0;
        want[255] = 0.5 * 31.0 * 3.0;
        assert_eq!(out, want);
        assert_eq!((out[0], out[150], out[255]), (-1.0, 31.0, 46.5));
        let ramp: Vec<f32> = (0..256).map(|i| (i % 7) as f32).collect();
        let dot: f32 = want.iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q3K, &hand_block(), &ramp).unwrap(), dot);
    }

    #[test]
    fn scales_pack_and_unpack() {
        let sc = [0, 63, 17, 32, 63, 5, 48, 33, 1, 2, 40, 31, 16, 15, 62, 7];
        let packed = pack_scales(&sc);
        for (s, &want) in sc.iter().enumerate() {
            assert_eq!(scale(&packed, s), want, "sub-block {s}");
        }
        assert_eq!(scales(&packed), sc);
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // d = 1/64; scale -32 (stored 0) is the largest in magnitude, and
        // every sub-block with a non-zero scale holds code -4 (its value of
        // largest magnitude), so the quantizer finds them all.
        let sc: [u8; 16] = [0, 63, 40, 29, 32, 49, 4, 33, 0, 10, 60, 31, 35, 20, 1, 45];
        let mut stored = [0u8; 256];
        for (p, c) in stored.iter_mut().enumerate() {
            *c = if p % 16 == 5 {
                0
            } else {
                ((p * 3 + p / 16) % 8) as u8
            };
            if sc[p / 16] == 32 {
                *c = 0;
            }
        }
        let mut block = BlockQ3K {
            hmask: [0; 32],
            qs: pack_low_bits(&stored),
            scales: pack_scales(&sc),
            d: f16::from_f32(1.0 / 64.0),
        };
        for (p, &c) in stored.iter().enumerate() {
            block.hmask[p % 32] |= (c >> 2) << (p / 32);
        }
        let mut v = [0.0; 256];
        block.dequantize(&mut v);
        assert_eq!(BlockQ3K::quantize(&v), block);
    }

    #[test]
    fn zero_block() {
        let b = BlockQ3K::quantize(&[0.0; 256]);
        assert_eq!(b.d.to_f32(), 0.0);
        let mut out = [f32::NAN; 256];
        b.dequantize(&mut out);
        assert!(out.iter().all(|&v| v == 0.0));
        assert_eq!(b.dot(&[1.0; 256]), 0.0);
    }
}
