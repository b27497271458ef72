// norm (CENTER) and rms_norm of dense f32 rows (the row and, when there is
// one, the weight are contiguous with 16-byte aligned starts, the weight one
// row broadcast over all): one workgroup per row, each invocation holding up
// to four quads of the row in registers, all loaded before the first
// reduction. The general kernel (norm.wgsl) walks the row twice through
// index arithmetic, a chain of load latencies and integer divisions that
// left a decode step's single-row norm latency-bound on one SM.
// p.x.x: eps. The encoder prepends `weight_quad(q)`: 1, or quad q of the
// weight (source b) that a following mul applied.

fn a_quad_at(byte: u32) -> vec4<f32> {
    let i = byte >> 2u;
    return bitcast<vec4<f32>>(vec4<u32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]));
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids.wid, ids.nwg);
    if (row >= n_rows(p.a)) {
        return;
    }
    let src = addr(p.a, row_start(row, p.a));
    let dst = addr(p.d, row_start(row, p.d));
    let n = p.a.ne.x;
    let quads = n / 4u;
    var v: array<vec4<f32>, 4>;
    var sum = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        let q = ids.lid + j * WG;
        if (q < quads) {
            v[j] = a_quad_at(src + 16u * q);
            sum += v[j];
        }
    }
    var mean = 0.0;
    if (CENTER) {
        mean = wg_sum(sum.x + sum.y + sum.z + sum.w, ids) / f32(n);
    }
    var sq = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (ids.lid + j * WG < quads) {
            let c = v[j] - mean;
            sq += c * c;
        }
    }
    let ms = wg_sum(sq.x + sq.y + sq.z + sq.w, ids) / f32(n);
    let scale = 1.0 / sqrt(ms + bitcast<f32>(p.x.x));
    for (var j = 0u; j < 4u; j++) {
        let q = ids.lid + j * WG;
        if (q < quads) {
            let out = (v[j] - mean) * scale * weight_quad(q);
            let at = dst + 16u * q;
            store_d(at, out.x);
            store_d(at + 4u, out.y);
            store_d(at + 8u, out.z);
            store_d(at + 12u, out.w);
        }
    }
}
