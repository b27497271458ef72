// sample_top_k: a token drawn from top_k's best-first (value, index) pairs
// a [2, k] with the settings b [4] (temperature, top-p, ln min-p, a uniform
// draw in [0, 1)): llama.cpp's chain top-p -> min-p -> temperature -> draw,
// by one invocation in the CPU reference's order of operations
// (src/backend/cpu/ops/top_k.rs `draw`).

fn value(i: u32) -> f32 {
    return load_a(p.a.offset + 8u * i);
}

@compute @workgroup_size(1)
fn main() {
    let temp = load_b(p.b.offset);
    let top_p = load_b(p.b.offset + 4u);
    let ln_min_p = load_b(p.b.offset + 8u);
    let r = load_b(p.b.offset + 12u);
    // Padding (index -1) follows the candidates.
    var n = 0u;
    for (var i = 0u; i < p.a.ne.y; i++) {
        if (load_a(p.a.offset + 8u * i + 4u) >= 0.0) {
            n = i + 1u;
        }
    }
    if (n == 0u) {
        d[p.d.offset >> 2u] = 0u;
        return;
    }
    let mx = value(0u);
    var keep = n;
    if (top_p < 1.0) {
        var total = 0.0;
        for (var i = 0u; i < n; i++) {
            total += exp(value(i) - mx);
        }
        var cum = 0.0;
        for (var i = 0u; i < n; i++) {
            cum += exp(value(i) - mx) / total;
            if (cum >= top_p) {
                keep = i + 1u;
                break;
            }
        }
    }
    // p_i >= min_p * p_max, in logits.
    let floor = mx + ln_min_p;
    var kept = 0u;
    for (var i = 0u; i < keep; i++) {
        if (value(i) < floor) {
            break;
        }
        kept = i + 1u;
    }
    kept = max(kept, 1u);
    var total = 0.0;
    for (var i = 0u; i < kept; i++) {
        total += exp((value(i) - mx) / temp);
    }
    var pick = kept - 1u;
    var acc = 0.0;
    for (var i = 0u; i < kept; i++) {
        acc += exp((value(i) - mx) / temp) / total;
        if (r < acc) {
            pick = i;
            break;
        }
    }
    d[p.d.offset >> 2u] = u32(i32(load_a(p.a.offset + 8u * pick + 4u)));
}
