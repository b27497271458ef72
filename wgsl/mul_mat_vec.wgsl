// mul_mat, matrix times vector (decode): d[m, n, i2, i3] = a[:, m] . b[:, n].
// Ported from the seed's op_mul_mv_q_n: a workgroup computes four rows of
// one column; each invocation walks the rows' 8-value units with stride
// WG, gathering the unit's activations once and dotting them with each
// row's decoded weights; then one workgroup reduction per row. Consecutive
// invocations read consecutive words of a row, so weight loads coalesce.
// The type-specific part is `unit_w`/`x_elem`/`n_units` (see quant.wgsl).
// p.x: row groups (of 4), unused, a's batch divisors r2 and r3 (broadcast).

fn x_at(xrow: u32, u: u32, i: u32) -> f32 {
    let k = x_elem(u, i);
    return select(0.0, load_b(xrow + k * p.b.nb.x), k < p.b.ne.x);
}

fn x_unit(xrow: u32, u: u32) -> Unit {
    return Unit(
        vec4<f32>(x_at(xrow, u, 0u), x_at(xrow, u, 1u), x_at(xrow, u, 2u), x_at(xrow, u, 3u)),
        vec4<f32>(x_at(xrow, u, 4u), x_at(xrow, u, 5u), x_at(xrow, u, 6u), x_at(xrow, u, 7u)),
    );
}

fn put(m: u32, n: u32, i2: u32, i3: u32, v: f32) {
    if (m < p.a.ne.y) {
        store_d(addr(p.d, vec4<u32>(m, n, i2, i3)), v);
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let g = group_index(ids.wid, ids.nwg);
    let groups = p.x.x;
    let n_cols = p.b.ne.y;
    if (g >= groups * n_cols * p.b.ne.z * p.b.ne.w) {
        return;
    }
    let m0 = (g % groups) * ROWS;
    let rest = g / groups;
    let n = rest % n_cols;
    let i2 = (rest / n_cols) % p.b.ne.z;
    let i3 = rest / n_cols / p.b.ne.z;

    // Rows past the end read the last row; their sums are not stored.
    let last = p.a.ne.y - 1u;
    let ia = vec4<u32>(0u, 0u, i2 / p.x.z, i3 / p.x.w);
    var r: array<u32, 8>;
    r[0] = addr(p.a, ia + vec4<u32>(0u, min(m0, last), 0u, 0u));
    r[1] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 1u, last), 0u, 0u));
    r[2] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 2u, last), 0u, 0u));
    r[3] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 3u, last), 0u, 0u));
    r[4] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 4u, last), 0u, 0u));
    r[5] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 5u, last), 0u, 0u));
    r[6] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 6u, last), 0u, 0u));
    r[7] = addr(p.a, ia + vec4<u32>(0u, min(m0 + 7u, last), 0u, 0u));
    let xrow = addr(p.b, vec4<u32>(0u, n, i2, i3));
    let units = n_units(p.a.ne.x);

    var acc = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    for (var u = ids.lid; u < units; u += WG) {
        let x = x_unit(xrow, u);
        acc += vec4<f32>(
            dot_unit(unit_w(r[0], u), x),
            dot_unit(unit_w(r[1], u), x),
            dot_unit(unit_w(r[2], u), x),
            dot_unit(unit_w(r[3], u), x),
        );
        if (ROWS == 8u) {
            acc2 += vec4<f32>(
                dot_unit(unit_w(r[4], u), x),
                dot_unit(unit_w(r[5], u), x),
                dot_unit(unit_w(r[6], u), x),
                dot_unit(unit_w(r[7], u), x),
            );
        }
    }
    let t0 = wg_sum(acc.x, ids);
    let t1 = wg_sum(acc.y, ids);
    let t2 = wg_sum(acc.z, ids);
    let t3 = wg_sum(acc.w, ids);
    if (ids.lid == 0u) {
        put(m0, n, i2, i3, t0);
        put(m0 + 1u, n, i2, i3, t1);
        put(m0 + 2u, n, i2, i3, t2);
        put(m0 + 3u, n, i2, i3, t3);
    }
    if (ROWS == 8u) {
        let t4 = wg_sum(acc2.x, ids);
        let t5 = wg_sum(acc2.y, ids);
        let t6 = wg_sum(acc2.z, ids);
        let t7 = wg_sum(acc2.w, ids);
        if (ids.lid == 0u) {
            put(m0 + 4u, n, i2, i3, t4);
            put(m0 + 5u, n, i2, i3, t5);
            put(m0 + 6u, n, i2, i3, t6);
            put(m0 + 7u, n, i2, i3, t7);
        }
    }
}
