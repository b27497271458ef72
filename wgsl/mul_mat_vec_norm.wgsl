// The mat-vec kernel's prologue for a fused norm (CENTER) or rms_norm times
// a weight `c` (W_ES bytes per element): each column's mean and scale come
// from the same reductions as norm.wgsl's, and each activation becomes
// (x - mean) * scale * weight, in norm.wgsl's order. p.y: weight offset in
// its binding, eps (f32 bits).

fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> {
    let n = p.b.ne.x;
    var mean = 0.0;
    if (CENTER) {
        var sum = 0.0;
        for (var i = ids.lid; i < n; i += WG) {
            sum += load_b(xcol + i * p.b.nb.x);
        }
        mean = wg_sum(sum, ids) / f32(n);
    }
    var sq = 0.0;
    for (var i = ids.lid; i < n; i += WG) {
        let v = load_b(xcol + i * p.b.nb.x) - mean;
        sq += v * v;
    }
    return vec2<f32>(mean, 1.0 / sqrt(wg_sum(sq, ids) / f32(n) + bitcast<f32>(p.y.y)));
}

fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {
    return (load_b(byte) - st.x) * st.y * load_c(p.y.x + k * W_ES);
}
