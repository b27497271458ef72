// mul_mat, matrix times vector (decode) and small batches:
// d[m, n, i2, i3] = a[:, m] . b[:, n]. A workgroup computes four rows of
// COLS columns. Each invocation walks the rows' 8-value units with stride
// WG and dots each row's unit with the unit's activations of every column;
// the sums of all rows and columns are then reduced together, one barrier
// step for all of them (mul_mat_vec_sums_*.wgsl).
// Consecutive invocations read consecutive words of a row, so weight loads
// coalesce.
// The type-specific part is `load_chunk`/`chunk_unit`/`x_elem` (quant.wgsl):
// a unit's values are `head.x * raw + head.y`, so the kernel sums raw * x
// and x over a unit and applies the scale and offset once.
// p.x: row groups (of 4), column groups (of COLS), a's batch divisors r2
// and r3 (broadcast). COLS (1, 2 or 4) comes from the encoder, and so does
// `epilogue(sum, byte)`, which turns a row's sum into the stored value: the
// sum itself, or the sum plus a residual (a fused `add`); and
// `col_stats(column)` with `x_value(byte, k, stats)` (and `x_quad` for
// four values from a 16-byte aligned byte), which give the
// activation multiplied: b's value itself, or (a fused norm x weight) that
// value normalised with its column's mean and scale and multiplied by the
// norm's weight, or (a fused silu x up) silu of it times the up value.

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

fn load_rows(r: vec4<u32>, u: u32) -> Rows {
    return Rows(load_chunk(r.x, u), load_chunk(r.y, u), load_chunk(r.z, u), load_chunk(r.w, u));
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

// Stores rows m..m+4 of column n (those that exist).
fn store4(t: vec4<f32>, m: u32, n: u32, i2: u32, i3: u32) {
    if (n >= p.b.ne.y) {
        return;
    }
    let at = addr(p.d, vec4<u32>(m, n, i2, i3));
    let rows = p.a.ne.y;
    if (m < rows) { store_d(at, epilogue(t.x, at)); }
    if (m + 1u < rows) { store_d(at + p.d.nb.x, epilogue(t.y, at + p.d.nb.x)); }
    if (m + 2u < rows) { store_d(at + 2u * p.d.nb.x, epilogue(t.z, at + 2u * p.d.nb.x)); }
    if (m + 3u < rows) { store_d(at + 3u * p.d.nb.x, epilogue(t.w, at + 3u * p.d.nb.x)); }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let g = group_index(ids.wid, ids.nwg);
    let groups_m = p.x.x;
    let groups_n = p.x.y;
    if (g >= groups_m * groups_n * p.b.ne.z * p.b.ne.w) {
        return;
    }
    let m0 = (g % groups_m) * 4u;
    let rest = g / groups_m;
    let n0 = (rest % groups_n) * COLS;
    let i2 = (rest / groups_n) % p.b.ne.z;
    let i3 = rest / groups_n / p.b.ne.z;

    // Rows and columns past the end read the last one; their sums are not stored.
    let last = p.a.ne.y - 1u;
    let ia = vec4<u32>(0u, 0u, i2 / p.x.z, i3 / p.x.w);
    let rows = vec4<u32>(
        addr(p.a, ia + vec4<u32>(0u, min(m0, last), 0u, 0u)),
        addr(p.a, ia + vec4<u32>(0u, min(m0 + 1u, last), 0u, 0u)),
        addr(p.a, ia + vec4<u32>(0u, min(m0 + 2u, last), 0u, 0u)),
        addr(p.a, ia + vec4<u32>(0u, min(m0 + 3u, last), 0u, 0u)),
    );
    let last_col = p.b.ne.y - 1u;
    let xb = addr(p.b, vec4<u32>(0u, 0u, i2, i3));
    let x0 = xb + min(n0, last_col) * p.b.nb.y;
    let x1 = xb + min(n0 + 1u, last_col) * p.b.nb.y;
    let x2 = xb + min(n0 + 2u, last_col) * p.b.nb.y;
    let x3 = xb + min(n0 + 3u, last_col) * p.b.nb.y;
    let units = n_units(p.a.ne.x);
    // Every invocation calls col_stats, which may reduce over the workgroup.
    let st0 = col_stats(x0, ids);
    var st1 = st0;
    var st2 = st0;
    var st3 = st0;
    if (COLS > 1u) {
        st1 = col_stats(x1, ids);
    }
    if (COLS > 2u) {
        st2 = col_stats(x2, ids);
        st3 = col_stats(x3, ids);
    }

    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var u = ids.lid; u < units; u += WG) {
        let g = load_rows(rows, u);
        acc0 += rows_dot(g, u, x0, st0);
        if (COLS > 1u) {
            acc1 += rows_dot(g, u, x1, st1);
        }
        if (COLS > 2u) {
            acc2 += rows_dot(g, u, x2, st2);
            acc3 += rows_dot(g, u, x3, st3);
        }
    }
    put_partial(0u, acc0, ids);
    if (COLS > 1u) {
        put_partial(1u, acc1, ids);
    }
    if (COLS > 2u) {
        put_partial(2u, acc2, ids);
        put_partial(3u, acc3, ids);
    }
    sums_ready(ids);
    // Invocation j stores column j's four rows.
    if (ids.lid < COLS) {
        store4(column_total(ids.lid, ids), m0, n0 + ids.lid, i2, i3);
    }
}
