// Block decoders for mul_mat: each returns one 8-value "unit" of a row of
// `a` as f32 weights, and `x_elem_*` say which row elements a unit's weights
// belong to, so the kernels gather the matching activations once and reuse
// them across rows. Units are numbered so that consecutive units read
// consecutive words: a q4_0/q4_1/q5_0/q5_1/iq4_nl unit is one code word of a block
// (values 4w..4w+4 and 16+4w..16+4w+4), a q8_0 unit two, a q4_K/q5_K unit
// two (nibbles of one sub-block), a q2_K/q3_K unit two (2-bit fields of
// eight consecutive values), a q6_K unit one ql and one qh word;
// f32/f16 rows are read in groups of 64 values, 8 invocations side by side
// reading interleaved words.
//
// Blocks of 18, 22, 34, 110 and 210 bytes are not 4-byte aligned: the decoders
// read whole words and funnel-shift them (no byte loads). The word after the last
// one may lie past the binding; wgpu clamps such reads and the shifted-out
// bits are discarded.

alias Unit = array<vec4<f32>, 2>;

fn funnel(lo: u32, hi: u32, sh: u32) -> u32 {
    // A shift by 32 would be a shift by 0 in WGSL: select the aligned case.
    return select((lo >> sh) | (hi << (32u - sh)), lo, sh == 0u);
}

// The 4 bytes at any byte address of `a`.
fn a_u32_at(byte: u32) -> u32 {
    let i = byte >> 2u;
    return funnel(a[i], a[i + 1u], (byte & 3u) * 8u);
}

// The 16 bytes at any byte address of `a`: five loads, where four
// a_u32_at would take eight.
fn a_vec4_at(byte: u32) -> vec4<u32> {
    let i = byte >> 2u;
    let sh = (byte & 3u) * 8u;
    let w0 = a[i];
    let w1 = a[i + 1u];
    let w2 = a[i + 2u];
    let w3 = a[i + 3u];
    let w4 = a[i + 4u];
    return vec4<u32>(funnel(w0, w1, sh), funnel(w1, w2, sh), funnel(w2, w3, sh), funnel(w3, w4, sh));
}

// The 8 bytes at any byte address of `a` (the loads of the unused half
// are dead code to the driver's compiler).
fn a_vec2_at(byte: u32) -> vec2<u32> {
    return a_vec4_at(byte).xy;
}

fn f16_lo(w: u32) -> f32 {
    return unpack2x16float(w).x;
}

// Low and high nibbles of the four bytes of `w`, in byte order.
fn nib_lo(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(w & 0x0f0f0f0fu));
}

fn nib_hi(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((w >> 4u) & 0x0f0f0f0fu));
}

// Units are used with constant indices only, so drivers keep them in
// registers (a loop over a private array put it in local memory).
fn dot_unit(w: Unit, x: Unit) -> f32 {
    let s = fma(w[1], x[1], w[0] * x[0]);
    return s.x + s.y + s.z + s.w;
}

// Row elements of weight i of unit u, per layout.
fn x_elem_q4(u: u32, i: u32) -> u32 {
    return 32u * (u >> 2u) + 4u * (u & 3u) + (i & 3u) + 16u * (i >> 2u);
}

// q4_K/q5_K unit: eight consecutive values of one sub-block (see k_sub).
fn x_elem_k(u: u32, i: u32) -> u32 {
    return 32u * (u >> 2u) + 8u * (u & 3u) + i;
}

fn x_elem_linear(u: u32, i: u32) -> u32 {
    return 8u * u + i;
}

// q6_K unit: half h, ql word pb (quarters pb and pb + 2), positions l0..l0+4.
fn x_elem_q6_k(u: u32, i: u32) -> u32 {
    let r = u & 31u;
    let t = ((r >> 3u) & 1u) + 2u * (i >> 2u);
    return 256u * (u >> 5u) + 128u * (r >> 4u) + 32u * t + 4u * (r & 7u) + (i & 3u);
}

fn x_elem_f32(u: u32, i: u32) -> u32 {
    return 64u * (u >> 3u) + (u & 7u) + 8u * i;
}

fn x_elem_f16(u: u32, i: u32) -> u32 {
    return 64u * (u >> 3u) + 2u * (u & 7u) + (i & 1u) + 16u * (i >> 1u);
}

// Units of a row of k values: f32/f16 rows round up to whole groups of 64.
fn float_units(k: u32) -> u32 {
    return (k + 63u) / 64u * 8u;
}

// f32 and f16 rows: element k at row + k * nb0, zero past K.
fn f32_at(row: u32, k: u32) -> f32 {
    return select(0.0, bitcast<f32>(a[(row + k * p.a.nb.x) >> 2u]), k < p.a.ne.x);
}

