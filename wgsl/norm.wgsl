// norm (CENTER) and rms_norm over rows of a: one workgroup per row.
// Ported from the seed's op_norm and op_rmsnorm; the reductions come from
// the subgroup or workgroup helpers. p.x.x: eps. The encoder prepends
// `weight_at(i)`: 1, or a weight (source b) that a following mul applied.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids.wid, ids.nwg);
    if (row >= n_rows(p.a)) {
        return;
    }
    let base = row_start(row, p.a);
    let n = p.a.ne.x;

    // Four elements per step (lid + j * WG), so four loads are in flight
    // instead of one load's latency per element.
    var mean = 0.0;
    if (CENTER) {
        var sum = vec4<f32>(0.0);
        for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
            for (var j = 0u; j < 4u; j++) {
                let i = i0 + j * WG;
                if (i < n) {
                    sum[j] += load_a(addr(p.a, base + vec4<u32>(i, 0u, 0u, 0u)));
                }
            }
        }
        mean = wg_sum(sum.x + sum.y + sum.z + sum.w, ids) / f32(n);
    }
    var sq = vec4<f32>(0.0);
    for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
        for (var j = 0u; j < 4u; j++) {
            let i = i0 + j * WG;
            if (i < n) {
                let v = load_a(addr(p.a, base + vec4<u32>(i, 0u, 0u, 0u))) - mean;
                sq[j] += v * v;
            }
        }
    }
    let scale = 1.0 / sqrt(wg_sum(sq.x + sq.y + sq.z + sq.w, ids) / f32(n) + bitcast<f32>(p.x.x));
    for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
        for (var j = 0u; j < 4u; j++) {
            let i = i0 + j * WG;
            if (i < n) {
                let at = base + vec4<u32>(i, 0u, 0u, 0u);
                store_d(addr(p.d, at), (load_a(addr(p.a, at)) - mean) * scale * weight_at(at));
            }
        }
    }
}
