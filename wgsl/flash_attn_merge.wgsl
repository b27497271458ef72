// Combines flash_attn_ext's key splits: a = the splits' rows [Dv + 2,
// splits, heads, queries] (flash_attn_partial.wgsl), d = the result [Dv,
// heads, queries]. One workgroup per (head, query); each output dim is the
// splits' outputs rescaled to the largest running max, over their rescaled
// sums. A split whose keys were all masked has the lowest max, sum 0 and
// output 0, so it adds nothing (and all masked gives 0, as unsplit).

fn split_at(i: u32, s: u32, h: u32, q: u32) -> f32 {
    return load_a(addr(p.a, vec4<u32>(i, s, h, q)));
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let g = group_index(ids.wid, ids.nwg);
    let n_head = p.a.ne.z;
    if (g >= n_head * p.a.ne.w) {
        return;
    }
    let h = g % n_head;
    let q = g / n_head;
    let splits = p.a.ne.y;
    let dv = p.d.ne.x;
    var m = split_at(dv, 0u, h, q);
    for (var s = 1u; s < splits; s++) {
        m = max(m, split_at(dv, s, h, q));
    }
    var l = 0.0;
    for (var s = 0u; s < splits; s++) {
        l = fma(split_at(dv + 1u, s, h, q), exp(split_at(dv, s, h, q) - m), l);
    }
    let inv = select(0.0, 1.0 / l, l > 0.0);
    for (var i = ids.lid; i < dv; i += WG) {
        var acc = 0.0;
        for (var s = 0u; s < splits; s++) {
            acc = fma(split_at(i, s, h, q), exp(split_at(dv, s, h, q) - m), acc);
        }
        store_d(addr(p.d, vec4<u32>(i, h, q, 0u)), acc * inv);
    }
}
