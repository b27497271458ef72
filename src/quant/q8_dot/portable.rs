//! The block loops in plain Rust (integer sums are exact, so every
//! instruction set's kernels agree up to the f32 accumulation order).

use super::{f16_to_f32, Q8Row, BLOCK};
use crate::quant::q4_k::step_offset;
use crate::quant::q6_k::unpack;
use crate::quant::{BlockIQ4NL, BlockIQ4XS, BlockQ6K, BlockQ8_0, IQ4_VALUES};
use crate::quant::{BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1};

/// Σ code * x-code over one block of 4-bit codes (low nibbles are
/// values 0..16, high nibbles 16..32).
fn nibble_dot(qs: &[u8; 16], xq: &[i8]) -> i32 {
    let (lo, hi) = xq.split_at(16);
    let mut sum = 0i32;
    for j in 0..16 {
        sum += i32::from(qs[j] & 0xf) * i32::from(lo[j]);
        sum += i32::from(qs[j] >> 4) * i32::from(hi[j]);
    }
    sum
}

/// q4_0: d * (code - 8), so Σ = d dx (Σ code * xq - 8 Σ xq).
pub fn q4_0(blocks: &[BlockQ4_0], x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
        let s = nibble_dot(&w.qs, xq) - 8 * x.sums[b];
        acc += f16_to_f32(w.d) * x.d[b] * s as f32;
    }
    acc
}

/// q4_1: d * code + m, so Σ = d dx Σ code * xq + m dx Σ xq.
pub fn q4_1(blocks: &[BlockQ4_1], x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
        let s = nibble_dot(&w.qs, xq);
        acc += x.d[b] * (f16_to_f32(w.d) * s as f32 + f16_to_f32(w.m) * x.sums[b] as f32);
    }
    acc
}

/// The 5-bit codes of a q5_0/q5_1 block dotted with its x-codes.
fn q5_dot(qs: &[u8; 16], qh: [u8; 4], xq: &[i8]) -> i32 {
    let h = u32::from_le_bytes(qh);
    let (lo, hi) = xq.split_at(16);
    let mut sum = 0i32;
    for j in 0..16 {
        let c0 = (qs[j] & 0xf) as i32 | ((h >> j) as i32 & 1) << 4;
        let c1 = (qs[j] >> 4) as i32 | ((h >> (j + 16)) as i32 & 1) << 4;
        sum += c0 * i32::from(lo[j]) + c1 * i32::from(hi[j]);
    }
    sum
}

/// q5_0: d * (code - 16).
pub fn q5_0(blocks: &[BlockQ5_0], x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
        let s = q5_dot(&w.qs, w.qh, xq) - 16 * x.sums[b];
        acc += f16_to_f32(w.d) * x.d[b] * s as f32;
    }
    acc
}

/// q5_1: d * code + m.
pub fn q5_1(blocks: &[BlockQ5_1], x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
        let s = q5_dot(&w.qs, w.qh, xq);
        acc += x.d[b] * (f16_to_f32(w.d) * s as f32 + f16_to_f32(w.m) * x.sums[b] as f32);
    }
    acc
}

/// Σ code * x-code over 32 values.
fn dot32(codes: &[u8; 32], xq: &[i8]) -> i32 {
    codes
        .iter()
        .zip(xq)
        .map(|(&c, &x)| i32::from(c) * i32::from(x))
        .sum()
}

/// A K-quant row whose sub-blocks of 32 line up with the x-blocks.
/// `codes(block, g)` unpacks the codes of sub-blocks 2g and 2g + 1,
/// `step_offset(block, s)` gives sub-block s's values as step * code -
/// offset, so its dot is dx (step Σ code * xq - offset Σ xq).
fn k_quant<B>(
    blocks: &[B],
    x: &Q8Row,
    step_offset: impl Fn(&B, usize) -> (f32, f32),
    codes: impl Fn(&B, usize) -> [[u8; 32]; 2],
) -> f32 {
    let mut acc = 0.0f32;
    for (i, w) in blocks.iter().enumerate() {
        for g in 0..4 {
            for (h, c) in codes(w, g).iter().enumerate() {
                let (s, b) = (2 * g + h, 8 * i + 2 * g + h);
                let dot = dot32(c, &x.q[BLOCK * b..][..BLOCK]);
                let (step, offset) = step_offset(w, s);
                acc += x.d[b] * (step * dot as f32 - offset * x.sums[b] as f32);
            }
        }
    }
    acc
}

