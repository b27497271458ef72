// Element j of one quantized block starting at byte `b` of binding a, one
// function per type (layouts as in src/quant/*.rs). A kernel picks one in
// its defs as `fn dequant(b, j)`. Blocks of 18, 22, 34 and 110 bytes need
// not be 4-byte aligned, and a view may start at any byte, so halves and
// bytes are read byte by byte.

fn blk_f16(byte: u32) -> f32 {
    return unpack2x16float(a_u8(byte) | (a_u8(byte + 1u) << 8u)).x;
}

fn blk_i8(byte: u32) -> i32 {
    return bitcast<i32>(a_u8(byte) << 24u) >> 24u;
}

// q4_0 (18 bytes): f16 d, 16 bytes of codes; values j and j + 16 share byte j.
fn q4_0_value(b: u32, j: u32) -> f32 {
    let q = (a_u8(b + 2u + (j & 15u)) >> ((j >> 4u) * 4u)) & 15u;
    return (f32(q) - 8.0) * blk_f16(b);
}

// q4_1 (20 bytes): f16 d, f16 m (the value of code 0), codes as q4_0.
fn q4_1_value(b: u32, j: u32) -> f32 {
    let q = (a_u8(b + 4u + (j & 15u)) >> ((j >> 4u) * 4u)) & 15u;
    return f32(q) * blk_f16(b) + blk_f16(b + 2u);
}

// The 5-bit code of value j of a q5_0/q5_1 block whose fifth bits (a
// 32-bit word, bit j for value j) start at byte h, followed by 16 bytes of
// low nibbles laid out as in q4_0.
fn q5_code(h: u32, j: u32) -> u32 {
    let lo = (a_u8(h + 4u + (j & 15u)) >> ((j >> 4u) * 4u)) & 15u;
    let hi = (a_u8(h + (j >> 3u)) >> (j & 7u)) & 1u;
    return lo | (hi << 4u);
}

// q5_0 (22 bytes): f16 d, fifth bits, low nibbles; value = (code - 16) * d.
fn q5_0_value(b: u32, j: u32) -> f32 {
    return (f32(q5_code(b + 2u, j)) - 16.0) * blk_f16(b);
}

// q5_1 (24 bytes): f16 d, f16 m, fifth bits, low nibbles; value = code * d + m.
fn q5_1_value(b: u32, j: u32) -> f32 {
    return f32(q5_code(b + 4u, j)) * blk_f16(b) + blk_f16(b + 2u);
}

// q8_0 (34 bytes): f16 d, 32 signed codes.
fn q8_0_value(b: u32, j: u32) -> f32 {
    return f32(blk_i8(b + 2u + j)) * blk_f16(b);
}

// q6_K (210 bytes): ql[128] low nibbles, qh[64] high bit pairs, i8
// scales[16] (one per 16 values), f16 d. In each half h of 128 values,
// value 32t + l (t < 4, l < 32) has its low nibble in ql[64h + l + 32(t&1)]
// (high nibble for t >= 2) and its high bits at 2t in qh[32h + l].
fn q6_k_value(b: u32, j: u32) -> f32 {
    let h = j >> 7u;
    let t = (j >> 5u) & 3u;
    let l = j & 31u;
    let lo = (a_u8(b + 64u * h + l + 32u * (t & 1u)) >> (4u * (t >> 1u))) & 15u;
    let hi = (a_u8(b + 128u + 32u * h + l) >> (2u * t)) & 3u;
    let q = i32(lo | (hi << 4u)) - 32;
    return blk_f16(b + 208u) * f32(blk_i8(b + 192u + (j >> 4u))) * f32(q);
}

// Scale and min (0..63) of sub-block s of a q4_K/q5_K block whose 12
// packed scale bytes start at byte `sc` (src/quant/q4_k.rs `scale_min`).
fn k_scale_min(sc: u32, s: u32) -> vec2<f32> {
    if (s < 4u) {
        return vec2<f32>(f32(a_u8(sc + s) & 63u), f32(a_u8(sc + s + 4u) & 63u));
    }
    let x = a_u8(sc + s + 4u);
    return vec2<f32>(
        f32((x & 15u) | ((a_u8(sc + s - 4u) >> 6u) << 4u)),
        f32((x >> 4u) | ((a_u8(sc + s) >> 6u) << 4u)),
    );
}

// Value j of a q4_K/q5_K block at b with code `q`: d * scale * q - dmin * min.
fn k_value(b: u32, j: u32, q: u32) -> f32 {
    let sm = k_scale_min(b + 4u, j >> 5u);
    return blk_f16(b) * sm.x * f32(q) - blk_f16(b + 2u) * sm.y;
}

// Low 4 bits of the code of value j (sub-block s = j / 32) of a q4_K/q5_K
// block whose codes start at byte qs: in qs[32(s / 2) + j % 32], low nibble
// for even s.
fn k_nibble(qs: u32, j: u32) -> u32 {
    let s = j >> 5u;
    return (a_u8(qs + 32u * (s >> 1u) + (j & 31u)) >> (4u * (s & 1u))) & 15u;
}

// q4_K (144 bytes): f16 d, f16 dmin, 12 scale bytes, qs[128].
fn q4_k_value(b: u32, j: u32) -> f32 {
    return k_value(b, j, k_nibble(b + 16u, j));
}

// q5_K (176 bytes): q4_K's fields with qh[32] before qs; the fifth bit of
// value j is bit j / 32 of qh[j % 32].
fn q5_k_value(b: u32, j: u32) -> f32 {
    let hi = (a_u8(b + 16u + (j & 31u)) >> (j >> 5u)) & 1u;
    return k_value(b, j, k_nibble(b + 48u, j) | (hi << 4u));
}

// The 2-bit field of value j of a q2_K/q3_K block whose qs[64] start at
// byte qs: bits 2((j / 32) % 4).. of qs[32(j / 128) + j % 32].
fn k2_bits(qs: u32, j: u32) -> u32 {
    return (a_u8(qs + 32u * (j >> 7u) + (j & 31u)) >> (2u * ((j >> 5u) & 3u))) & 3u;
}

// q2_K (84 bytes): scales[16] (per 16 values, the scale in the low nibble
// and the min in the high one), qs[64], f16 d, f16 dmin; value = d * scale
// * code - dmin * min.
fn q2_k_value(b: u32, j: u32) -> f32 {
    let sm = a_u8(b + (j >> 4u));
    return blk_f16(b + 80u) * f32(sm & 15u) * f32(k2_bits(b + 16u, j)) - blk_f16(b + 82u) * f32(sm >> 4u);
}

// q3_K (110 bytes): hmask[32], qs[64], 12 bytes of 6-bit scales, f16 d.
// Scale s (per 16 values, stored plus 32) has its low 4 bits in nibble
// s / 8 of scale byte s % 8 and its top 2 bits at 2(s / 4) in byte
// 8 + s % 4; the high bit of value j's code is bit j / 32 of hmask[j % 32].
// value = d * (scale - 32) * (low bits + 4 * high bit - 4).
fn q3_k_value(b: u32, j: u32) -> f32 {
    let s = j >> 4u;
    let lo = (a_u8(b + 96u + (s & 7u)) >> (4u * (s >> 3u))) & 15u;
    let hi = (a_u8(b + 104u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
    let h = (a_u8(b + (j & 31u)) >> (j >> 5u)) & 1u;
    let q = i32(k2_bits(b + 32u, j) | (h << 2u)) - 4;
    return blk_f16(b + 108u) * f32(i32(lo | (hi << 4u)) - 32) * f32(q);
}