fn dq_f32(row: u32, u: u32) -> Unit {
    let k = 64u * (u >> 3u) + (u & 7u);
    return Unit(
        vec4<f32>(f32_at(row, k), f32_at(row, k + 8u), f32_at(row, k + 16u), f32_at(row, k + 24u)),
        vec4<f32>(f32_at(row, k + 32u), f32_at(row, k + 40u), f32_at(row, k + 48u), f32_at(row, k + 56u)),
    );
}

// Elements k and k + 1 of an f16 row, zero past K.
fn f16_pair(row: u32, k: u32) -> vec2<f32> {
    var v: vec2<f32>;
    if (p.a.nb.x == 2u) {
        v = unpack2x16float(a_u32_at(row + 2u * k));
    } else {
        v = vec2<f32>(a_f16(row + k * p.a.nb.x), a_f16(row + (k + 1u) * p.a.nb.x));
    }
    return select(vec2<f32>(0.0), v, vec2<u32>(k, k + 1u) < vec2<u32>(p.a.ne.x));
}

// Elements k and k + 1 of a bf16 row (the top halves of f32s), zero past K.
fn bf16_pair(row: u32, k: u32) -> vec2<f32> {
    var v: vec2<f32>;
    if (p.a.nb.x == 2u) {
        let w = a_u32_at(row + 2u * k);
        v = vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
    } else {
        v = vec2<f32>(
            bitcast<f32>(a_u16(row + k * p.a.nb.x) << 16u),
            bitcast<f32>(a_u16(row + (k + 1u) * p.a.nb.x) << 16u),
        );
    }
    return select(vec2<f32>(0.0), v, vec2<u32>(k, k + 1u) < vec2<u32>(p.a.ne.x));
}

fn dq_bf16(row: u32, u: u32) -> Unit {
    let k = 64u * (u >> 3u) + 2u * (u & 7u);
    return Unit(
        vec4<f32>(bf16_pair(row, k), bf16_pair(row, k + 16u)),
        vec4<f32>(bf16_pair(row, k + 32u), bf16_pair(row, k + 48u)),
    );
}

fn dq_f16(row: u32, u: u32) -> Unit {
    let k = 64u * (u >> 3u) + 2u * (u & 7u);
    return Unit(
        vec4<f32>(f16_pair(row, k), f16_pair(row, k + 16u)),
        vec4<f32>(f16_pair(row, k + 32u), f16_pair(row, k + 48u)),
    );
}

// q4_0 (18 bytes): f16 d, 16 bytes of codes; value j = (lo nibble of
// qs[j] - 8) * d, value j + 16 = (hi nibble - 8) * d. Code word w of the
// block at s.
fn dq_q4_0(s: u32, w: u32) -> Unit {
    let d = vec4<f32>(f16_lo(a_u32_at(s + Q4_0_D)));
    let q = a_u32_at(s + Q4_0_QS + 4u * w);
    let md = -8.0 * d;
    return Unit(fma(nib_lo(q), d, md), fma(nib_hi(q), d, md));
}

// q4_1 (20 bytes): f16 d, f16 m, 16 bytes of codes; value = code * d + m.
fn dq_q4_1(s: u32, w: u32) -> Unit {
    let dm = unpack2x16float(a_u32_at(s + Q4_1_D));
    let d = vec4<f32>(dm.x);
    let m = vec4<f32>(dm.y);
    let q = a_u32_at(s + Q4_1_QS + 4u * w);
    return Unit(fma(nib_lo(q), d, m), fma(nib_hi(q), d, m));
}

// q8_0 (34 bytes): f16 d, 32 signed bytes; value = q * d. Values 8w..8w+8.
fn dq_q8_0(s: u32, w: u32) -> Unit {
    let d = f16_lo(a_u32_at(s + Q8_0_D));
    let q = a_vec2_at(s + Q8_0_QS + 8u * w);
    return Unit(vec4<f32>(unpack4xI8(q.x)) * d, vec4<f32>(unpack4xI8(q.y)) * d);
}

// Fifth bits of values `first`..`first` + 4 of a q5 block, as 16s.
fn q5_high(qh: u32, first: u32) -> vec4<u32> {
    let bits = vec4<u32>(qh) >> (vec4<u32>(first) + vec4<u32>(0u, 1u, 2u, 3u));
    return (bits & vec4<u32>(1u)) << vec4<u32>(4u);
}

