// mul_mat, matrix times matrix on cooperative matrices (tensor cores): a
// workgroup of eight 32-wide subgroups computes a 128 x TN tile of d (TN
// 128, or 64 for products of few tiles, which then fill more of the GPU),
// stepping over K eight 8-value units (64 values) at a time (the last step
// of a row of an odd number of four-unit groups is half zeros). Each step
// loads its weights and activations into registers, then decodes and
// stores them as f16 tiles in workgroup memory; each subgroup multiplies a
// 32 x TN / 2 block as 2 x TN / 32 16x16x16 products with f32
// accumulators. Each accumulator goes to d through a 16 x 16 scratch of its
// subgroup, so partial tiles and any strides store like mul_mm's. Every
// coopLoad/coopStore stride is a literal (naga 30's SPIR-V writer requires
// it); cooperative operations sit in uniform control flow.
// `epilogue(sum, byte)` (from the encoder) turns a sum into the stored
// value: the sum, or (ADDS) the sum plus a residual (a fused `add`).
// With CAST, `b` holds the activations as mul_mm_cast.wgsl wrote them (f16,
// each column's units in order, from byte p.b.offset; p.b keeps the
// activations' shape): a unit is one 16-byte load. Without, a column's
// values load as vec4s where aligned (p.y.w), else one by one, and are
// converted here.
// p.x: row tiles, column tiles, a's batch divisors r2 and r3.

const TM: u32 = 128u;
// Units of a step each invocation loads of its activation column, and the
// invocations that share a column.
const XU: u32 = TN / 32u;
const XLANES: u32 = 8u / XU;
// Row stride of the f16 tiles: 64 values and 8 of padding (144 bytes, a
// multiple of 16 as cooperative loads want).
const SK: u32 = 72u;

// ta[m * SK + t]: weight t of the step (unit t / 8, value t % 8) of row m;
// tb[n * SK + t]: the activation of column n at the same row position.
var<workgroup> ta: array<f16, TM * SK>;
var<workgroup> tb: array<f16, TN * SK>;
// One finished 16 x 16 product per subgroup, column-major.
var<workgroup> tc: array<f32, 8u * 256u>;

// The value the epilogue adds at row mm, column nn of d: a residual's (0
// without one, or where nothing is stored).
fn addend(mm: u32, nn: u32, i2: u32, i3: u32, row_ok: bool) -> f32 {
    if (!ADDS || !row_ok || nn >= p.b.ne.y) {
        return 0.0;
    }
    return epilogue(0.0, addr(p.d, vec4<u32>(mm, nn, i2, i3)));
}

fn store_at(v: f32, mm: u32, nn: u32, i2: u32, i3: u32, row_ok: bool) {
    if (row_ok && nn < p.b.ne.y) {
        store_d(addr(p.d, vec4<u32>(mm, nn, i2, i3)), v);
    }
}

// Stores this subgroup's product `c`, rows m..m+16 and columns n..n+16 of
// d, those that exist, through its scratch: invocation s stores row
// m + s % 16 of columns n + s / 16 + 2j (j < 8). What the epilogue adds
// is loaded first, all eight values in flight at once (one after another,
// each load's latency added to the store's).
fn store_block(c: coop_mat16x16<f32, C>, ids: Ids, m: u32, n: u32, i2: u32, i3: u32, live: bool) {
    let base = 256u * ids.sgid + ids.sid;
    let mm = m + ids.sid % 16u;
    let n0 = n + ids.sid / 16u;
    let ok = live && mm < p.a.ne.y;
    let lo = vec4<f32>(addend(mm, n0, i2, i3, ok), addend(mm, n0 + 2u, i2, i3, ok), addend(mm, n0 + 4u, i2, i3, ok), addend(mm, n0 + 6u, i2, i3, ok));
    let hi = vec4<f32>(addend(mm, n0 + 8u, i2, i3, ok), addend(mm, n0 + 10u, i2, i3, ok), addend(mm, n0 + 12u, i2, i3, ok), addend(mm, n0 + 14u, i2, i3, ok));
    coopStore(c, &tc[256u * ids.sgid], 16u);
    workgroupBarrier();
    store_at(tc[base] + lo.x, mm, n0, i2, i3, ok);
    store_at(tc[base + 32u] + lo.y, mm, n0 + 2u, i2, i3, ok);
    store_at(tc[base + 64u] + lo.z, mm, n0 + 4u, i2, i3, ok);
    store_at(tc[base + 96u] + lo.w, mm, n0 + 6u, i2, i3, ok);
    store_at(tc[base + 128u] + hi.x, mm, n0 + 8u, i2, i3, ok);
    store_at(tc[base + 160u] + hi.y, mm, n0 + 10u, i2, i3, ok);
    store_at(tc[base + 192u] + hi.z, mm, n0 + 12u, i2, i3, ok);
    store_at(tc[base + 224u] + hi.w, mm, n0 + 14u, i2, i3, ok);
    workgroupBarrier();
}

