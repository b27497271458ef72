// flash_attn_ext: softmax(scale * K^T q + mask) V for one (head, query,
// key split) per workgroup, over tiles of WG keys with an online softmax:
// each invocation scores one key of the tile, the tile's max and sum come
// from workgroup reductions, then each invocation updates the output dims it
// owns (lid and lid + WG). Values and the mask are addressed from words
// (Params has room for three tensors: q = a, K = b, the result = d).
// p.x: V's offset and byte strides along dims, keys and heads;
// p.y: the mask's offset and row stride, scale (f32 bits), query heads per
// KV head; p.z: keys per split and splits. The encoder defines
// `mask_at(key, query)` and adds `finish` (flash_attn_store.wgsl: the
// result; flash_attn_partial.wgsl: the split's running max, sum and
// unnormalised output, for flash_attn_merge.wgsl to combine, so that a
// decode step's few (head, query) pairs still fill the GPU).

const MAX_D: u32 = 256u;
// The lowest finite f32: masked keys score -inf, below it.
const NEG_INF: f32 = -3.40282347e38;

var<workgroup> qs: array<f32, MAX_D>;
var<workgroup> ps: array<f32, WG>;

fn v_at(key: u32, kv_head: u32, dim: u32) -> f32 {
    return load_c(p.x.x + dim * p.x.y + key * p.x.z + kv_head * p.x.w);
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
        var s = NEG_INF;
        if (j < n_kv) {
            let kb = addr(p.b, vec4<u32>(0u, j, hk, 0u));
            var dot = 0.0;
            for (var i = 0u; i < d; i++) {
                dot = fma(qs[i], load_b(kb + i * p.b.nb.x), dot);
            }
            s = dot * scale + mask_at(j, iq);
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
        let n = min(WG, n_kv - t0);
        var s0 = 0.0;
        var s1 = 0.0;
        for (var jj = 0u; jj < n; jj++) {
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
