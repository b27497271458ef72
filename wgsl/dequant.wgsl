// Element j of one quantized block starting at byte `b` of binding a, one
// function per type (layouts as in src/quant/*.rs). A kernel picks one in
// its defs as `fn dequant(b, j)`. Blocks of 18 and 34 bytes need not be
// 4-byte aligned, and a view may start at any byte, so halves and bytes are
// read byte by byte.

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
