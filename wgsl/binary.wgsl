// Binary ops with broadcast: d[i] = binop(a[i], b[i mod shape(b)]) over
// strided tensors. Ported from the seed's op_add/op_addrow/op_mul/op_mulrow.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    if (i >= n_elements(p.d)) {
        return;
    }
    let id = unravel(i, p.d.ne);
    let x = load_a(addr(p.a, id));
    let y = load_b(addr(p.b, id % p.b.ne));
    store_d(addr(p.d, id), binop(x, y));
}
