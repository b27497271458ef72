// The mat-vec kernel's prologue for a fused norm (CENTER) or rms_norm times
// a weight `c` (W_ES bytes per element): each column's mean and scale come
// from norm_stats.wgsl, as norm.wgsl's do, and each activation becomes
// (x - mean) * scale * weight, in norm.wgsl's order. p.y: weight offset in
// its binding, eps (f32 bits).

fn row_elem(xcol: u32, i: u32) -> f32 {
    return load_b(xcol + i * p.b.nb.x);
}

fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> {
    return norm_stats(xcol, p.b.ne.x, bitcast<f32>(p.y.y), ids);
}

fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {
    return (load_b(byte) - st.x) * st.y * load_c(p.y.x + k * W_ES);
}
