//! q6_K: 256 values per block as 6-bit codes in 16 sub-blocks of 16, each
//! sub-block with an `i8` scale, all scales sharing one `f16` super-scale.

use super::{as_block, as_block_mut, inverse, max_magnitude, sum_lanes, QuantBlock};
use crate::DType;
use half::f16;

/// A q6_K block (ggml's `block_q6_K`, 210 bytes).
///
/// Value `p` is `d * scales[p / 16] * code(p)` with `code` in -32..31, stored
/// as `code + 32`: its low 4 bits in `ql`, its high 2 bits in `qh`. The
/// interleaving is ggml's, per half `h` of 128 values: for `l` in 0..32,
/// `ql[64h + l]` holds values `l` (low nibble) and `l + 64` (high nibble),
/// `ql[64h + l + 32]` values `l + 32` and `l + 96`, and `qh[32h + l]` the high
/// bits of `l`, `l + 32`, `l + 64`, `l + 96` (bits 0-1, 2-3, 4-5, 6-7).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ6K {
    /// Low 4 bits of the codes.
    pub ql: [u8; 128],
    /// High 2 bits of the codes.
    pub qh: [u8; 64],
    /// Per-sub-block scales, in units of `d`.
    pub scales: [i8; 16],
    /// Super-scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockQ6K>() == DType::Q6K.block_bytes());

/// The four codes (-32..31) that share `ql[l]`, `ql[l + 32]` and `qh[l]` of one
/// half; they belong to values `l`, `l + 32`, `l + 64` and `l + 96` of it.
#[inline(always)]
pub(super) fn unpack(ql_a: u8, ql_b: u8, qh: u8) -> [i32; 4] {
    [
        (ql_a & 0xF) | ((qh & 3) << 4),
        (ql_b & 0xF) | (((qh >> 2) & 3) << 4),
        (ql_a >> 4) | (((qh >> 4) & 3) << 4),
        (ql_b >> 4) | (((qh >> 6) & 3) << 4),
    ]
    .map(|q| q as i32 - 32)
}

/// The inverse of [`unpack`] for a whole block: stored codes (0..63) in value
/// order to `ql` and `qh`.
fn pack(codes: &[u8; 256]) -> ([u8; 128], [u8; 64]) {
    let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
    for h in 0..2 {
        for l in 0..32 {
            let c = |t: usize| codes[128 * h + 32 * t + l];
            ql[64 * h + l] = (c(0) & 0xF) | ((c(2) & 0xF) << 4);
            ql[64 * h + l + 32] = (c(1) & 0xF) | ((c(3) & 0xF) << 4);
            qh[32 * h + l] =
                (c(0) >> 4) | ((c(1) >> 4) << 2) | ((c(2) >> 4) << 4) | ((c(3) >> 4) << 6);
        }
    }
    (ql, qh)
}

impl QuantBlock for BlockQ6K {
    const DTYPE: DType = DType::Q6K;

    /// ggml's loop order, kept so that kernels can be read against it.
    fn dequantize(&self, out: &mut [f32]) {
        let out: &mut [f32; 256] = as_block_mut(out);
        let d = self.d.to_f32();
        for h in 0..2 {
            let ql = &self.ql[64 * h..][..64];
            let qh = &self.qh[32 * h..][..32];
            let sc = &self.scales[8 * h..][..8];
            let y = &mut out[128 * h..][..128];
            for l in 0..32 {
                let is = l / 16;
                let q = unpack(ql[l], ql[l + 32], qh[l]);
                for (t, q) in q.into_iter().enumerate() {
                    y[l + 32 * t] = d * sc[is + 2 * t] as f32 * q as f32;
                }
            }
        }
    }

    fn quantize(values: &[f32]) -> Self {
        let v: &[f32; 256] = as_block(values);
        // Per sub-block, the scale that maps its largest magnitude to code -32.
        let mut sub = [0.0f32; 16];
        for (s, chunk) in sub.iter_mut().zip(v.chunks_exact(16)) {
            *s = max_magnitude(chunk) / -32.0;
        }
        // The same idea one level up: the largest-magnitude scale maps to -128.
        let d = f16::from_f32(max_magnitude(&sub) / -128.0);
        let id = inverse(d.to_f32());
        let scales = sub.map(|s| (s * id).round().clamp(-128.0, 127.0) as i8);
        // Re-quantize every value against the scale decoding will use.
        let mut codes = [0u8; 256];
        for (p, c) in codes.iter_mut().enumerate() {
            let step = inverse(d.to_f32() * scales[p / 16] as f32);
            *c = ((v[p] * step).round().clamp(-32.0, 31.0) + 32.0) as u8;
        }
        let (ql, qh) = pack(&codes);
        BlockQ6K { ql, qh, scales, d }
    }

