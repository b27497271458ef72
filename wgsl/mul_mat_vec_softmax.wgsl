// The mat-vec kernel's prologue for a fused soft_max of its activations,
// one column per head (a decode step's attention weights times V): each
// column's max and the inverse of its sum come from the same reductions as
// softmax.wgsl's, and each activation becomes exp(x * scale + mask - max)
// times that inverse. The encoder defines `mask_at(k)` and `mask_quad(k)`
// (four values): 0, or the mask (binding c, f32) of one row, shared by
// every column. p.y: the mask's offset in its binding, scale
// (f32 bits).

fn logit(byte: u32, k: u32) -> f32 {
    return load_b(byte) * bitcast<f32>(p.y.y) + mask_at(k);
}

fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> {
    let n = p.b.ne.x;
    // Four elements per step, as in norm.wgsl, so four loads are in flight.
    var m = vec4<f32>(bitcast<f32>(0xff800000u));
    for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
        for (var j = 0u; j < 4u; j++) {
            let i = i0 + j * WG;
            if (i < n) {
                m[j] = max(m[j], logit(xcol + i * p.b.nb.x, i));
            }
        }
    }
    let mx = wg_max(max(max(m.x, m.y), max(m.z, m.w)), ids);
    var s = vec4<f32>(0.0);
    for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
        for (var j = 0u; j < 4u; j++) {
            let i = i0 + j * WG;
            if (i < n) {
                s[j] += exp(logit(xcol + i * p.b.nb.x, i) - mx);
            }
        }
    }
    // Multiply by the inverse as the reference does.
    return vec2<f32>(mx, 1.0 / wg_sum(s.x + s.y + s.z + s.w, ids));
}

fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {
    return exp(logit(byte, k) - st.x) * st.y;
}

fn x_quad(byte: u32, k: u32, st: vec2<f32>) -> vec4<f32> {
    let logits = bitcast<vec4<f32>>(b_quad(byte)) * bitcast<f32>(p.y.y) + mask_quad(k);
    return exp(logits - st.x) * st.y;
}
