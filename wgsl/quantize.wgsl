// Quantizers of the 32-value block types, rounding as the CPU reference
// (src/quant) does: the scale is stored as f16 and the codes are computed
// against that stored value, rounded half away from zero and clamped. A
// block's bytes are returned in words, little-endian, as ggml lays them out.
alias Values = array<f32, 32>;
alias BlockWords = array<u32, 9>;

fn set_byte(out: ptr<function, BlockWords>, k: u32, byte: u32) {
    (*out)[k >> 2u] |= (byte & 0xffu) << ((k & 3u) * 8u);
}

fn set_half(out: ptr<function, BlockWords>, k: u32, bits: u32) {
    set_byte(out, k, bits);
    set_byte(out, k + 1u, bits >> 8u);
}

fn half_value(bits: u32) -> f32 {
    return unpack2x16float(bits).x;
}

fn inverse(d: f32) -> f32 {
    if (d == 0.0) {
        return 0.0;
    }
    return 1.0 / d;
}

// Rust's f32::round: half away from zero, exactly (x - trunc(x) is exact).
fn round_away(x: f32) -> f32 {
    let t = trunc(x);
    return select(t, t + sign(x), abs(x - t) >= 0.5);
}

fn code(x: f32, top: f32) -> u32 {
    return u32(clamp(round_away(x), 0.0, top));
}

// The value of largest magnitude, sign kept (the first of equals).
fn max_magnitude(v: ptr<function, Values>) -> f32 {
    var m = 0.0;
    for (var j = 0u; j < 32u; j++) {
        if (abs((*v)[j]) > abs(m)) {
            m = (*v)[j];
        }
    }
    return m;
}

fn min_max(v: ptr<function, Values>) -> vec2<f32> {
    var r = vec2<f32>((*v)[0], (*v)[0]);
    for (var j = 1u; j < 32u; j++) {
        r = vec2<f32>(min(r.x, (*v)[j]), max(r.y, (*v)[j]));
    }
    return r;
}

// Codes of values j and j + 16 into byte j of the nibbles at byte `at`
// (their low four bits; the fifth, for q5, goes to qh).
fn set_nibbles(out: ptr<function, BlockWords>, at: u32, c: ptr<function, array<u32, 32>>) {
    for (var j = 0u; j < 16u; j++) {
        set_byte(out, at + j, ((*c)[j] & 15u) | (((*c)[j + 16u] & 15u) << 4u));
    }
}

// Fifth bits of the codes, bit j for value j, as four bytes at `at`.
fn set_high_bits(out: ptr<function, BlockWords>, at: u32, c: ptr<function, array<u32, 32>>) {
    var h = 0u;
    for (var j = 0u; j < 32u; j++) {
        h |= ((*c)[j] >> 4u) << j;
    }
    for (var k = 0u; k < 4u; k++) {
        set_byte(out, at + k, h >> (8u * k));
    }
}

// The q5 types' fifth bits (four bytes at `at`, before the nibbles), when
// the codes reach past 15; the nibbles. Returns the block's size.
fn set_codes(out: ptr<function, BlockWords>, at: u32, c: ptr<function, array<u32, 32>>, top: f32) -> u32 {
    var nibbles = at;
    if (top > 15.0) {
        set_high_bits(out, at, c);
        nibbles += 4u;
    }
    set_nibbles(out, nibbles, c);
    return nibbles + 16u;
}

// q4_0 (half 8) and q5_0 (half 16): the largest magnitude gets code 0,
// d = that value / -half, codes x / d + half; d, [fifth bits,] nibbles.
fn quantize_centered(v: ptr<function, Values>, out: ptr<function, BlockWords>, half: f32) -> u32 {
    let d = f16_bits(max_magnitude(v) / -half);
    let id = inverse(half_value(d));
    var c: array<u32, 32>;
    for (var j = 0u; j < 32u; j++) {
        c[j] = code((*v)[j] * id + half, 2.0 * half - 1.0);
    }
    set_half(out, 0u, d);
    return set_codes(out, 2u, &c, 2.0 * half - 1.0);
}

// q4_1 (top 15) and q5_1 (top 31): codes 0..top span [min, max],
// d = (max - min) / top, m = min, codes (x - m) / d; d, m, [fifth bits,]
// nibbles.
fn quantize_affine(v: ptr<function, Values>, out: ptr<function, BlockWords>, top: f32) -> u32 {
    let mm = min_max(v);
    let d = f16_bits((mm.y - mm.x) / top);
    let m = f16_bits(mm.x);
    let id = inverse(half_value(d));
    var c: array<u32, 32>;
    for (var j = 0u; j < 32u; j++) {
        c[j] = code(((*v)[j] - half_value(m)) * id, top);
    }
    set_half(out, 0u, d);
    set_half(out, 2u, m);
    return set_codes(out, 4u, &c, top);
}

// q8_0: d = largest |x| / 127, codes x / d in -127..127. 34 bytes.
fn quantize_q8_0(v: ptr<function, Values>, out: ptr<function, BlockWords>) -> u32 {
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, abs((*v)[j]));
    }
    let d = f16_bits(amax / 127.0);
    let id = inverse(half_value(d));
    set_half(out, 0u, d);
    for (var j = 0u; j < 32u; j++) {
        let q = i32(clamp(round_away((*v)[j] * id), -127.0, 127.0));
        set_byte(out, 2u + j, bitcast<u32>(q));
    }
    return 34u;
}
