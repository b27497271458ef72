// flash_attn_ext's end for one key split: d is f32 scratch shaped [Dv + 2,
// splits, heads, queries]; a split's row holds its unnormalised output, then
// its running max and softmax sum (flash_attn_merge.wgsl combines them).

fn finish(at: vec3<u32>, m: f32, l: f32, acc: vec2<f32>, lid: u32) {
    let dv = p.d.ne.x - 2u;
    let row = vec4<u32>(0u, at.z, at.x, at.y);
    if (lid < dv) {
        store_d(addr(p.d, row + vec4<u32>(lid, 0u, 0u, 0u)), acc.x);
    }
    if (lid + WG < dv) {
        store_d(addr(p.d, row + vec4<u32>(lid + WG, 0u, 0u, 0u)), acc.y);
    }
    if (lid == 0u) {
        store_d(addr(p.d, row + vec4<u32>(dv, 0u, 0u, 0u)), m);
        store_d(addr(p.d, row + vec4<u32>(dv + 1u, 0u, 0u, 0u)), l);
    }
}