/// The low and high nibbles of 32 bytes.
fn nibbles(qs: &[u8]) -> [[u8; 32]; 2] {
    let (mut lo, mut hi) = ([0u8; 32], [0u8; 32]);
    for ((l, h), &q) in lo.iter_mut().zip(&mut hi).zip(qs) {
        (*l, *h) = (q & 0xf, q >> 4);
    }
    [lo, hi]
}

pub fn q4_k(blocks: &[BlockQ4K], x: &Q8Row) -> f32 {
    k_quant(
        blocks,
        x,
        |w, s| step_offset(w.d, w.dmin, &w.scales, s),
        |w, g| nibbles(&w.qs[32 * g..][..32]),
    )
}

pub fn q5_k(blocks: &[BlockQ5K], x: &Q8Row) -> f32 {
    k_quant(
        blocks,
        x,
        |w, s| step_offset(w.d, w.dmin, &w.scales, s),
        |w, g| {
            let [mut lo, mut hi] = nibbles(&w.qs[32 * g..][..32]);
            for l in 0..32 {
                lo[l] |= ((w.qh[l] >> (2 * g)) & 1) << 4;
                hi[l] |= ((w.qh[l] >> (2 * g + 1)) & 1) << 4;
            }
            [lo, hi]
        },
    )
}

/// Σ code * x-code over each 16-value half of a 32-value x-block (the
/// K-quants with 16-value sub-blocks give each half its own scale).
pub fn half_dots(codes: &[i8], xq: &[i8]) -> [i32; 2] {
    let mut sums = [0i32; 2];
    for (s, (c, x)) in sums.iter_mut().zip(codes.chunks(16).zip(xq.chunks(16))) {
        *s = c
            .iter()
            .zip(x)
            .map(|(&c, &x)| i32::from(c) * i32::from(x))
            .sum();
    }
    sums
}

/// q6_K: d * scale * code, one scale per 16 values (two per x-block).
pub fn q6_k(blocks: &[BlockQ6K], x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    let mut codes = [0i8; 256];
    for (i, w) in blocks.iter().enumerate() {
        for h in 0..2 {
            for l in 0..32 {
                let q = unpack(w.ql[64 * h + l], w.ql[64 * h + l + 32], w.qh[32 * h + l]);
                for (t, q) in q.into_iter().enumerate() {
                    codes[128 * h + 32 * t + l] = q as i8;
                }
            }
        }
        let mut block = 0.0f32;
        for (s, (c, xq)) in codes
            .chunks_exact(BLOCK)
            .zip(x.q[BLOCK * 8 * i..][..256].chunks_exact(BLOCK))
            .enumerate()
        {
            let [s0, s1] = half_dots(c, xq);
            let sc = |g: usize| i32::from(w.scales[2 * s + g]);
            block += x.d[8 * i + s] * (sc(0) * s0 + sc(1) * s1) as f32;
        }
        acc += f16_to_f32(w.d) * block;
    }
    acc
}

/// q8_0: d * code.
pub fn q8_0(blocks: &[BlockQ8_0], x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    for (b, (w, xq)) in blocks.iter().zip(x.q.chunks_exact(BLOCK)).enumerate() {
        let s: i32 =
            w.qs.iter()
                .zip(xq)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
        acc += f16_to_f32(w.d) * x.d[b] * s as f32;
    }
    acc
}

/// iq4_nl and iq4_xs: one 32-value group (step, codes) per x-block, each
/// value the step times the table value of its code.
fn iq4_groups<'a>(groups: impl Iterator<Item = (f32, &'a [u8; 16])>, x: &Q8Row) -> f32 {
    let mut acc = 0.0f32;
    for ((step, qs), (xq, dx)) in groups.zip(x.q.chunks_exact(BLOCK).zip(&x.d)) {
        let (lo, hi) = xq.split_at(16);
        let table = |c: u8| i32::from(IQ4_VALUES[usize::from(c)]);
        let s: i32 = (0..16)
            .map(|j| table(qs[j] & 0xf) * i32::from(lo[j]) + table(qs[j] >> 4) * i32::from(hi[j]))
            .sum();
        acc += step * dx * s as f32;
    }
    acc
}

pub fn iq4_nl(blocks: &[BlockIQ4NL], x: &Q8Row) -> f32 {
    iq4_groups(blocks.iter().map(|w| (f16_to_f32(w.d), &w.qs)), x)
}

pub fn iq4_xs(blocks: &[BlockIQ4XS], x: &Q8Row) -> f32 {
    let groups = blocks.iter().flat_map(|w| {
        let d = f16_to_f32(w.d);
        let (qs, _) = w.qs.as_chunks::<16>();
        qs.iter()
            .enumerate()
            .map(move |(s, qs)| (d * (w.scale(s) - 32) as f32, qs))
    });
    iq4_groups(groups, x)
}
