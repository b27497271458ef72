// flash_attn_ext for prompts: a workgroup takes BQ queries of one head and
// walks the keys in tiles of BK, each tile's K and then V loaded once into
// workgroup memory for all BQ queries (the per-query kernel,
// flash_attn.wgsl, reads every key once per query). Per tile: the mask
// first (a tile no query sees is skipped, as a causal prompt's later tiles
// are for its early queries), the scores of every (query, key) pair, an
// online-softmax step per query, then the weighted values added to each
// query's output, which the invocations hold in registers: TPQ of them
// per query, each 16 dims (lid % TPQ + TPQ i). Head sizes up to DMAX with
// Dv equal to it; the encoder defines BQ and DMAX (16 x 128 or 32 x 64,
// WG = 128). Params as flash_attn.wgsl's (q = a, K = b, the result = d;
// V, the mask, the scale and the heads per KV head in p.x and p.y).

const BK: u32 = 32u;
// Invocations per query.
const TPQ: u32 = WG / BQ;

var<workgroup> q_tile: array<f32, BQ * DMAX>;
// K, then V, of one tile: key j's dims at j * (DMAX + 1), padded so that
// invocations reading one dim of consecutive keys hit different banks.
var<workgroup> kv_tile: array<f32, BK * (DMAX + 1u)>;
// Scores, then weights, of one tile: query r's at r * (BK + 1).
var<workgroup> s_tile: array<f32, BQ * (BK + 1u)>;
var<workgroup> row_max: array<f32, BQ>;
var<workgroup> row_sum: array<f32, BQ>;
var<workgroup> row_alpha: array<f32, BQ>;
// Whether any query sees a key of the tile, by tile parity: a flag is
// cleared a tile before it is set, between barriers.
var<workgroup> seen: array<u32, 2>;

