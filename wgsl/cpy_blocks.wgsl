// A copy between two tensors of one block type: d's blocks = a's blocks in
// logical order (either side may be a permuted view or another shape).
// One invocation per destination block, copied byte by byte; a block
// need not start or end on a word, so each word is merged into d with
// atomics (its other bytes belong to a neighbour another invocation writes).
// p.x.x: values per block, p.x.y: bytes per block.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    let elems = p.x.x;
    let bytes = p.x.y;
    let nd = vec4<u32>(p.d.ne.x / elems, p.d.ne.y, p.d.ne.z, p.d.ne.w);
    if (i >= nd.x * nd.y * nd.z * nd.w) {
        return;
    }
    let na = vec4<u32>(p.a.ne.x / elems, p.a.ne.y, p.a.ne.z, p.a.ne.w);
    let src = addr(p.a, unravel(i, na));
    let dst = addr(p.d, unravel(i, nd));
    var word = 0u;
    var mask = 0u;
    for (var k = 0u; k < bytes; k++) {
        let at = dst + k;
        let shift = (at & 3u) * 8u;
        word |= a_u8(src + k) << shift;
        mask |= 0xffu << shift;
        if ((at & 3u) == 3u || k + 1u == bytes) {
            atomicAnd(&d[at >> 2u], ~mask);
            atomicOr(&d[at >> 2u], word);
            word = 0u;
            mask = 0u;
        }
    }
}
