// Rotary embedding of a [d, heads, tokens, B3] at the i32 positions in b:
// one invocation per rotated pair, then one per passed-through value, in
// each row. Ported from the seed's op_rope_f32/op_rope_f16 (one type-generic
// body) and rope_common's YaRN; the seed multiplied theta by a running
// theta_scale, this computes pos * base^(-i0/n_dims) per pair as the
// reference does. The YaRN corr dims and magnitude scale come from the host.
// p.x: n_dims, neox, freq_base, freq_scale; p.y: ext_factor, mscale, corr dims.
// The encoder defines `store_out(i, v)`, which stores element i of the
// result: where d's strides put it, or (fused with set_rows) with the token
// index i.z replaced by the cache row the token's position names; and
// `rotated(row)`, false for rows that pass through unrotated (the V heads
// of the fused q/k rope and K/V store); and `freq_factor(pair)`, what the
// pair's angle is divided by (1 without frequency factors).

fn yarn_theta(theta_extrap: f32, i0: u32) -> f32 {
    let theta_interp = bitcast<f32>(p.x.w) * theta_extrap;
    let ext_factor = bitcast<f32>(p.y.x);
    if (ext_factor == 0.0) {
        return theta_interp;
    }
    let lo = bitcast<f32>(p.y.z);
    let hi = bitcast<f32>(p.y.w);
    let y = (f32(i0 / 2u) - lo) / max(hi - lo, 0.001);
    let mix = (1.0 - clamp(y, 0.0, 1.0)) * ext_factor;
    return theta_interp * (1.0 - mix) + theta_extrap * mix;
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let n_dims = p.x.x;
    let half = n_dims / 2u;
    // Work items per row: the pairs, then the values past n_dims.
    let per_row = p.a.ne.x - half;
    let flat = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    let n_rows = p.a.ne.y * p.a.ne.z * p.a.ne.w;
    if (flat >= per_row * n_rows) {
        return;
    }
    let k = flat % per_row;
    let r = unravel(flat / per_row, vec4<u32>(p.a.ne.y, p.a.ne.z, p.a.ne.w, 1u));
    let row = vec4<u32>(0u, r.x, r.y, r.z);
    if (k >= half) {
        let at = row + vec4<u32>(k + half, 0u, 0u, 0u);
        store_out(at, load_a(addr(p.a, at)));
        return;
    }
    let i0 = 2u * k;
    if (!rotated(row)) {
        for (var j = i0; j < i0 + 2u; j++) {
            let at = row + vec4<u32>(j, 0u, 0u, 0u);
            store_out(at, load_a(addr(p.a, at)));
        }
        return;
    }
    let pos = load_b(addr(p.b, vec4<u32>(r.y, 0u, 0u, 0u)));
    let theta_extrap = pos * pow(bitcast<f32>(p.x.z), -f32(i0) / f32(n_dims)) / freq_factor(k);
    let theta = yarn_theta(theta_extrap, i0);
    let mscale = bitcast<f32>(p.y.y);
    let c = cos(theta) * mscale;
    let s = sin(theta) * mscale;
    // Normal mode pairs neighbours, neox pairs k with k + n_dims/2.
    let j0 = select(i0, k, p.x.y != 0u);
    let j1 = select(i0 + 1u, k + half, p.x.y != 0u);
    let a0 = row + vec4<u32>(j0, 0u, 0u, 0u);
    let a1 = row + vec4<u32>(j1, 0u, 0u, 0u);
    let x0 = load_a(addr(p.a, a0));
    let x1 = load_a(addr(p.a, a1));
    store_out(a0, x0 * c - x1 * s);
    store_out(a1, x0 * s + x1 * c);
}