    fn dot(&self, x: &[f32]) -> f32 {
        let x: &[f32; 256] = as_block(x);
        // Each sub-block sums codes * x, then takes its integer scale; `d`
        // multiplies once at the end.
        let mut sum = 0.0;
        for h in 0..2 {
            let ql = &self.ql[64 * h..][..64];
            let qh = &self.qh[32 * h..][..32];
            let xh = &x[128 * h..][..128];
            for g in 0..2 {
                for t in 0..4 {
                    let s = sum_lanes::<16>(|i| {
                        let l = 16 * g + i;
                        unpack(ql[l], ql[l + 32], qh[l])[t] as f32 * xh[l + 32 * t]
                    });
                    sum += self.scales[8 * h + 2 * t + g] as f32 * s;
                }
            }
        }
        sum * self.d.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, dot_row};

    /// d = 0.5, stored code 32 (value 0) everywhere except five values.
    fn hand_block() -> Vec<u8> {
        let mut b = vec![0u8; 210];
        // Code 32 = 0b10_0000: low nibble 0, high bits 2 in every qh slot.
        b[128..192].fill(0xAA);
        b[0] = 0x21; // ql[0]: value 0 low nibble 1, value 64 low nibble 2
        b[32] = 0x3F; // ql[32]: value 32 low nibble 15, value 96 low nibble 3
        b[128] = 0b11_10_01_00; // qh[0]: high bits of values 0, 32, 64, 96
        b[64 + 5] = 0x0F; // ql[69]: value 133 low nibble 15 (value 197: 0)
        b[128 + 32 + 5] = 0b10_10_10_11; // qh[37]: value 133 high bits 3
        let scales: [(usize, i8); 5] = [(0, 2), (2, -1), (4, 3), (6, 1), (8, 4)];
        for (k, s) in scales {
            b[192 + k] = s as u8;
        }
        b[208..].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b
    }

    fn hand_values() -> [f32; 256] {
        let mut v = [0.0; 256];
        v[0] = 0.5 * 2.0 * -31.0; // code 1 | 0 << 4 = 1, minus 32
        v[32] = 0.5; // 0.5 * scale -1 * code -1 (15 | 1 << 4 = 31)
        v[64] = 0.5 * 3.0 * 2.0; // code 2 | 2 << 4 = 34
        v[96] = 0.5 * 1.0 * 19.0; // code 3 | 3 << 4 = 51
        v[133] = 0.5 * 4.0 * 31.0; // code 15 | 3 << 4 = 63
        v
    }

    #[test]
    fn hand_worked_block() {
        let mut out = [f32::NAN; 256];
        dequantize_row(DType::Q6K, &hand_block(), &mut out).unwrap();
        assert_eq!(out, hand_values());
        assert_eq!(out[0..5], [-31.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!([out[32], out[64], out[96], out[133]], [0.5, 3.0, 9.5, 62.0]);

        let ones = [1.0; 256];
        assert_eq!(dot_row(DType::Q6K, &hand_block(), &ones).unwrap(), 44.0);
        let ramp: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let want: f32 = hand_values().iter().zip(&ramp).map(|(a, b)| a * b).sum();
        assert_eq!(dot_row(DType::Q6K, &hand_block(), &ramp).unwrap(), want);
    }

    #[test]
    fn quantize_is_exact_on_representable_values() {
        // d = 1/64; scale -128 is the largest in magnitude, and each sub-block
        // with a non-zero scale holds code -32, so the quantizer finds them all.
        let scales: [i8; 16] = [
            -128, 127, 64, -3, 0, 17, -100, 1, 5, -128, 90, -7, 33, 2, -1, 8,
        ];
        let mut codes = [0u8; 256];
        for (p, c) in codes.iter_mut().enumerate() {
            *c = if p % 16 == 3 { 0 } else { ((p * 7) % 64) as u8 };
            if scales[p / 16] == 0 {
                *c = 32;
            }
        }
        let (ql, qh) = pack(&codes);
        let d = f16::from_f32(1.0 / 64.0);
        let block = BlockQ6K { ql, qh, scales, d };
        let mut v = [0.0; 256];
        block.dequantize(&mut v);
        assert_eq!(BlockQ6K::quantize(&v), block);
    }

    #[test]
    fn zero_block() {
        let b = BlockQ6K::quantize(&[0.0; 256]);
        assert_eq!(b.d.to_f32(), 0.0);
        assert_eq!(b.scales, [0; 16]);
        let mut out = [f32::NAN; 256];
        b.dequantize(&mut out);
        assert_eq!(out, [0.0; 256]);
        assert_eq!(b.dot(&[1.0; 256]), 0.0);
    }
}
