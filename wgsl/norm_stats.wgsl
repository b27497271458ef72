// The mean (with CENTER; else 0) and the inverse standard deviation of the
// n values `row_elem(row, i)`, as norm and rms_norm compute them: four
// elements per step, so four loads are in flight instead of one load's
// latency per element, then a workgroup reduction. The kernel that
// includes this defines `row_elem` and CENTER.

fn norm_stats(row: u32, n: u32, eps: f32, ids: Ids) -> vec2<f32> {
    var mean = 0.0;
    if (CENTER) {
        var sum = vec4<f32>(0.0);
        for (var i0 = ids.lid; i0 < n; i0 += 4u * WG) {
            for (var j = 0u; j < 4u; j++) {
                let i = i0 + j * WG;
                if (i < n) {
                    sum[j] += row_elem(row, i);
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
                let v = row_elem(row, i) - mean;
                sq[j] += v * v;
            }
        }
    }
    let ms = wg_sum(sq.x + sq.y + sq.z + sq.w, ids) / f32(n);
    return vec2<f32>(mean, 1.0 / sqrt(ms + eps));
}