// One invocation's share of a step, from its loads to its stores into the
// tiles: four 8-value units of one weight row (a block type's quad as
// loaded, or a float row's four units) and its activations (8 XU values).
struct StepRegs {
    quad: Quad,
    units: UnitQuad,
    x0: vec4<f32>,
    x1: vec4<f32>,
    x2: vec4<f32>,
    x3: vec4<f32>,
    x4: vec4<f32>,
    x5: vec4<f32>,
    x6: vec4<f32>,
    x7: vec4<f32>,
    // CAST: the four units' f16 activations, two per word.
    h0: vec4<u32>,
    h1: vec4<u32>,
    h2: vec4<u32>,
    h3: vec4<u32>,
}

// Where an invocation loads from and stores to: weight row `arow` (tile
// row `ma`), units 4 * half.. of each step; activation column `xcol` (tile
// column `cn`), units XU * xpart.. of each step (cast or `wide`), else
// position `kk` of tile columns cb, cb + 4, ... (scalar loads).
struct Lanes {
    arow: u32,
    ma: u32,
    half: u32,
    units: u32,
    xcol: u32,
    cn: u32,
    xpart: u32,
    wide: bool,
    kk: u32,
    cb: u32,
    bbase: u32,
    n0: u32,
}

// The cast activations of unit `u` (0 past the row's units).
fn x_cast_unit(l: Lanes, u: u32) -> vec4<u32> {
    let v = b_quad(l.xcol + 16u * min(u, l.units - 1u));
    return select(vec4<u32>(0u), v, u < l.units);
}

// Activations of `u` (0 past the row's units) at elements i..i+4 of the unit.
fn x_quad_at(l: Lanes, u: u32, i: u32) -> vec4<f32> {
    let k = x_elem(min(u, l.units - 1u), i);
    let v = bitcast<vec4<f32>>(b_quad(l.xcol + 4u * k));
    return select(vec4<f32>(0.0), v, u < l.units);
}

fn x_scalar(l: Lanes, st: u32, j: u32) -> f32 {
    let ub = 8u * st + (l.kk >> 3u);
    let k = x_elem(min(ub, l.units - 1u), l.kk & 7u);
    let n = min(l.n0 + l.cb + 4u * j, p.b.ne.y - 1u);
    let v = load_b(l.bbase + k * p.b.nb.x + n * p.b.nb.y);
    return select(0.0, v, ub < l.units && k < p.b.ne.x);
}

fn x_scalars(l: Lanes, st: u32, j: u32) -> vec4<f32> {
    return vec4<f32>(x_scalar(l, st, j), x_scalar(l, st, j + 1u), x_scalar(l, st, j + 2u), x_scalar(l, st, j + 3u));
}

fn fetch(l: Lanes, st: u32) -> StepRegs {
    var r: StepRegs;
    let u = 8u * st + 4u * l.half;
    if (ROWS_EXACT) {
        r.quad = load_quad(l.arow, min(u, l.units - 1u) / 4u);
    } else {
        let last = l.units - 1u;
        r.units = UnitQuad(unit_w(l.arow, min(u, last)), unit_w(l.arow, min(u + 1u, last)), unit_w(l.arow, min(u + 2u, last)), unit_w(l.arow, min(u + 3u, last)));
    }
    let ux = 8u * st + XU * l.xpart;
    if (CAST) {
        r.h0 = x_cast_unit(l, ux);
        r.h1 = x_cast_unit(l, ux + 1u);
        if (XU == 4u) {
            r.h2 = x_cast_unit(l, ux + 2u);
            r.h3 = x_cast_unit(l, ux + 3u);
        }
    } else if (X_QUADS && l.wide) {
        r.x0 = x_quad_at(l, ux, 0u);
        r.x1 = x_quad_at(l, ux, 4u);
        r.x2 = x_quad_at(l, ux + 1u, 0u);
        r.x3 = x_quad_at(l, ux + 1u, 4u);
        if (XU == 4u) {
            r.x4 = x_quad_at(l, ux + 2u, 0u);
            r.x5 = x_quad_at(l, ux + 2u, 4u);
            r.x6 = x_quad_at(l, ux + 3u, 0u);
            r.x7 = x_quad_at(l, ux + 3u, 4u);
        }
    } else {
        r.x0 = x_scalars(l, st, 0u);
        r.x1 = x_scalars(l, st, 4u);
        r.x2 = x_scalars(l, st, 8u);
        r.x3 = x_scalars(l, st, 12u);
        if (TN == 128u) {
            r.x4 = x_scalars(l, st, 16u);
            r.x5 = x_scalars(l, st, 20u);
            r.x6 = x_scalars(l, st, 24u);
            r.x7 = x_scalars(l, st, 28u);
        }
    }
    return r;
}

