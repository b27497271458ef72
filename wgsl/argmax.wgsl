// argmax of each row: one workgroup per row. Each invocation keeps the
// first index of its largest value; the row's maximum, then the lowest
// index holding it, come from two max reductions (indices as negated f32,
// exact below 2^24), so a tie goes to the lowest index like the CPU's.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids.wid, ids.nwg);
    if (row >= n_rows(p.a)) {
        return;
    }
    let base = row_start(row, p.a);
    let neg_inf = bitcast<f32>(0xff800000u);
    var best = neg_inf;
    var at = 0xffffffffu;
    for (var i = ids.lid; i < p.a.ne.x; i += WG) {
        let v = load_a(addr(p.a, base + vec4<u32>(i, 0u, 0u, 0u)));
        if (v > best || at == 0xffffffffu) {
            best = v;
            at = i;
        }
    }
    let m = wg_max(best, ids);
    let first = -wg_max(select(neg_inf, -f32(at), best == m && at != 0xffffffffu), ids);
    if (ids.lid == 0u) {
        // A row of NaNs has no maximum: index 0, like the CPU's.
        d[addr(p.d, vec4<u32>(row, 0u, 0u, 0u)) >> 2u] = select(0u, u32(first), first < 16777216.0);
    }
}
