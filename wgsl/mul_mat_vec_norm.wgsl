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

// Weights k..k+4 (their bytes 16-aligned for f32, 8-aligned for f16).
fn weight_quad(k: u32) -> vec4<f32> {
    let at = p.y.x + k * W_ES;
    let w = c_quad(at);
    if (W_ES == 4u) {
        return bitcast<vec4<f32>>(w);
    }
    let h = select(w.xy, w.zw, (at & 8u) != 0u);
    return vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y));
}

fn x_quad(byte: u32, k: u32, st: vec2<f32>) -> vec4<f32> {
    return (bitcast<vec4<f32>>(b_quad(byte)) - st.x) * st.y * weight_quad(k);
}