// Codes of unit w (code word q) of a q5_0/q5_1 block with fifth bits qh:
// values 4w..4w+4 and 16+4w..16+4w+4, as in q4_0.
fn q5_codes(qh: u32, q: u32, w: u32) -> Unit {
    let lo = unpack4xU8(q & 0x0f0f0f0fu) | q5_high(qh, 4u * w);
    let hi = unpack4xU8((q >> 4u) & 0x0f0f0f0fu) | q5_high(qh, 16u + 4u * w);
    return Unit(vec4<f32>(lo), vec4<f32>(hi));
}

// q5_0 (22 bytes): f16 d, u32 fifth bits, 16 bytes of low nibbles;
// value = (code - 16) * d.
fn dq_q5_0(s: u32, w: u32) -> Unit {
    let d = f16_lo(a_u32_at(s + Q5_0_D));
    return q5_unit(a_u32_at(s + Q5_0_QH), a_u32_at(s + Q5_0_QS + 4u * w), w, vec2<f32>(d, -16.0 * d));
}

// Unit w of a q5 block: codes * dm.x + dm.y.
fn q5_unit(qh: u32, q: u32, w: u32, dm: vec2<f32>) -> Unit {
    let c = q5_codes(qh, q, w);
    let d = vec4<f32>(dm.x);
    let m = vec4<f32>(dm.y);
    return Unit(fma(c[0], d, m), fma(c[1], d, m));
}

// q5_1 (24 bytes): f16 d, f16 m, u32 fifth bits, low nibbles; value = code * d + m.
fn dq_q5_1(s: u32, w: u32) -> Unit {
    return q5_unit(a_u32_at(s + Q5_1_QH), a_u32_at(s + Q5_1_QS + 4u * w), w, unpack2x16float(a_u32_at(s + Q5_1_D)));
}

// Byte i of the 12 q4_K/q5_K scale bytes, held as three words.
fn k4_byte(w: vec3<u32>, i: u32) -> u32 {
    return (w[i >> 2u] >> (8u * (i & 3u))) & 0xffu;
}

// Scale and min (0..63) of q4_K/q5_K sub-block s (src/quant/q4_k.rs
// `scale_min`).
fn q4_k_scale_min(w: vec3<u32>, s: u32) -> vec2<f32> {
    if (s < 4u) {
        return vec2<f32>(f32(k4_byte(w, s) & 63u), f32(k4_byte(w, s + 4u) & 63u));
    }
    let x = k4_byte(w, s + 4u);
    return vec2<f32>(
        f32((x & 15u) | ((k4_byte(w, s - 4u) >> 6u) << 4u)),
        f32((x >> 4u) | ((k4_byte(w, s) >> 6u) << 4u)),
    );
}

// Sub-block of unit r (0..32) of a q4_K/q5_K block: units are eight
// consecutive values, 8(r & 3).. of sub-block 2(r >> 3) + ((r >> 2) & 1).
fn k_sub(r: u32) -> u32 {
    return 2u * (r >> 3u) + ((r >> 2u) & 1u);
}

// q4_K (144 bytes): f16 d, f16 dmin, 12 scale bytes, qs[128]; value =
// d * scale * code - dmin * min. Step and offset (d * scale, dmin * min)
// of sub-block `sub` of the block at s (q5_K has the same fields).
fn k_sub_head(s: u32, sub: u32) -> vec2<f32> {
    let dm = unpack2x16float(a_u32_at(s + Q4_K_D));
    let sc = vec3<u32>(a_u32_at(s + Q4_K_SCALES), a_u32_at(s + Q4_K_SCALES + 4u), a_u32_at(s + Q4_K_SCALES + 8u));
    return q4_k_scale_min(sc, sub) * dm;
}

// The codes of unit r are the low (even sub-block) or high (odd) nibbles
// of code words 8(r >> 3) + 2(r & 3) and the next. Returns the unit's step
// and offset and those code words, from byte `qs` of the block at s,
// shifted so the codes are the low nibbles (q5_K keeps its fifth bits
// before its codes).
fn k_unit_words(s: u32, r: u32, qs: u32) -> QChunk {
    let sub = k_sub(r);
    let q = a_vec2_at(s + qs + 32u * (r >> 3u) + 8u * (r & 3u)) >> vec2<u32>(4u * (sub & 1u));
    return QChunk(k_sub_head(s, sub), q);
}

fn dq_q4_k(s: u32, r: u32) -> Unit {
    let c = k_unit_words(s, r, Q4_K_QS);
    let step = vec4<f32>(c.head.x);
    let offset = vec4<f32>(-c.head.y);
    return Unit(fma(nib_lo(c.q.x), step, offset), fma(nib_lo(c.q.y), step, offset));
}

