// mul_mat, matrix times vector (decode) and small batches:
// d[m, n, i2, i3] = a[:, m] . b[:, n]. Ported from the seed's op_mul_mv_q_n:
// a workgroup computes four rows of COLS columns; each invocation walks the
// rows' 8-value units with stride WG, decoding each row's unit once and
// dotting it with the unit's activations of every column; then one
// workgroup reduction per output. Consecutive invocations read consecutive
// words of a row, so weight loads coalesce.
// The type-specific part is `unit_w`/`x_elem`/`n_units` (see quant.wgsl).
// p.x: row groups (of 4), column groups (of COLS), a's batch divisors r2
// and r3 (broadcast). COLS (1, 2 or 4) comes from the encoder, and so does
// `epilogue(sum, byte)`, which turns a row's sum into the stored value: the
// sum itself, or the sum plus a residual (a fused `add`); and
// `col_stats(column)` with `x_value(byte, k, stats)`, which give the
// activation multiplied: b's value itself, or (a fused norm x weight) that
// value normalised with its column's mean and scale and multiplied by the
// norm's weight, or (a fused silu x up) silu of it times the up value.

fn x_at(xrow: u32, u: u32, i: u32, st: vec2<f32>) -> f32 {
    let k = x_elem(u, i);
    return select(0.0, x_value(xrow + k * p.b.nb.x, k, st), k < p.b.ne.x);
}

fn x_unit(xrow: u32, u: u32, st: vec2<f32>) -> Unit {
    return Unit(
        vec4<f32>(x_at(xrow, u, 0u, st), x_at(xrow, u, 1u, st), x_at(xrow, u, 2u, st), x_at(xrow, u, 3u, st)),
        vec4<f32>(x_at(xrow, u, 4u, st), x_at(xrow, u, 5u, st), x_at(xrow, u, 6u, st), x_at(xrow, u, 7u, st)),
    );
}

// Dot products of four rows' weights with one column's activations.
fn dot4(w0: Unit, w1: Unit, w2: Unit, w3: Unit, x: Unit) -> vec4<f32> {
    return vec4<f32>(dot_unit(w0, x), dot_unit(w1, x), dot_unit(w2, x), dot_unit(w3, x));
}

// Reduces and stores rows m..m+4 of column n (those that exist).
fn finish(acc: vec4<f32>, m: u32, n: u32, i2: u32, i3: u32, ids: Ids) {
    let t = vec4<f32>(wg_sum(acc.x, ids), wg_sum(acc.y, ids), wg_sum(acc.z, ids), wg_sum(acc.w, ids));
    if (ids.lid == 0u && n < p.b.ne.y) {
        let at = addr(p.d, vec4<u32>(m, n, i2, i3));
        let rows = p.a.ne.y;
        if (m < rows) { store_d(at, epilogue(t.x, at)); }
        if (m + 1u < rows) { store_d(at + p.d.nb.x, epilogue(t.y, at + p.d.nb.x)); }
        if (m + 2u < rows) { store_d(at + 2u * p.d.nb.x, epilogue(t.z, at + 2u * p.d.nb.x)); }
        if (m + 3u < rows) { store_d(at + 3u * p.d.nb.x, epilogue(t.w, at + 3u * p.d.nb.x)); }
    }
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
    let r0 = addr(p.a, ia + vec4<u32>(0u, min(m0, last), 0u, 0u));
    let r1 = addr(p.a, ia + vec4<u32>(0u, min(m0 + 1u, last), 0u, 0u));
    let r2 = addr(p.a, ia + vec4<u32>(0u, min(m0 + 2u, last), 0u, 0u));
    let r3 = addr(p.a, ia + vec4<u32>(0u, min(m0 + 3u, last), 0u, 0u));
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
        let w0 = unit_w(r0, u);
        let w1 = unit_w(r1, u);
        let w2 = unit_w(r2, u);
        let w3 = unit_w(r3, u);
        acc0 += dot4(w0, w1, w2, w3, x_unit(x0, u, st0));
        if (COLS > 1u) {
            acc1 += dot4(w0, w1, w2, w3, x_unit(x1, u, st1));
        }
        if (COLS > 2u) {
            acc2 += dot4(w0, w1, w2, w3, x_unit(x2, u, st2));
            acc3 += dot4(w0, w1, w2, w3, x_unit(x3, u, st3));
        }
    }
    finish(acc0, m0, n0, i2, i3, ids);
    if (COLS > 1u) {
        finish(acc1, m0, n0 + 1u, i2, i3, ids);
    }
    if (COLS > 2u) {
        finish(acc2, m0, n0 + 2u, i2, i3, ids);
        finish(acc3, m0, n0 + 3u, i2, i3, ids);
    }
}