// Dims i, i + TPQ, i + 2 TPQ, i + 3 TPQ of key j in kv_tile (zero past d).
fn kv4(j: u32, i: u32, d: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var m = 0u; m < 4u; m++) {
        let c = i + m * TPQ;
        if (c < d) {
            v[m] = kv_tile[j * (DMAX + 1u) + c];
        }
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let n_head = p.a.ne.z;
    let n_q = p.a.ne.y;
    let tiles_q = (n_q + BQ - 1u) / BQ;
    let g = group_index(ids.wid, ids.nwg);
    if (g >= n_head * tiles_q) {
        return;
    }
    let h = g % n_head;
    let q0 = (g / n_head) * BQ;
    let hk = h / p.y.w;
    let d = p.a.ne.x;
    let n_kv = p.b.ne.y;
    let scale = bitcast<f32>(p.y.z);
    let lid = ids.lid;

    for (var e = lid; e < BQ * d; e += WG) {
        let r = e / d;
        let iq = min(q0 + r, n_q - 1u);
        q_tile[r * DMAX + e % d] = load_a(addr(p.a, vec4<u32>(e % d, iq, h, 0u)));
    }
    if (lid < BQ) {
        row_max[lid] = NEG_INF;
        row_sum[lid] = 0.0;
    }
    if (lid == 0u) {
        seen[0] = 0u;
    }
    // This invocation's query, and its 16 output dims: dim lid % TPQ +
    // TPQ (4k + m) is out[k][m].
    let my_row = lid / TPQ;
    let my_dim = lid % TPQ;
    var out0 = vec4<f32>(0.0);
    var out1 = vec4<f32>(0.0);
    var out2 = vec4<f32>(0.0);
    var out3 = vec4<f32>(0.0);

    for (var k0 = 0u; k0 < n_kv; k0 += BK) {
        let parity = (k0 / BK) & 1u;
        workgroupBarrier();
        if (lid == 0u) {
            seen[parity ^ 1u] = 0u;
        }
        // The mask of the tile into s_tile; whether any query sees a key.
        var visible = false;
        for (var e = lid; e < BQ * BK; e += WG) {
            let r = e / BK;
            let j = e % BK;
            var m = NEG_INF;
            if (k0 + j < n_kv && q0 + r < n_q) {
                m = max(mask_at(k0 + j, q0 + r), NEG_INF);
            }
            s_tile[r * (BK + 1u) + j] = m;
            visible = visible || m > NEG_INF;
        }
        if (visible) {
            seen[parity] = 1u;
        }
        if (workgroupUniformLoad(&seen[parity]) == 0u) {
            continue;
        }
        // K of the tile (rows past the end read as the last key: masked).
        for (var e = lid; e < BK * d; e += WG) {
            let j = e / d;
            let key = min(k0 + j, n_kv - 1u);
            kv_tile[j * (DMAX + 1u) + e % d] = load_b(addr(p.b, vec4<u32>(e % d, key, hk, 0u)));
        }
        workgroupBarrier();
        for (var e = lid; e < BQ * BK; e += WG) {
            let r = e / BK;
            let j = e % BK;
            let at = r * (BK + 1u) + j;
            let m = s_tile[at];
            if (m > NEG_INF) {
                var dot = 0.0;
                for (var c = 0u; c < d; c++) {
                    dot = fma(q_tile[r * DMAX + c], kv_tile[j * (DMAX + 1u) + c], dot);
                }
                s_tile[at] = dot * scale + m;
            }
        }
        workgroupBarrier();
        // One online-softmax step per query; the scores become weights.
        if (lid < BQ) {
            let base = lid * (BK + 1u);
            var tile_max = NEG_INF;
            for (var j = 0u; j < BK; j++) {
                tile_max = max(tile_max, s_tile[base + j]);
            }
            let m_old = row_max[lid];
            let m_new = max(m_old, tile_max);
            var sum = 0.0;
            for (var j = 0u; j < BK; j++) {
                let s = s_tile[base + j];
                let w = select(0.0, exp(s - m_new), s > NEG_INF);
                s_tile[base + j] = w;
                sum += w;
            }
            let alpha = select(1.0, exp(m_old - m_new), m_new > NEG_INF);
            row_alpha[lid] = alpha;
            row_sum[lid] = row_sum[lid] * alpha + sum;
            row_max[lid] = m_new;
        }
        // V of the tile over K's, keys fastest (a transposed V's rows).
        for (var e = lid; e < BK * d; e += WG) {
            let j = e % BK;
            let c = e / BK;
            kv_tile[j * (DMAX + 1u) + c] = v_at(min(k0 + j, n_kv - 1u), hk, c);
        }
        workgroupBarrier();
        let alpha = row_alpha[my_row];
        let base = my_row * (BK + 1u);
        out0 *= alpha;
        out1 *= alpha;
        out2 *= alpha;
        out3 *= alpha;
        for (var j = 0u; j < BK; j++) {
            // Masked keys weigh 0 and may lie over unwritten rows.
            let w = s_tile[base + j];
            if (w != 0.0) {
                out0 = fma(vec4<f32>(w), kv4(j, my_dim, d), out0);
                out1 = fma(vec4<f32>(w), kv4(j, my_dim + 4u * TPQ, d), out1);
                out2 = fma(vec4<f32>(w), kv4(j, my_dim + 8u * TPQ, d), out2);
                out3 = fma(vec4<f32>(w), kv4(j, my_dim + 12u * TPQ, d), out3);
            }
        }
    }

    let iq = q0 + my_row;
    if (iq < n_q) {
        let l = row_sum[my_row];
        let inv = select(0.0, 1.0 / l, l > 0.0);
        let outs = array<vec4<f32>, 4>(out0, out1, out2, out3);
        for (var i = 0u; i < 16u; i++) {
            let c = my_dim + i * TPQ;
            if (c < d) {
                store_d(addr(p.d, vec4<u32>(c, h, iq, 0u)), outs[i / 4u][i % 4u] * inv);
            }
        }
    }
}