// q5_K (176 bytes): q4_K's d, dmin and scales, then qh[32] (the fifth bit
// of value l of sub-block t is bit t of qh[l]), then the low bits as q4_K's
// codes.
fn dq_q5_k(s: u32, r: u32) -> Unit {
    let c = k_unit_words(s, r, Q5_K_QS);
    return q5_k_unit(c.q, a_vec2_at(s + Q5_K_QH + 8u * (r & 3u)) >> vec2<u32>(k_sub(r)), c.head);
}

// Eight q5_K values: low nibbles of `lo`, fifth bits the low bits of `hi`'s
// bytes, step and offset `h`.
fn q5_k_unit(lo: vec2<u32>, hi: vec2<u32>, h: vec2<f32>) -> Unit {
    let q = (lo & vec2<u32>(0x0f0f0f0fu)) | ((hi & vec2<u32>(0x01010101u)) << vec2<u32>(4u));
    let step = vec4<f32>(h.x);
    let offset = vec4<f32>(-h.y);
    return Unit(
        fma(vec4<f32>(unpack4xU8(q.x)), step, offset),
        fma(vec4<f32>(unpack4xU8(q.y)), step, offset),
    );
}

// Four q6_K codes (-32..31): 4 bits of `ql` from bit `lo` of each byte, 2 of
// `qh` from bit `hi` (src/quant/q6_k.rs `unpack`).
fn q6_codes(ql: u32, qh: u32, lo: u32, hi: u32) -> vec4<f32> {
    let l = unpack4xU8((ql >> lo) & 0x0f0f0f0fu);
    let h = unpack4xU8((qh >> hi) & 0x03030303u);
    return vec4<f32>(l | (h << vec4<u32>(4u))) - 32.0;
}

// Signed byte `i` of the word pair `w`.
fn i8_at(w: vec2<u32>, i: u32) -> f32 {
    return f32(extractBits(bitcast<i32>(select(w.x, w.y, i >= 4u)), 8u * (i & 3u), 8u));
}

// q6_K (210 bytes): ql[128], qh[64], i8 scales[16], f16 d. Unit r (0..32)
// of the block at s, in x_elem_q6_k order: quarter pb for the low nibbles of
// the ql word, quarter pb + 2 for the high ones; quarter t's scale is
// scales[8h + 2t + l0 / 16].
fn dq_q6_k(s: u32, r: u32) -> Unit {
    let h = r >> 4u;
    let pb = (r >> 3u) & 1u;
    let l0 = 4u * (r & 7u);
    let ql = a_u32_at(s + Q6_K_QL + 64u * h + 32u * pb + l0);
    let qh = a_u32_at(s + Q6_K_QH + 32u * h + l0);
    return q6_unit(ql, qh, pb, q6_steps(s, h, 2u * pb + (l0 >> 4u)));
}

// The steps (d times the scale) of quarters t and t + 2 of half h of the
// q6_K block at s.
fn q6_steps(s: u32, h: u32, t: u32) -> vec2<f32> {
    let sw = a_vec2_at(s + Q6_K_SCALES + 8u * h);
    let d = f16_lo(a_u32_at(s + Q6_K_D));
    return d * vec2<f32>(i8_at(sw, t), i8_at(sw, t + 4u));
}

// Four q6_K values of quarter pb (from ql's low nibbles) and four of
// quarter pb + 2 (high nibbles), with their steps.
fn q6_unit(ql: u32, qh: u32, pb: u32, steps: vec2<f32>) -> Unit {
    return Unit(q6_codes(ql, qh, 0u, 2u * pb) * steps.x, q6_codes(ql, qh, 4u, 2u * pb + 4u) * steps.y);
}

// q2_K (84 bytes): scales[16] (per 16 values, scale in the low nibble, min
// in the high one), qs[64], f16 d, f16 dmin; value = d * scale * code -
// dmin * min. q3_K (110 bytes): hmask[32], qs[64], 12 bytes of 6-bit
// scales, f16 d; value = d * (scale - 32) * (code - 4), the code's third
// bit in hmask. Their units are eight consecutive values (x_elem_linear):
// unit r (0..32) of a block is values 8r..8r+8, of sub-block r / 2, whose
// 2-bit fields are bits 2((r / 4) % 4).. of qs bytes 32(r / 16) + 8(r % 4)..
// and whose third bits are bit r / 4 of hmask bytes 8(r % 4)...

// The 2-bit fields of unit r of a q2_K/q3_K block whose qs start at byte
// qs, as the low nibbles of two words.
fn k2_words(qs: u32, r: u32) -> vec2<u32> {
    let q = a_vec2_at(qs + 32u * (r >> 4u) + 8u * (r & 3u));
    return (q >> vec2<u32>(2u * ((r >> 2u) & 3u))) & vec2<u32>(0x03030303u);
}

