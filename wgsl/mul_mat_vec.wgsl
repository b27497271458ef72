// mul_mat, matrix times vector (decode) and small batches:
// d[m, n, i2, i3] = a[:, m] . b[:, n]. A workgroup computes 4 * GROUPS rows
// of COLS columns: its invocations split into GROUPS row groups of RG_SIZE,
// each group four rows. Each invocation walks its rows' quads (four 8-value
// units: a block of q4_0, a sub-block of q4_K; one unit of a float row)
// with stride RG_SIZE and dots each row's units with the units'
// activations of every column; the sums of all rows and columns are then
// reduced together per group, one barrier step for all of them
// (mul_mat_vec_sums_*.wgsl). Consecutive invocations read consecutive
// quads of a row. The row groups share the columns' activations through
// the cache (and col_stats, which all invocations compute together).
// The type-specific part is `load_quad`/`chunk_unit`/`x_elem` (quant.wgsl):
// a unit's values are `head.x * raw + head.y`, so the kernel sums raw * x
// and x over a unit and applies the scale and offset once.
// p.x: workgroups along the rows, column groups (of COLS), a's batch divisors r2
// and r3 (broadcast). COLS (1, 2 or 4) comes from the encoder, and so does
// `epilogue(sum, byte)`, which turns a row's sum into the stored value: the
// sum itself, or the sum plus a residual (a fused `add`), with
// `rows_ahead(m)` and `rows_stored(values, m)` called for each four rows
// before the product and with their stored values (a norm run ahead of
// the next mat-vec); and `col_stats(column)` with `x_value(byte, k, stats)` (and `x_quad` for
// four values from a 16-byte aligned byte), which give the
// activation multiplied: b's value itself, or (a fused norm x weight) that
// value normalised with its column's mean and scale and multiplied by the
// norm's weight, or (a fused silu x up) silu of it times the up value.
// A prologue with DEFER scales the row sums instead, after the reduction:
// `deferred_part()` is each invocation's share of what the scale needs,
// reduced with the sums, and `deferred_scale(total)` the factor.
// `a_batch(i2, i3)` picks a's matrix for the destination's batch: ggml's
// broadcast, or for mul_mat_id the expert of slot i2 of token i3.

// Partial sums per invocation: one vec4 per column, and the deferred part.
const PARTS: u32 = COLS + u32(DEFER);
// Invocations per row group (a multiple of the subgroup size: the encoder
// checks).
const RG_SIZE: u32 = WG / GROUPS;

fn x_at(xrow: u32, u: u32, i: u32, st: vec2<f32>) -> f32 {
    let k = x_elem(u, i);
    let v = x_value(xrow + k * p.b.nb.x, k, st);
    // Block types cover the row exactly; float rows are padded to 64.
    if (ROWS_EXACT) {
        return v;
    }
    return select(0.0, v, k < p.b.ne.x);
}

fn x_unit(xrow: u32, u: u32, st: vec2<f32>) -> Unit {
    // Activations cast ahead (X_CAST): unit u is eight f16 at byte 16u of
    // the column, so a lane loads 16 bytes per unit where it loaded 32.
    if (X_CAST) {
        let h = b_quad(xrow + 16u * u);
        return Unit(
            vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y)),
            vec4<f32>(unpack2x16float(h.z), unpack2x16float(h.w)),
        );
    }
    // Weights 0..4 and 4..8 of a quantized unit have consecutive elements;
    // when the encoder found the activations 16-byte aligned (p.y.w), each
    // four are one vec4 load instead of four.
    if (X_QUADS && p.y.w != 0u) {
        let k0 = x_elem(u, 0u);
        let k1 = x_elem(u, 4u);
        return Unit(x_quad(xrow + 4u * k0, k0, st), x_quad(xrow + 4u * k1, k1, st));
    }
    return Unit(
        vec4<f32>(x_at(xrow, u, 0u, st), x_at(xrow, u, 1u, st), x_at(xrow, u, 2u, st), x_at(xrow, u, 3u, st)),
        vec4<f32>(x_at(xrow, u, 4u, st), x_at(xrow, u, 5u, st), x_at(xrow, u, 6u, st), x_at(xrow, u, 7u, st)),
    );
}

// Dot products of four rows' raw units with one column's activations.
fn dot4(w0: Unit, w1: Unit, w2: Unit, w3: Unit, x: Unit) -> vec4<f32> {
    return vec4<f32>(dot_unit(w0, x), dot_unit(w1, x), dot_unit(w2, x), dot_unit(w3, x));
}

fn unit_sum(x: Unit) -> f32 {
    let s = x[0] + x[1];
    return s.x + s.y + s.z + s.w;
}

// Unit u of four rows.
struct Rows {
    c0: Chunk,
    c1: Chunk,
    c2: Chunk,
    c3: Chunk,
}

// Quad q of four rows.
struct Quads {
    r0: Quad,
    r1: Quad,
    r2: Quad,
    r3: Quad,
}

fn load_quads(r: vec4<u32>, q: u32) -> Quads {
    return Quads(load_quad(r.x, q), load_quad(r.y, q), load_quad(r.z, q), load_quad(r.w, q));
}

