// soft_max over rows of a * scale + mask: one workgroup per row, a max and
// a sum reduction (subgroup or workgroup helpers). Ported from the seed's
// op_softmax, which assumed a 32-wide subgroup; this works for any size.
// The encoder prepends `causal(x, i)` (diag_mask_inf fused in, or x) and
// `mask_at(i)` (0 without a mask). p.x.x: scale; p.y.x: n_past.

fn logit(i: vec4<u32>) -> f32 {
    return causal(load_a(addr(p.a, i)), i) * bitcast<f32>(p.x.x) + mask_at(i);
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids.wid, ids.nwg);
    if (row >= n_rows(p.a)) {
        return;
    }
    let base = row_start(row, p.a);
    let n = p.a.ne.x;

    var m = bitcast<f32>(0xff800000u);
    for (var i = ids.lid; i < n; i += WG) {
        m = max(m, logit(base + vec4<u32>(i, 0u, 0u, 0u)));
    }
    m = wg_max(m, ids);
    var sum = 0.0;
    for (var i = ids.lid; i < n; i += WG) {
        sum += exp(logit(base + vec4<u32>(i, 0u, 0u, 0u)) - m);
    }
    // Multiply by the inverse as the reference does.
    let inv = 1.0 / wg_sum(sum, ids);
    for (var i = ids.lid; i < n; i += WG) {
        let at = base + vec4<u32>(i, 0u, 0u, 0u);
        store_d(addr(p.d, at), exp(logit(at) - m) * inv);
    }
}
