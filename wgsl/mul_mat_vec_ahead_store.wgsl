// The store of a mat-vec plus residual whose result y feeds an rms_norm,
// the norm's weight `e` and a mat-vec of the product (the next layer's
// q/k/v, or the gate/up after attention): this kernel runs the norm ahead.
// Next to y it stores y times the weight into `f` at byte p.z.y, and each
// four rows' sum of squares at p.z.z + 4 * (m / 4); the next mat-vec
// (mul_mat_vec_ahead_load.wgsl) dots its rows with the weighted values,
// adds up the sums and scales its own sums once. So the norm costs no
// dispatch, and the next mat-vec loads no more than an unfused one.
// p.z.x: the (f32) weight's offset in its binding.

// The weights of rows m..m+4, loaded before the product so that their
// latency is not added after the reduction.
var<private> norm_w: vec4<f32>;

fn rows_ahead(m: u32) {
    let last = p.a.ne.y - 1u;
    let at = p.z.x + 4u * min(vec4<u32>(m) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(last));
    norm_w = vec4<f32>(load_e(at.x), load_e(at.y), load_e(at.z), load_e(at.w));
}

fn rows_stored(v: vec4<f32>, m: u32) {
    let rows = p.a.ne.y;
    if (m >= rows) {
        return;
    }
    let z = p.z.y >> 2u;
    for (var i = 0u; i < 4u; i++) {
        if (m + i < rows) {
            f[z + m + i] = bitcast<u32>(v[i] * norm_w[i]);
        }
    }
    // Rows past the last stored zero.
    f[(p.z.z >> 2u) + (m >> 2u)] = bitcast<u32>(dot(v, v));
}
