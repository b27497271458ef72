// set_rows: element e of a (contiguous rows of d's row length) is stored,
// converted to d's type, in row b[e / row] of d; indices outside d's rows
// are skipped (the CPU reference reports them). One invocation per element.
// p.x.x: elements of a.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let e = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    if (e >= p.x.x) {
        return;
    }
    let row_len = p.d.ne.x;
    let i = e / row_len;
    // The index as a whole word: f32 would round indices past 2^24.
    let row = bitcast<i32>(b_word(addr(p.b, vec4<u32>(i, 0u, 0u, 0u))));
    if (row < 0 || u32(row) >= p.d.ne.y) {
        return;
    }
    let value = load_a(addr(p.a, unravel(e, p.a.ne)));
    store_d(p.d.offset + u32(row) * p.d.nb.y + (e % row_len) * p.d.nb.x, value);
}