// Four rows' unit u dotted with one column's activations: Σ raw * x per
// row, scaled by the heads, plus their offsets times Σ x.
fn rows_dot(g: Rows, u: u32, xcol: u32, st: vec2<f32>) -> vec4<f32> {
    let x = x_unit(xcol, u, st);
    let raw = dot4(chunk_unit(g.c0), chunk_unit(g.c1), chunk_unit(g.c2), chunk_unit(g.c3), x);
    let h0 = chunk_head(g.c0);
    let h1 = chunk_head(g.c1);
    let h2 = chunk_head(g.c2);
    let h3 = chunk_head(g.c3);
    let scale = vec4<f32>(h0.x, h1.x, h2.x, h3.x);
    if (HAS_OFFSET) {
        let offset = vec4<f32>(h0.y, h1.y, h2.y, h3.y);
        return fma(scale, raw, offset * unit_sum(x));
    }
    return scale * raw;
}

// Four rows' unit u dotted with each column's activations (column c of the
// result; those past COLS stay zero). xs: the columns' byte addresses, st:
// their col_stats.
fn cols_dot(g: Rows, u: u32, xs: vec4<u32>, st: mat4x2<f32>) -> mat4x4<f32> {
    var t = mat4x4<f32>();
    t[0] = rows_dot(g, u, xs.x, st[0]);
    if (COLS > 1u) {
        t[1] = rows_dot(g, u, xs.y, st[1]);
    }
    if (COLS > 2u) {
        t[2] = rows_dot(g, u, xs.z, st[2]);
        t[3] = rows_dot(g, u, xs.w, st[3]);
    }
    return t;
}

// Stores rows m..m+4 of column n (those that exist).
fn store4(t: vec4<f32>, m: u32, n: u32, i2: u32, i3: u32) {
    if (n >= p.b.ne.y) {
        return;
    }
    let at = addr(p.d, vec4<u32>(m, n, i2, i3));
    let rows = p.a.ne.y;
    var v = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        if (m + i < rows) {
            let at_i = at + i * p.d.nb.x;
            v[i] = epilogue(t[i], at_i);
            store_d(at_i, v[i]);
        }
    }
    rows_stored(v, m);
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let g = group_index(ids.wid, ids.nwg);
    let groups_m = p.x.x;
    let groups_n = p.x.y;
    if (g >= groups_m * groups_n * p.b.ne.z * p.b.ne.w) {
        return;
    }
    let group = ids.lid / RG_SIZE;
    let lane = ids.lid % RG_SIZE;
    let m0 = (g % groups_m) * (4u * GROUPS) + 4u * group;
    let rest = g / groups_m;
    let n0 = (rest % groups_n) * COLS;
    let i2 = (rest / groups_n) % p.b.ne.z;
    let i3 = rest / groups_n / p.b.ne.z;
    rows_ahead(m0);

    // Rows and columns past the end read the last one; their sums are not stored.
    let last = p.a.ne.y - 1u;
    let ia = vec4<u32>(0u, 0u, a_batch(i2, i3));
    let rows = vec4<u32>(
        addr(p.a, ia + vec4<u32>(0u, min(m0, last), 0u, 0u)),
        addr(p.a, ia + vec4<u32>(0u, min(m0 + 1u, last), 0u, 0u)),
        addr(p.a, ia + vec4<u32>(0u, min(m0 + 2u, last), 0u, 0u)),
        addr(p.a, ia + vec4<u32>(0u, min(m0 + 3u, last), 0u, 0u)),
    );
    let last_col = p.b.ne.y - 1u;
    let xb = addr(p.b, vec4<u32>(0u, 0u, i2, i3));
    let xs = vec4<u32>(xb) + min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(last_col)) * p.b.nb.y;
    let quads = n_quads(p.a.ne.x);
    // Every invocation calls col_stats, which may reduce over the workgroup.
    let st0 = col_stats(xs.x, ids);
    var st = mat4x2<f32>(st0, st0, st0, st0);
    if (COLS > 1u) {
        st[1] = col_stats(xs.y, ids);
    }
    if (COLS > 2u) {
        st[2] = col_stats(xs.z, ids);
        st[3] = col_stats(xs.w, ids);
    }

    var acc = mat4x4<f32>();
    for (var q = lane; q < quads; q += RG_SIZE) {
        let g = load_quads(rows, q);
        acc += cols_dot(Rows(g.r0.c0, g.r1.c0, g.r2.c0, g.r3.c0), quad_unit(q, 0u), xs, st);
        if (ROWS_EXACT) {
            acc += cols_dot(Rows(g.r0.c1, g.r1.c1, g.r2.c1, g.r3.c1), quad_unit(q, 1u), xs, st);
            acc += cols_dot(Rows(g.r0.c2, g.r1.c2, g.r2.c2, g.r3.c2), quad_unit(q, 2u), xs, st);
            acc += cols_dot(Rows(g.r0.c3, g.r1.c3, g.r2.c3, g.r3.c3), quad_unit(q, 3u), xs, st);
        }
    }
    put_partial(0u, acc[0], ids);
    if (COLS > 1u) {
        put_partial(1u, acc[1], ids);
    }
    if (COLS > 2u) {
        put_partial(2u, acc[2], ids);
        put_partial(3u, acc[3], ids);
    }
    if (DEFER) {
        put_partial(COLS, vec4<f32>(deferred_part(), 0.0, 0.0, 0.0), ids);
    }
    sums_ready(ids);
    // Invocation j of each row group stores column j's four rows. (The
    // group's invocations loaded the column once, so its deferred part is
    // the whole column's.)
    if (lane < COLS) {
        var t = column_total(lane, group, ids);
        if (DEFER) {
            t *= deferred_scale(column_total(COLS, group, ids).x);
        }
        store4(t, m0, n0 + lane, i2, i3);
    }
}