// Third bits `bit` of eight (q3_K hmask) bytes, as 4s in each byte.
fn k3_high(h: vec2<u32>, bit: u32) -> vec2<u32> {
    return ((h >> vec2<u32>(bit)) & vec2<u32>(0x01010101u)) << vec2<u32>(2u);
}

// Step and offset (d * scale, dmin * min) of the q2_K sub-blocks whose
// scale bytes are the low (x, y) and next (z, w) bytes of `sm`, of a block
// with super-scale and super-minimum dm.
fn q2_k_heads(sm: u32, dm: vec2<f32>) -> vec4<f32> {
    let b = vec4<u32>(sm, sm >> 4u, sm >> 8u, sm >> 12u) & vec4<u32>(15u);
    return vec4<f32>(b) * vec4<f32>(dm, dm);
}

fn dq_q2_k(s: u32, r: u32) -> Unit {
    let h = q2_k_heads(a_u32_at(s + Q2_K_SCALES + (r >> 1u)), unpack2x16float(a_u32_at(s + Q2_K_D)));
    let q = k2_words(s + Q2_K_QS, r);
    let step = vec4<f32>(h.x);
    let offset = vec4<f32>(-h.y);
    return Unit(fma(nib_lo(q.x), step, offset), fma(nib_lo(q.y), step, offset));
}

// Signed scale (-32..31) of q3_K sub-block `sub`, the 12 scale bytes held
// as three words.
fn q3_k_scale(w: vec3<u32>, sub: u32) -> f32 {
    let lo = (k4_byte(w, sub & 7u) >> (4u * (sub >> 3u))) & 15u;
    let hi = (k4_byte(w, 8u + (sub & 3u)) >> (2u * (sub >> 2u))) & 3u;
    return f32(i32(lo | (hi << 4u)) - 32);
}

// The steps (d times the scale) of q3_K sub-blocks `sub` and `sub` + 1 of
// the block at s.
fn q3_k_steps(s: u32, sub: u32) -> vec2<f32> {
    let sc = vec3<u32>(a_u32_at(s + Q3_K_SCALES), a_u32_at(s + Q3_K_SCALES + 4u), a_u32_at(s + Q3_K_SCALES + 8u));
    let d = f16_lo(a_u32_at(s + Q3_K_D));
    return d * vec2<f32>(q3_k_scale(sc, sub), q3_k_scale(sc, sub + 1u));
}

fn dq_q3_k(s: u32, r: u32) -> Unit {
    let q = k2_words(s + Q3_K_QS, r) | k3_high(a_vec2_at(s + Q3_K_HMASK + 8u * (r & 3u)), r >> 2u);
    let step = vec4<f32>(q3_k_steps(s, r >> 1u).x);
    let offset = -4.0 * step;
    return Unit(fma(nib_lo(q.x), step, offset), fma(nib_lo(q.y), step, offset));
}

// The mat-vec kernel reads a row four units (a "quad") at a time. A quad
// of q4_0, q4_1, q5_0, q5_1 or q8_0 is one block, of q4_K or q5_K one
// sub-block, of q2_K or q3_K 32 values (two sub-blocks) and of q6_K 16
// positions of one ql and qh row, so its scales
// are loaded and decoded once for all four units, and its code words are
// adjacent (a_vec4_at); a float quad is one unit (`float_quad`).
// A q4_0/q4_1/q4_K/q8_0 unit is a "chunk": its code words, and its (sub-)
// block's scale and offset in `head`. A chunk's values are head.x * r +
// head.y, where the codes' raw values r sit in the mantissa of 1.0 (r = 1 +
// code / 16 for nibbles, 1 + (code + 128) / 256 for signed bytes): a shift
// and a mask per value, where converting an integer costs a quarter-rate
// instruction. r is exact and in [1, 2), so sums of r * x lose nothing
// worth counting to the offset applied after them, once per chunk.
struct QChunk {
    head: vec2<f32>,
    q: vec2<u32>,
}

struct QChunkQuad {
    c0: QChunk,
    c1: QChunk,
    c2: QChunk,
    c3: QChunk,
}

struct UnitQuad {
    c0: Unit,
    c1: Unit,
    c2: Unit,
    c3: Unit,
}

// Unit j of quad q. A float row's quad is one unit (j = 0 only): its units
// are read by 8 invocations side by side already (x_elem_f32), and four of
// them at once would hold 32 words per row in registers.
fn quad_unit(q: u32, j: u32) -> u32 {
    if (ROWS_EXACT) {
        return 4u * q + j;
    }
    return q;
}

