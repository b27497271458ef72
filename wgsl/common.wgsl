// Shared by every kernel. `Params` mirrors src/backend/wgpu/params.rs: the
// sources `a`, `b` and the destination `d` as shape, byte strides and byte
// offset, then twelve op-specific words in `x`, `y` and `z` (f32 values as
// bits).

struct TensorP {
    ne: vec4<u32>,
    nb: vec4<u32>,
    offset: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

struct Params {
    a: TensorP,
    b: TensorP,
    d: TensorP,
    x: vec4<u32>,
    y: vec4<u32>,
    z: vec4<u32>,
}

// The four indices of flat element `flat` in shape `ne`, dimension 0 fastest.
fn unravel(flat: u32, ne: vec4<u32>) -> vec4<u32> {
    let r0 = flat / ne.x;
    let r1 = r0 / ne.y;
    return vec4<u32>(flat % ne.x, r0 % ne.y, r1 % ne.z, r1 / ne.z);
}

// Byte address of element `i` of `t` (`i.x` counts elements, or blocks for quantized rows).
fn addr(t: TensorP, i: vec4<u32>) -> u32 {
    return t.offset + dot(i, t.nb);
}

// Number of elements of `t`.
fn n_elements(t: TensorP) -> u32 {
    return t.ne.x * t.ne.y * t.ne.z * t.ne.w;
}

// Flat index of a workgroup in a grid that may spill into y and z
// (a dimension holds at most 65535 workgroups).
fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + nwg.x * (wid.y + nwg.y * wid.z);
}

// Number of rows of `t` (all dimensions but the first).
fn n_rows(t: TensorP) -> u32 {
    return t.ne.y * t.ne.z * t.ne.w;
}

// Index of the first element of row `row` of `t`.
fn row_start(row: u32, t: TensorP) -> vec4<u32> {
    let r = unravel(row, vec4<u32>(t.ne.y, t.ne.z, t.ne.w, 1u));
    return vec4<u32>(0u, r.x, r.y, r.z);
}

// f16 bits of x rounded to nearest even, as the CPU reference (the half
// crate) and ggml round. pack2x16float's rounding is left to the driver
// (Vulkan does not pin it; NVIDIA's differs from the reference's), so the
// bits are computed here: infinities and NaN (quiet) kept, overflow to
// infinity, subnormals rounded in units of 2^-24.
fn f16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    let sign = (u >> 16u) & 0x8000u;
    let a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) {
        return sign | 0x7c00u; // 65520 and up round to infinity
    }
    var bits: u32;
    var rest: u32;
    var halfway: u32;
    if (a >= 0x38800000u) {
        // Normal: rebias the exponent (127 - 15) and drop 13 mantissa bits.
        let r = a - 0x38000000u;
        bits = r >> 13u;
        rest = r & 0x1fffu;
        halfway = 0x1000u;
    } else if (a >= 0x33000000u) {
        // Subnormal (2^-25 up to 2^-14): the mantissa with its leading bit,
        // in units of 2^-24.
        let shift = 126u - (a >> 23u);
        let m = (a & 0x7fffffu) | 0x800000u;
        bits = m >> shift;
        rest = m & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1u);
    } else {
        return sign; // below 2^-25, or exactly half of it: zero
    }
    let up = rest > halfway || (rest == halfway && (bits & 1u) == 1u);
    return sign | (bits + u32(up));
}
