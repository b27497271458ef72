// flash_attn_ext's end without key splits: the output dims this invocation
// owns (lid and lid + WG), normalised by the softmax sum.

fn finish(at: vec3<u32>, m: f32, l: f32, acc: vec2<f32>, lid: u32) {
    let dv = p.d.ne.x;
    let inv = select(0.0, 1.0 / l, l > 0.0);
    if (lid < dv) {
        store_d(addr(p.d, vec4<u32>(lid, at.x, at.y, 0u)), acc.x * inv);
    }
    if (lid + WG < dv) {
        store_d(addr(p.d, vec4<u32>(lid + WG, at.x, at.y, 0u)), acc.y * inv);
    }
}