fn n_quads(k: u32) -> u32 {
    if (ROWS_EXACT) {
        return n_units(k) / 4u;
    }
    return n_units(k);
}

// Quad q of a float row: its one unit.
fn float_quad(row: u32, q: u32) -> UnitQuad {
    let zero = Unit(vec4<f32>(0.0), vec4<f32>(0.0));
    return UnitQuad(unit_w(row, q), zero, zero, zero);
}

// Four chunks of one head, with one code word each.
fn nibble_quad(head: vec2<f32>, q: vec4<u32>) -> QChunkQuad {
    return QChunkQuad(
        QChunk(head, vec2<u32>(q.x, 0u)),
        QChunk(head, vec2<u32>(q.y, 0u)),
        QChunk(head, vec2<u32>(q.z, 0u)),
        QChunk(head, vec2<u32>(q.w, 0u)),
    );
}

// Four chunks of one head, with two code words each.
fn pair_quad(head: vec2<f32>, lo: vec4<u32>, hi: vec4<u32>) -> QChunkQuad {
    return QChunkQuad(
        QChunk(head, lo.xy),
        QChunk(head, lo.zw),
        QChunk(head, hi.xy),
        QChunk(head, hi.zw),
    );
}

const MANT_ONE: u32 = 0x3f800000u;

// Raw values of the low or high nibbles of w's bytes, in byte order.
fn nib_lo_raw(w: u32) -> vec4<f32> {
    let v = vec4<u32>(w << 19u, w << 11u, w << 3u, w >> 5u);
    return bitcast<vec4<f32>>((v & vec4<u32>(0x00780000u)) | vec4<u32>(MANT_ONE));
}

fn nib_hi_raw(w: u32) -> vec4<f32> {
    let v = vec4<u32>(w << 15u, w << 7u, w >> 1u, w >> 9u);
    return bitcast<vec4<f32>>((v & vec4<u32>(0x00780000u)) | vec4<u32>(MANT_ONE));
}

// Raw values of w's bytes, already offset by 128 (signed codes xor 0x80).
fn byte_raw(w: u32) -> vec4<f32> {
    let v = vec4<u32>(w << 15u, w << 7u, w >> 1u, w >> 9u);
    return bitcast<vec4<f32>>((v & vec4<u32>(0x007f8000u)) | vec4<u32>(MANT_ONE));
}

// The q4_0 block at s; unit w is code word w: value = d * (code - 8) =
// 16d * r - 24d.
fn q4_0_quad(s: u32) -> QChunkQuad {
    let d = f16_lo(a_u32_at(s + Q4_0_D));
    return nibble_quad(vec2<f32>(16.0 * d, -24.0 * d), a_vec4_at(s + Q4_0_QS));
}

// q4_1: value = d * code + m = 16d * r + (m - 16d).
fn q4_1_quad(s: u32) -> QChunkQuad {
    let dm = unpack2x16float(a_u32_at(s + Q4_1_D));
    return nibble_quad(vec2<f32>(16.0 * dm.x, dm.y - 16.0 * dm.x), a_vec4_at(s + Q4_1_QS));
}

// The q5_0 block at s: value = d * (code - 16).
fn q5_0_quad(s: u32) -> UnitQuad {
    let d = f16_lo(a_u32_at(s + Q5_0_D));
    return q5_quad(a_u32_at(s + Q5_0_QH), a_vec4_at(s + Q5_0_QS), vec2<f32>(d, -16.0 * d));
}

// q5_1: value = d * code + m.
fn q5_1_quad(s: u32) -> UnitQuad {
    return q5_quad(a_u32_at(s + Q5_1_QH), a_vec4_at(s + Q5_1_QS), unpack2x16float(a_u32_at(s + Q5_1_D)));
}

fn q5_quad(qh: u32, q: vec4<u32>, dm: vec2<f32>) -> UnitQuad {
    return UnitQuad(q5_unit(qh, q.x, 0u, dm), q5_unit(qh, q.y, 1u, dm), q5_unit(qh, q.z, 2u, dm), q5_unit(qh, q.w, 3u, dm));
}

// Sub-block `sub` of the q5_K block at s: q4_K's codes (from byte 48) and
// bit `sub` of the 32 qh bytes.
fn q5_k_quad(s: u32, sub: u32) -> UnitQuad {
    let h = k_sub_head(s, sub);
    let at = s + Q5_K_QS + 32u * (sub >> 1u);
    let sh = vec4<u32>(4u * (sub & 1u));
    let lo0 = a_vec4_at(at) >> sh;
    let lo1 = a_vec4_at(at + 16u) >> sh;
    let hi0 = a_vec4_at(s + Q5_K_QH) >> vec4<u32>(sub);
    let hi1 = a_vec4_at(s + Q5_K_QH + 16u) >> vec4<u32>(sub);
    return UnitQuad(
        q5_k_unit(lo0.xy, hi0.xy, h),
        q5_k_unit(lo0.zw, hi0.zw, h),
        q5_k_unit(lo1.xy, hi1.xy, h),
        q5_k_unit(lo1.zw, hi1.zw, h),
    );
}

