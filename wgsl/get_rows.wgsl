// get_rows: d[i0, ir, j2, j3] = a[i0, b[ir, j2, j3], j2, j3] as f32, one
// invocation per output value, any table type through the defs' `dequant`
// (a block is one element for f32/f16). Ported from the seed's op_getrows*.
// p.x.x: values per block. An index outside the table gives a row of
// zeros (the CPU reference returns an error instead).

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    if (i >= n_elements(p.d)) {
        return;
    }
    let o = unravel(i, p.d.ne);
    let row = bitcast<i32>(b_word(addr(p.b, vec4<u32>(o.y, o.z, o.w, 0u))));
    var v = 0.0;
    if (row >= 0 && u32(row) < p.a.ne.y) {
        let qk = p.x.x;
        v = dequant(addr(p.a, vec4<u32>(o.x / qk, u32(row), o.z, o.w)), o.x % qk);
    }
    store_d(addr(p.d, o), v);
}
