// norm (CENTER) and rms_norm over rows of a: one workgroup per row.
// Ported from the seed's op_norm and op_rmsnorm; the statistics come from
// norm_stats.wgsl. p.x.x: eps. The encoder prepends `weight_at(i)`: 1, or a
// weight (source b) that a following mul applied.

fn row_elem(row: u32, i: u32) -> f32 {
    return load_a(row + i * p.a.nb.x);
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids.wid, ids.nwg);
    if (row >= n_rows(p.a)) {
        return;
    }
    let base = row_start(row, p.a);
    let n = p.a.ne.x;
    let st = norm_stats(addr(p.a, base), n, bitcast<f32>(p.x.x), ids);
    // Four elements per step here too.
    for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
        for (var j = 0u; j < 4u; j++) {
            let i = i0 + j * WG;
            if (i < n) {
                let at = base + vec4<u32>(i, 0u, 0u, 0u);
                store_d(addr(p.d, at), (load_a(addr(p.a, at)) - st.x) * st.y * weight_at(at));
            }
        }
    }
}
