// soft_max over rows of a * scale + mask: one workgroup per row, a max and
// a sum reduction (subgroup or workgroup helpers). Ported from the seed's
// op_softmax, which assumed a 32-wide subgroup; this works for any size.
// The encoder prepends `causal(x, i)` (diag_mask_inf fused in, or x),
// `mask_at(i)` (0 without a mask) and CACHE: rows of up to CACHE * WG
// values are read once into registers (a prompt's score rows: reading
// them three times cost a load's latency twice more per row), longer ones
// (CACHE 0) are read in each pass. p.x.x: scale; p.y.x: n_past.

// -inf (naga 30 does not evaluate bitcast in a const).
fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

fn logit(i: vec4<u32>) -> f32 {
    return causal(load_a(addr(p.a, i)), i) * bitcast<f32>(p.x.x) + mask_at(i);
}

// Values lid, lid + WG, ... of the row, held by this invocation.
fn cached_row(base: vec4<u32>, n: u32, ids: Ids) {
    var v: array<f32, max(CACHE, 1u)>;
    var m = neg_inf();
    for (var j = 0u; j < CACHE; j++) {
        let i = ids.lid + j * WG;
        v[j] = neg_inf();
        if (i < n) {
            v[j] = logit(base + vec4<u32>(i, 0u, 0u, 0u));
        }
        m = max(m, v[j]);
    }
    m = wg_max(m, ids);
    var sum = 0.0;
    for (var j = 0u; j < CACHE; j++) {
        v[j] = exp(v[j] - m);
        sum += v[j];
    }
    // Multiply by the inverse as the reference does.
    let inv = 1.0 / wg_sum(sum, ids);
    for (var j = 0u; j < CACHE; j++) {
        let i = ids.lid + j * WG;
        if (i < n) {
            store_d(addr(p.d, base + vec4<u32>(i, 0u, 0u, 0u)), v[j] * inv);
        }
    }
}

fn looped_row(base: vec4<u32>, n: u32, ids: Ids) {
    var m = neg_inf();
    for (var i = ids.lid; i < n; i += WG) {
        m = max(m, logit(base + vec4<u32>(i, 0u, 0u, 0u)));
    }
    m = wg_max(m, ids);
    var sum = 0.0;
    for (var i = ids.lid; i < n; i += WG) {
        sum += exp(logit(base + vec4<u32>(i, 0u, 0u, 0u)) - m);
    }
    let inv = 1.0 / wg_sum(sum, ids);
    for (var i = ids.lid; i < n; i += WG) {
        let at = base + vec4<u32>(i, 0u, 0u, 0u);
        store_d(addr(p.d, at), exp(logit(at) - m) * inv);
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids.wid, ids.nwg);
    if (row >= n_rows(p.a)) {
        return;
    }
    let base = row_start(row, p.a);
    if (CACHE > 0u) {
        cached_row(base, p.a.ne.x, ids);
    } else {
        looped_row(base, p.a.ne.x, ids);
    }
}
