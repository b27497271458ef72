// A quantizing copy: d's blocks from a's values in logical order (a may be
// a permuted view or another shape, of f32, f16 or bf16). One invocation
// per destination block reads its 32 values, quantizes them with the
// type's `quantize_block` (quantize.wgsl, picked in the defs) and stores
// the block's bytes with put_byte.

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    let nd = vec4<u32>(p.d.ne.x / 32u, p.d.ne.y, p.d.ne.z, p.d.ne.w);
    if (i >= nd.x * nd.y * nd.z * nd.w) {
        return;
    }
    // i's blocks precede it in logical order, 32 values each.
    var v: Values;
    for (var j = 0u; j < 32u; j++) {
        v[j] = load_a(addr(p.a, unravel(32u * i + j, p.a.ne)));
    }
    var words: BlockWords;
    let bytes = quantize_block(&v, &words);
    let dst = addr(p.d, unravel(i, nd));
    var run = ByteRun(0u, 0u);
    for (var k = 0u; k < bytes; k++) {
        put_byte(&run, dst + k, (words[k >> 2u] >> ((k & 3u) * 8u)) & 0xffu, k + 1u == bytes);
    }
}
