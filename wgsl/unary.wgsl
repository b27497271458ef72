// Unary ops and copies: d[i] = unop(a[i]) for every element i of d, where
// a is read in its own shape (a copy may reshape) and both may be strided.
// Ported from the seed's op_scale, op_silu, op_relu, op_gelu, op_diagmask
// and op_cpy_* kernels.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    if (i >= n_elements(p.d)) {
        return;
    }
    let id = unravel(i, p.d.ne);
    let x = load_a(addr(p.a, unravel(i, p.a.ne)));
    store_d(addr(p.d, id), unop(x, id));
}
