// flash_attn_ext: softmax(scale * K^T q + mask) V for one (head, query,
// key split) per workgroup, over tiles of WG keys with an online softmax:
// each invocation scores one key of the tile, the tile's max and sum come
// from workgroup reductions, then each invocation updates the output dims it
// owns (lid and lid + WG). Values and the mask are addressed from words
// (Params has room for three tensors: q = a, K = b, the result = d).
// p.x: V's offset and byte strides along dims, keys and heads;
// p.y: the mask's offset and row stride, scale (f32 bits), query heads per
// KV head; p.z: keys per split, splits, and how K and V may be read in
// words of two f16: K's rows of dims (bit 0), V's rows of dims (bit 1) or
// V's rows of keys (bit 2, a transposed V). The encoder defines
// `mask_at(key, query)` and adds `finish` (flash_attn_store.wgsl: the
// result; flash_attn_partial.wgsl: the split's running max, sum and
// unnormalised output, for flash_attn_merge.wgsl to combine, so that a
// decode step's few (head, query) pairs still fill the GPU).

const MAX_D: u32 = 256u;

var<workgroup> qs: array<f32, MAX_D>;
var<workgroup> ps: array<f32, WG>;
// Paired V: each invocation's sums of two dims over its share of a tile's keys.
var<workgroup> vsums: array<vec2<f32>, WG>;
// Keys of the current tile up to the last one the query sees (0: none).
var<workgroup> live: u32;

// Query . key j, two dims per load when K is paired (p.z.z bit 0).
fn score(kb: u32, d: u32) -> f32 {
    var dot = 0.0;
    if ((p.z.z & 1u) != 0u) {
        for (var i = 0u; i < d; i += 2u) {
            let k2 = unpack2x16float(b_word(kb + 2u * i));
            dot = fma(qs[i], k2.x, fma(qs[i + 1u], k2.y, dot));
        }
        return dot;
    }
    for (var i = 0u; i < d; i++) {
        dot = fma(qs[i], load_b(kb + i * p.b.nb.x), dot);
    }
    return dot;
}

// V transposed, keys paired (p.z.z bit 2): Σ ps[jj] V[dim] over the
// tile's n keys t0.. for dim, four keys (two words) per step. ps is 0 past
// n, and the words there lie in V's row or past its binding (read as 0).
fn weigh_values_key_pairs(t0: u32, n: u32, hk: u32, dim: u32) -> f32 {
    let row = p.x.x + dim * p.x.y + hk * p.x.w + 2u * t0;
    var s = 0.0;
    for (var jj = 0u; jj < n; jj += 4u) {
        let w = vec4<f32>(ps[jj], ps[jj + 1u], ps[jj + 2u], ps[jj + 3u]);
        let v = vec4<f32>(unpack2x16float(c_word(row + 2u * jj)), unpack2x16float(c_word(row + 2u * jj + 4u)));
        // Masked keys weigh 0 and may lie over unwritten rows.
        s += dot(w, select(vec4<f32>(0.0), v, w != vec4<f32>(0.0)));
    }
    return s;
}

