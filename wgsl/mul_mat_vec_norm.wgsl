// The mat-vec kernel's prologue for a fused norm (CENTER) or rms_norm times
// a weight `c` (W_ES bytes per element): each column's mean and scale come
// from norm_stats.wgsl, as norm.wgsl's do, and each activation becomes
// (x - mean) * scale * weight, in norm.wgsl's order. p.y: weight offset in
// its binding, eps (f32 bits).
// rms_norm of one column defers its scale (DEFER): the rows are dotted
// with x * weight, each invocation sums the squares of the x values it
// loads (together they load the column once), and the kernel multiplies
// the row sums by the scale after its one reduction. So the column is
// read once, with no reduction before the weights' loads.

const DEFER: bool = !CENTER && COLS == 1u;
var<private> x_squares: f32;

fn deferred_part() -> f32 {
    return x_squares;
}

fn deferred_scale(squares: f32) -> f32 {
    return 1.0 / sqrt(squares / f32(p.b.ne.x) + bitcast<f32>(p.y.y));
}

fn row_elem(xcol: u32, i: u32) -> f32 {
    return load_b(xcol + i * p.b.nb.x);
}

fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> {
    if (DEFER) {
        return vec2<f32>(0.0, 1.0);
    }
    let n = p.b.ne.x;
    let eps = bitcast<f32>(p.y.y);
    if (CENTER || p.y.w == 0u || (n & 3u) != 0u) {
        return norm_stats(xcol, n, eps, ids);
    }
    // rms_norm of an aligned column: 16-byte loads, four per invocation in
    // flight per step (a 576-value column is then one or two steps of a
    // 32-invocation workgroup, not five).
    let quads = n / 4u;
    var sq = vec4<f32>(0.0);
    for (var q0 = ids.lid; q0 < quads; q0 += 4u * WG) {
        var v: array<vec4<f32>, 4>;
        for (var j = 0u; j < 4u; j++) {
            let q = q0 + j * WG;
            if (q < quads) {
                v[j] = bitcast<vec4<f32>>(b_quad(xcol + 16u * q));
            }
        }
        for (var j = 0u; j < 4u; j++) {
            sq = fma(v[j], v[j], sq);
        }
    }
    let ms = wg_sum(sq.x + sq.y + sq.z + sq.w, ids) / f32(n);
    return vec2<f32>(0.0, 1.0 / sqrt(ms + eps));
}

fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {
    if (DEFER) {
        // Padded float rows ask past the column: those values count as 0.
        let v = select(0.0, load_b(byte), k < p.b.ne.x);
        x_squares = fma(v, v, x_squares);
        return v * load_c(p.y.x + k * W_ES);
    }
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
    if (DEFER) {
        let v = bitcast<vec4<f32>>(b_quad(byte));
        x_squares += dot(v, v);
        return v * weight_quad(k);
    }
    return (bitcast<vec4<f32>>(b_quad(byte)) - st.x) * st.y * weight_quad(k);
}
