// A dequantizing copy: d = a as f32 in logical order, a's blocks decoded by
// mul_mat's decoders (quant.wgsl, picked in the defs). One invocation
// decodes one 8-value unit of a source row and stores each value at the
// same logical index of d, which may have another shape or strides.

// `at.x`: the logical index of the row's first value.
fn put(k: u32, at: vec4<u32>, v: f32) {
    if (k < p.a.ne.x) {
        store_d(addr(p.d, unravel(at.x + k, p.d.ne)), v);
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    let units = n_units(p.a.ne.x);
    let rows = p.a.ne.y * p.a.ne.z * p.a.ne.w;
    if (i >= units * rows) {
        return;
    }
    let u = i % units;
    let start = i / units * p.a.ne.x;
    let o = unravel(start, p.a.ne);
    let w = unit_w(addr(p.a, vec4<u32>(0u, o.y, o.z, o.w)), u);
    put_unit(u, w, vec4<u32>(start, 0u, 0u, 0u));
}