// A chunk's values: head.x * raw + head.y.
fn chunk_values(ch: Chunk) -> Unit {
    let h = chunk_head(ch);
    let r = chunk_unit(ch);
    return Unit(fma(r[0], vec4<f32>(h.x), vec4<f32>(h.y)), fma(r[1], vec4<f32>(h.x), vec4<f32>(h.y)));
}

fn put_a(at: u32, w: Unit, live: bool) {
    let z = vec4<f32>(0.0);
    let lo = vec4<f16>(select(z, w[0], live));
    let hi = vec4<f16>(select(z, w[1], live));
    ta[at] = lo.x;
    ta[at + 1u] = lo.y;
    ta[at + 2u] = lo.z;
    ta[at + 3u] = lo.w;
    ta[at + 4u] = hi.x;
    ta[at + 5u] = hi.y;
    ta[at + 6u] = hi.z;
    ta[at + 7u] = hi.w;
}

fn put_b4(at: u32, v: vec4<f32>) {
    let h = vec4<f16>(v);
    tb[at] = h.x;
    tb[at + 1u] = h.y;
    tb[at + 2u] = h.z;
    tb[at + 3u] = h.w;
}

// Eight f16 activations, two per word. (naga 30 has no bitcast from u32
// to vec2<f16>; widening and narrowing again is exact, and compilers
// drop the pair.)
fn put_b_words(at: u32, w: vec4<u32>) {
    let h0 = vec2<f16>(unpack2x16float(w.x));
    let h1 = vec2<f16>(unpack2x16float(w.y));
    let h2 = vec2<f16>(unpack2x16float(w.z));
    let h3 = vec2<f16>(unpack2x16float(w.w));
    tb[at] = h0.x;
    tb[at + 1u] = h0.y;
    tb[at + 2u] = h1.x;
    tb[at + 3u] = h1.y;
    tb[at + 4u] = h2.x;
    tb[at + 5u] = h2.y;
    tb[at + 6u] = h3.x;
    tb[at + 7u] = h3.y;
}

// Column-strided scalar positions: values j..j+4 of the 32 go to tile
// columns cb + 4j.., position kk.
fn put_b_scalars(l: Lanes, j: u32, v: vec4<f32>) {
    let at = (l.cb + 4u * j) * SK + l.kk;
    tb[at] = f16(v.x);
    tb[at + 4u * SK] = f16(v.y);
    tb[at + 8u * SK] = f16(v.z);
    tb[at + 12u * SK] = f16(v.w);
}