// Units 4t..4t+4 (t = 0..8) of the q6_K block at s: 16 positions of half
// h = t / 4, quarters pb and pb + 2, with one step each.
fn q6_k_quad(s: u32, t: u32) -> UnitQuad {
    let h = t >> 2u;
    let pb = (t >> 1u) & 1u;
    let l = 16u * (t & 1u);
    let ql = a_vec4_at(s + Q6_K_QL + 64u * h + 32u * pb + l);
    let qh = a_vec4_at(s + Q6_K_QH + 32u * h + l);
    let st = q6_steps(s, h, 2u * pb + (t & 1u));
    return UnitQuad(q6_unit(ql.x, qh.x, pb, st), q6_unit(ql.y, qh.y, pb, st), q6_unit(ql.z, qh.z, pb, st), q6_unit(ql.w, qh.w, pb, st));
}

fn q4_unit(ch: QChunk) -> Unit {
    return Unit(nib_lo_raw(ch.q.x), nib_hi_raw(ch.q.x));
}

// The q8_0 block at s; unit w is values 8w..8w+8: value = d * code =
// 256d * r - 384d.
fn q8_0_quad(s: u32) -> QChunkQuad {
    let d = f16_lo(a_u32_at(s + Q8_0_D));
    let flip = vec4<u32>(0x80808080u);
    return pair_quad(vec2<f32>(256.0 * d, -384.0 * d), a_vec4_at(s + Q8_0_QS) ^ flip, a_vec4_at(s + Q8_0_QS + 16u) ^ flip);
}

// Sub-block `sub` of the q4_K block at s (units 4 sub..4 sub + 4, see
// k_sub): its 32 codes are the low (even sub) or high (odd) nibbles of 32
// bytes. value = step * code - offset = 16 step * r - (16 step + offset).
fn q4_k_quad(s: u32, sub: u32) -> QChunkQuad {
    let h = k_sub_head(s, sub);
    let at = s + Q4_K_QS + 32u * (sub >> 1u);
    let sh = vec4<u32>(4u * (sub & 1u));
    return pair_quad(vec2<f32>(16.0 * h.x, -16.0 * h.x - h.y), a_vec4_at(at) >> sh, a_vec4_at(at + 16u) >> sh);
}

// Four chunks with two code words each, the first two of head h0 and the
// others of h1 (32 values of two 16-value sub-blocks).
fn halves_quad(h0: vec2<f32>, h1: vec2<f32>, lo: vec4<u32>, hi: vec4<u32>) -> QChunkQuad {
    return QChunkQuad(QChunk(h0, lo.xy), QChunk(h0, lo.zw), QChunk(h1, hi.xy), QChunk(h1, hi.zw));
}

// The 2-bit fields of values 32t..32t+32 (t = 0..8) of a q2_K/q3_K block
// whose qs start at byte qs, as the low nibbles of 8 words (lo: the first
// 16 values).
fn k2_quad_words(qs: u32, t: u32) -> array<vec4<u32>, 2> {
    let at = qs + 32u * (t >> 2u);
    let sh = vec4<u32>(2u * (t & 3u));
    let m = vec4<u32>(0x03030303u);
    return array<vec4<u32>, 2>((a_vec4_at(at) >> sh) & m, (a_vec4_at(at + 16u) >> sh) & m);
}

// Units 4t..4t+4 (values 32t..32t+32, sub-blocks 2t and 2t + 1) of the
// q2_K block at s, in q4_K's chunk form (codes as nibbles): value = step *
// code - offset = 16 step * r - (16 step + offset).
fn q2_k_quad(s: u32, t: u32) -> QChunkQuad {
    let h = q2_k_heads(a_u32_at(s + Q2_K_SCALES + 2u * t), unpack2x16float(a_u32_at(s + Q2_K_D)));
    let q = k2_quad_words(s + Q2_K_QS, t);
    return halves_quad(
        vec2<f32>(16.0 * h.x, -16.0 * h.x - h.y),
        vec2<f32>(16.0 * h.z, -16.0 * h.z - h.w),
        q[0],
        q[1],
    );
}

