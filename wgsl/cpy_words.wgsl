// A copy between tensors of one 4-byte type (i32): each element's word
// moves as it is, from a's logical index to d's (either may be a permuted
// view or another shape). One invocation per element.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    if (i >= n_elements(p.d)) {
        return;
    }
    d[addr(p.d, unravel(i, p.d.ne)) >> 2u] = a[addr(p.a, unravel(i, p.a.ne)) >> 2u];
}