fn store_step(l: Lanes, r: StepRegs, st: u32) {
    let u = 8u * st + 4u * l.half;
    let at = l.ma * SK + 32u * l.half;
    if (ROWS_EXACT) {
        put_a(at, chunk_values(r.quad.c0), u < l.units);
        put_a(at + 8u, chunk_values(r.quad.c1), u + 1u < l.units);
        put_a(at + 16u, chunk_values(r.quad.c2), u + 2u < l.units);
        put_a(at + 24u, chunk_values(r.quad.c3), u + 3u < l.units);
    } else {
        put_a(at, r.units.c0, u < l.units);
        put_a(at + 8u, r.units.c1, u + 1u < l.units);
        put_a(at + 16u, r.units.c2, u + 2u < l.units);
        put_a(at + 24u, r.units.c3, u + 3u < l.units);
    }
    let bt = l.cn * SK + 8u * XU * l.xpart;
    if (CAST) {
        put_b_words(bt, r.h0);
        put_b_words(bt + 8u, r.h1);
        if (XU == 4u) {
            put_b_words(bt + 16u, r.h2);
            put_b_words(bt + 24u, r.h3);
        }
    } else if (X_QUADS && l.wide) {
        put_b4(bt, r.x0);
        put_b4(bt + 4u, r.x1);
        put_b4(bt + 8u, r.x2);
        put_b4(bt + 12u, r.x3);
        if (XU == 4u) {
            put_b4(bt + 16u, r.x4);
            put_b4(bt + 20u, r.x5);
            put_b4(bt + 24u, r.x6);
            put_b4(bt + 28u, r.x7);
        }
    } else {
        put_b_scalars(l, 0u, r.x0);
        put_b_scalars(l, 4u, r.x1);
        put_b_scalars(l, 8u, r.x2);
        put_b_scalars(l, 12u, r.x3);
        if (TN == 128u) {
            put_b_scalars(l, 16u, r.x4);
            put_b_scalars(l, 20u, r.x5);
            put_b_scalars(l, 24u, r.x6);
            put_b_scalars(l, 28u, r.x7);
        }
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    // A workgroup past the tiles (the grid rounds up) computes tile 0 and
    // stores nothing: cooperative operations need uniform control flow.
    let flat = group_index(ids.wid, ids.nwg);
    let live = flat < n_tiles();
    let origin = tile_origin(select(0u, flat, live));
    let m0 = origin.x;
    let n0 = origin.y;
    let i2 = origin.z;
    let i3 = origin.w;
    let lid = ids.lid;

    // Invocation lid loads units 4 * (lid & 1).. of each step of weight row
    // lid >> 1, and units XU * (lid % XLANES).. of activation column
    // lid / XLANES (cast or vec4 loads); or (scalar loads) position lid & 63
    // of columns (lid >> 6) + 4j. Rows and columns past the end read the
    // last one and are not stored.
    var l: Lanes;
    l.ma = lid >> 1u;
    l.half = lid & 1u;
    l.arow = addr(p.a, vec4<u32>(0u, min(m0 + l.ma, p.a.ne.y - 1u), i2 / p.x.z, i3 / p.x.w));
    l.units = n_units(p.b.ne.x);
    l.bbase = addr(p.b, vec4<u32>(0u, 0u, i2, i3));
    l.cn = lid / XLANES;
    l.xpart = lid % XLANES;
    let col = min(n0 + l.cn, p.b.ne.y - 1u);
    if (CAST) {
        l.xcol = p.b.offset + 16u * l.units * ((i3 * p.b.ne.z + i2) * p.b.ne.y + col);
    } else {
        l.xcol = l.bbase + col * p.b.nb.y;
    }
    l.wide = p.y.w != 0u;
    l.kk = lid & 63u;
    l.cb = lid >> 6u;
    l.n0 = n0;

    // This subgroup's 32 x TN / 2 block (c*2 and c*3 only when TN is 128).
    let r0 = 32u * (ids.sgid & 3u);
    let c0 = TN / 2u * (ids.sgid >> 2u);
    var c00: coop_mat16x16<f32, C>;
    var c01: coop_mat16x16<f32, C>;
    var c02: coop_mat16x16<f32, C>;
    var c03: coop_mat16x16<f32, C>;
    var c10: coop_mat16x16<f32, C>;
    var c11: coop_mat16x16<f32, C>;
    var c12: coop_mat16x16<f32, C>;
    var c13: coop_mat16x16<f32, C>;

    let steps = (l.units + 7u) / 8u;
    for (var st = 0u; st < steps; st++) {
        store_step(l, fetch(l, st), st);
        workgroupBarrier();
        for (var h = 0u; h < 64u; h += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&ta[r0 * SK + h], 72u);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&ta[(r0 + 16u) * SK + h], 72u);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&tb[c0 * SK + h], 72u);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&tb[(c0 + 16u) * SK + h], 72u);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            if (TN == 128u) {
                let b2 = coopLoad<coop_mat16x16<f16, B>>(&tb[(c0 + 32u) * SK + h], 72u);
                let b3 = coopLoad<coop_mat16x16<f16, B>>(&tb[(c0 + 48u) * SK + h], 72u);
                c02 = coopMultiplyAdd(a0, b2, c02);
                c03 = coopMultiplyAdd(a0, b3, c03);
                c12 = coopMultiplyAdd(a1, b2, c12);
                c13 = coopMultiplyAdd(a1, b3, c13);
            }
        }
        workgroupBarrier();
    }

    let m = m0 + r0;
    let n = n0 + c0;
    store_block(c00, ids, m, n, i2, i3, live);
    store_block(c01, ids, m, n + 16u, i2, i3, live);
    store_block(c10, ids, m + 16u, n, i2, i3, live);
    store_block(c11, ids, m + 16u, n + 16u, i2, i3, live);
    if (TN == 128u) {
        store_block(c02, ids, m, n + 32u, i2, i3, live);
        store_block(c03, ids, m, n + 48u, i2, i3, live);
        store_block(c12, ids, m + 16u, n + 32u, i2, i3, live);
        store_block(c13, ids, m + 16u, n + 48u, i2, i3, live);
    }
}