// Paired V (p.z.z bit 1): Σ ps[jj] V[dim] over the tile's n keys t0.., for the
// dims lid and lid + WG. The invocations split the tile's keys into groups,
// each invocation one word (two dims) of one group, so a tile takes n /
// groups steps rather than n; the groups' sums meet in `vsums`. Call from
// uniform control flow.
fn weigh_values_paired(t0: u32, n: u32, hk: u32, dv: u32, lid: u32) -> vec2<f32> {
    let words = dv / 2u;
    let groups = WG / words;
    let w = lid % words;
    let group = lid / words;
    var s = vec2<f32>(0.0);
    if (group < groups) {
        let vb = p.x.x + 4u * w + hk * p.x.w;
        for (var jj = group; jj < n; jj += groups) {
            let wt = ps[jj];
            let v2 = unpack2x16float(c_word(vb + (t0 + jj) * p.x.z));
            // Masked keys weigh 0 and may lie over unwritten rows.
            s = fma(vec2<f32>(wt), select(vec2<f32>(0.0), v2, wt != 0.0), s);
        }
    }
    vsums[lid] = s;
    workgroupBarrier();
    var out = vec2<f32>(0.0);
    for (var g = 0u; g < groups; g++) {
        if (lid < dv) {
            out.x += vsums[g * words + lid / 2u][lid & 1u];
        }
        if (lid + WG < dv) {
            out.y += vsums[g * words + (lid + WG) / 2u][lid & 1u];
        }
    }
    return out;
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let n_head = p.a.ne.z;
    let splits = p.z.y;
    let g = group_index(ids.wid, ids.nwg);
    // Uniform per workgroup, so the barriers below stay uniform.
    if (g >= n_head * p.a.ne.y * splits) {
        return;
    }
    let split = g % splits;
    let h = (g / splits) % n_head;
    let iq = g / splits / n_head;
    let hk = h / p.y.w;
    let d = p.a.ne.x;
    let dv = p.d.ne.x;
    let first = split * p.z.x;
    let n_kv = min(p.b.ne.y, first + p.z.x);
    for (var i = ids.lid; i < d; i += WG) {
        qs[i] = load_a(addr(p.a, vec4<u32>(i, iq, h, 0u)));
    }
    workgroupBarrier();
    let scale = bitcast<f32>(p.y.z);
    var m = NEG_INF;
    var l = 0.0;
    var acc0 = 0.0;
    var acc1 = 0.0;
    for (var t0 = first; t0 < n_kv; t0 += WG) {
        let j = t0 + ids.lid;
        var mk = NEG_INF;
        if (j < n_kv) {
            mk = mask_at(j, iq);
        }
        // The tile's keys up to the last one the query sees: a decode step's
        // cache is padded past its position, and those keys would weigh 0.
        let seen = wg_max(select(0.0, f32(ids.lid + 1u), mk > NEG_INF), ids);
        if (ids.lid == 0u) {
            live = u32(seen);
        }
        let n = workgroupUniformLoad(&live);
        if (n == 0u) {
            continue;
        }
        var s = mk;
        if (mk > NEG_INF) {
            s = score(addr(p.b, vec4<u32>(0u, j, hk, 0u)), d) * scale + mk;
        }
        let m_new = max(m, wg_max(s, ids));
        // While every key so far is masked there is nothing to weigh.
        var pj = 0.0;
        var alpha = 1.0;
        if (m_new > NEG_INF) {
            pj = exp(s - m_new);
            alpha = exp(m - m_new);
        }
        l = l * alpha + wg_sum(pj, ids);
        ps[ids.lid] = pj;
        workgroupBarrier();
        var s0 = 0.0;
        var s1 = 0.0;
        if ((p.z.z & 2u) != 0u) {
            let sv = weigh_values_paired(t0, n, hk, dv, ids.lid);
            s0 = sv.x;
            s1 = sv.y;
        } else if ((p.z.z & 4u) != 0u) {
            if (ids.lid < dv) {
                s0 = weigh_values_key_pairs(t0, n, hk, ids.lid);
            }
            if (ids.lid + WG < dv) {
                s1 = weigh_values_key_pairs(t0, n, hk, ids.lid + WG);
            }
        }
        for (var jj = select(0u, n, (p.z.z & 6u) != 0u); jj < n; jj++) {
            let w = ps[jj];
            if (w != 0.0) {
                if (ids.lid < dv) {
                    s0 = fma(w, v_at(t0 + jj, hk, ids.lid), s0);
                }
                if (ids.lid + WG < dv) {
                    s1 = fma(w, v_at(t0 + jj, hk, ids.lid + WG), s1);
                }
            }
        }
        acc0 = acc0 * alpha + s0;
        acc1 = acc1 * alpha + s1;
        m = m_new;
        workgroupBarrier();
    }
    finish(vec3<u32>(h, iq, split), m, l, vec2<f32>(acc0, acc1), ids.lid);
}