// The same units of the q3_K block at s, codes 0..8 (the third bit from
// hmask) as nibbles: value = step * (code - 4) = 16 step * r - 20 step.
fn q3_k_quad(s: u32, t: u32) -> QChunkQuad {
    let q = k2_quad_words(s + Q3_K_QS, t);
    let h0 = a_vec4_at(s + Q3_K_HMASK);
    let h1 = a_vec4_at(s + Q3_K_HMASK + 16u);
    let lo = q[0] | vec4<u32>(k3_high(h0.xy, t), k3_high(h0.zw, t));
    let hi = q[1] | vec4<u32>(k3_high(h1.xy, t), k3_high(h1.zw, t));
    let st = q3_k_steps(s, 2u * t);
    return halves_quad(vec2<f32>(16.0 * st.x, -20.0 * st.x), vec2<f32>(16.0 * st.y, -20.0 * st.y), lo, hi);
}

fn q4_k_unit(ch: QChunk) -> Unit {
    return Unit(nib_lo_raw(ch.q.x), nib_lo_raw(ch.q.y));
}

fn q8_0_unit(ch: QChunk) -> Unit {
    return Unit(byte_raw(ch.q.x), byte_raw(ch.q.y));
}

fn QChunk_head(ch: QChunk) -> vec2<f32> {
    return ch.head;
}

// The other types' chunks are their units' values.
fn plain_unit(u: Unit) -> Unit {
    return u;
}

fn Unit_head(u: Unit) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

// iq4_nl (18 bytes): f16 d, 16 bytes of codes laid out as q4_0's; value =
// d * the table value of the code (IQ4_TABLE: the 16 signed bytes).
fn iq4_values(codes: vec4<u32>) -> vec4<f32> {
    let t = bitcast<vec4<i32>>(vec4<u32>(IQ4_TABLE[codes.x >> 2u], IQ4_TABLE[codes.y >> 2u], IQ4_TABLE[codes.z >> 2u], IQ4_TABLE[codes.w >> 2u]));
    return vec4<f32>(vec4<i32>(extractBits(t.x, 8u * (codes.x & 3u), 8u), extractBits(t.y, 8u * (codes.y & 3u), 8u), extractBits(t.z, 8u * (codes.z & 3u), 8u), extractBits(t.w, 8u * (codes.w & 3u), 8u)));
}

// Eight iq4 values of code word q (values 4w..4w+4 and 16+4w..16+4w+4 of
// a 32-value group) at `step`.
fn iq4_unit(q: u32, step: f32) -> Unit {
    return Unit(iq4_values(unpack4xU8(q & 0x0f0f0f0fu)) * step, iq4_values(unpack4xU8((q >> 4u) & 0x0f0f0f0fu)) * step);
}

fn dq_iq4_nl(s: u32, w: u32) -> Unit {
    return iq4_unit(a_u32_at(s + IQ4_NL_QS + 4u * w), f16_lo(a_u32_at(s + IQ4_NL_D)));
}

fn iq4_nl_quad(s: u32) -> UnitQuad {
    let d = f16_lo(a_u32_at(s + IQ4_NL_D));
    let q = a_vec4_at(s + IQ4_NL_QS);
    return UnitQuad(iq4_unit(q.x, d), iq4_unit(q.y, d), iq4_unit(q.z, d), iq4_unit(q.w, d));
}

// iq4_xs (136 bytes): f16 d, u16 scales_h, scales_l[4], qs[128]: eight
// iq4_nl groups without their scales; group `sub` steps d * (scale - 32),
// its 6-bit scale's low bits nibble `sub` of scales_l, its top bits bits
// 2 sub.. of scales_h.
fn iq4_xs_step(s: u32, sub: u32) -> f32 {
    let d = f16_lo(a_u32_at(s + IQ4_XS_D));
    let high = (a_u32_at(s + IQ4_XS_SCALES_H) >> (2u * sub)) & 3u;
    let low = (a_u32_at(s + IQ4_XS_SCALES_L) >> (4u * sub)) & 15u;
    return d * (f32(low | (high << 4u)) - 32.0);
}

// Unit r (0..32) of the block at s: code word r & 3 of group r >> 2.
fn dq_iq4_xs(s: u32, r: u32) -> Unit {
    let sub = r >> 2u;
    return iq4_unit(a_u32_at(s + IQ4_XS_QS + 16u * sub + 4u * (r & 3u)), iq4_xs_step(s, sub));
}

fn iq4_xs_quad(s: u32, sub: u32) -> UnitQuad {
    let step = iq4_xs_step(s, sub);
    let q = a_vec4_at(s + IQ4_XS_QS + 16u * sub);
    return UnitQuad(iq4_unit(q.x, step), iq4_unit(q.y, step), iq4_unit(q.z, step), iq4_unit(q.w, step));
}
