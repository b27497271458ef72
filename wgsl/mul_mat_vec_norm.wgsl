// The mat-vec kernel's prologue for a fused norm (CENTER) or rms_norm times
// a weight `c` (W_ES bytes per element): each column's mean and scale come
// from the same reductions as norm.wgsl's, and each activation becomes
// (x - mean) * scale * weight, in norm.wgsl's order. p.y: weight offset in
// its binding, eps (f32 bits).

fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> {
    let n = p.b.ne.x;
    // Four elements per step, as in norm.wgsl, so four loads are in flight.
    var mean = 0.0;
    if (CENTER) {
        var sum = vec4<f32>(0.0);
        for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
            for (var j = 0u; j < 4u; j++) {
                let i = i0 + j * WG;
                if (i < n) {
                    sum[j] += load_b(xcol + i * p.b.nb.x);
                }
            }
        }
        mean = wg_sum(sum.x + sum.y + sum.z + sum.w, ids) / f32(n);
    }
    var sq = vec4<f32>(0.0);
    for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
        for (var j = 0u; j < 4u; j++) {
            let i = i0 + j * WG;
            if (i < n) {
                let v = load_b(xcol + i * p.b.nb.x) - mean;
                sq[j] += v * v;
            }
        }
    }
    let ms = wg_sum(sq.x + sq.y + sq.z + sq.w, ids) / f32(n);
    return vec2<f32>(mean, 1.0 / sqrt(ms + bitcast<f32>(p.y.y)));
}

fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {
    return (load_b(byte) - st.x) * st.y * load_c(p.y.x + k * W_ES);
}
