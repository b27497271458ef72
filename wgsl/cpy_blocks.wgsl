// A copy between two tensors of one block type: d's blocks = a's blocks in
// logical order (either side may be a permuted view or another shape).
// One invocation per destination block, copied byte by byte (put_byte.wgsl).
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
    var run = ByteRun(0u, 0u);
    for (var k = 0u; k < bytes; k++) {
        put_byte(&run, dst + k, a_u8(src + k), k + 1u == bytes);
    }
}
