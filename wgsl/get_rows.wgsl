// get_rows: d[i0, ir, j2, j3] = a[i0, b[ir, j2, j3], j2, j3] as f32, with
// mul_mat's block decoders (quant.wgsl, picked in the defs): one invocation
// decodes one 8-value unit of an output row and stores its values where
// x_elem places them. An index outside the table gives a row of zeros (the
// CPU reference returns an error instead).

fn put(k: u32, at: vec4<u32>, v: f32) {
    if (k < p.d.ne.x) {
        store_d(addr(p.d, vec4<u32>(k, at.y, at.z, at.w)), v);
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    let units = n_units(p.a.ne.x);
    let rows = p.d.ne.y * p.d.ne.z * p.d.ne.w;
    if (i >= units * rows) {
        return;
    }
    let u = i % units;
    let o = unravel(i / units * p.d.ne.x, p.d.ne);
    let row = bitcast<i32>(b_word(addr(p.b, vec4<u32>(o.y, o.z, o.w, 0u))));
    var w = Unit(vec4<f32>(0.0), vec4<f32>(0.0));
    if (row >= 0 && u32(row) < p.a.ne.y) {
        w = unit_w(addr(p.a, vec4<u32>(0u, u32(row), o.z, o.w)), u);
    }
    put_unit(u, w, o);
}
