// flash_attn_ext for prompts: a workgroup takes BQ queries of one head and
// walks the keys in tiles of BK, each tile's K and then V loaded once into
// workgroup memory for all BQ queries (the per-query kernel,
// flash_attn.wgsl, reads every key once per query). Per tile: the mask
// first (a tile no query sees is skipped, as a causal prompt's later tiles
// are for its early queries), the scores of every (query, key) pair (each
// invocation one key for PAIRS queries, so a key's value loads once for
// all of them), an online-softmax step per query (TPQ invocations per
// query), then the weighted values added to the outputs, which the
// invocations hold in registers: four queries by four dims each, so a
// loaded weight and value serve four products. Head sizes up to DMAX with
// Dv equal to it; the encoder defines BQ and DMAX (16 x 128 or 32 x 64,
// WG = 128). Params as flash_attn.wgsl's (q = a, K = b, the result = d;
// V, the mask, the scale and the heads per KV head in p.x and p.y).

const BK: u32 = 32u;
// Queries each invocation scores one key for (4 or 8).
const PAIRS: u32 = BQ * BK / WG;
// Invocations per query in the softmax step, and keys each of them takes.
const TPQ: u32 = WG / BQ;
const KPT: u32 = BK / TPQ;
// Output dims per row group: an invocation holds dims lid % DG + DG m of
// queries 4 (lid / DG) + k, m and k in 0..4.
const DG: u32 = DMAX / 4u;

var<workgroup> q_tile: array<f32, BQ * DMAX>;
// K, then V, of one tile: key j's dims at j * (DMAX + 1), padded so that
// invocations reading one dim of consecutive keys hit different banks.
var<workgroup> kv_tile: array<f32, BK * (DMAX + 1u)>;
// Scores, then weights, of one tile: query r's at r * (BK + 1).
var<workgroup> s_tile: array<f32, BQ * (BK + 1u)>;
// The softmax step's partial maxima, then sums, per query and invocation.
var<workgroup> partial: array<f32, WG>;
var<workgroup> row_max: array<f32, BQ>;
var<workgroup> row_sum: array<f32, BQ>;
var<workgroup> row_alpha: array<f32, BQ>;
// Whether any query sees a key of the tile, by tile parity: a flag is
// cleared a tile before it is set, between barriers.
var<workgroup> seen: array<u32, 2>;

// Dims c, c + DG, c + 2 DG, c + 3 DG of key j in kv_tile (zero past d).
fn kv4(j: u32, c: u32, d: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var m = 0u; m < 4u; m++) {
        if (c + m * DG < d) {
            v[m] = kv_tile[j * (DMAX + 1u) + c + m * DG];
        }
    }
    return v;
}

// Weights of key j for queries r0..r0 + 4.
fn w4(r0: u32, j: u32) -> vec4<f32> {
    let at = r0 * (BK + 1u) + j;
    return vec4<f32>(s_tile[at], s_tile[at + BK + 1u], s_tile[at + 2u * (BK + 1u)], s_tile[at + 3u * (BK + 1u)]);
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
    // The key this invocation scores, and its first query (then every
    // WG / BK-th).
    let my_key = lid % BK;
    let my_query = lid / BK;
    // The softmax step's query and keys.
    let sm_row = lid / TPQ;
    let sm_key = (lid % TPQ) * KPT;
    // The outputs held: queries out_row..out_row + 4, dims out_dim + DG m.
    let out_row = 4u * (lid / DG);
    let out_dim = lid % DG;
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
        // Scores: key my_key against queries my_query + (WG / BK) i.
        var dots: array<f32, PAIRS>;
        for (var i = 0u; i < PAIRS; i++) {
            dots[i] = 0.0;
        }
        for (var c = 0u; c < d; c++) {
            let k = kv_tile[my_key * (DMAX + 1u) + c];
            for (var i = 0u; i < PAIRS; i++) {
                dots[i] = fma(q_tile[(my_query + (WG / BK) * i) * DMAX + c], k, dots[i]);
            }
        }
        for (var i = 0u; i < PAIRS; i++) {
            let at = (my_query + (WG / BK) * i) * (BK + 1u) + my_key;
            let m = s_tile[at];
            if (m > NEG_INF) {
                s_tile[at] = dots[i] * scale + m;
            }
        }
        workgroupBarrier();
        // The softmax step: each query's maximum over its TPQ invocations'
        // keys, their weights, then their sums.
        let base = sm_row * (BK + 1u) + sm_key;
        var part = NEG_INF;
        for (var j = 0u; j < KPT; j++) {
            part = max(part, s_tile[base + j]);
        }
        partial[lid] = part;
        workgroupBarrier();
        var m_new = row_max[sm_row];
        for (var t = 0u; t < TPQ; t++) {
            m_new = max(m_new, partial[sm_row * TPQ + t]);
        }
        var sum = 0.0;
        for (var j = 0u; j < KPT; j++) {
            let s = s_tile[base + j];
            let w = select(0.0, exp(s - m_new), s > NEG_INF);
            s_tile[base + j] = w;
            sum += w;
        }
        workgroupBarrier();
        partial[lid] = sum;
        workgroupBarrier();
        if (lid % TPQ == 0u) {
            var total = 0.0;
            for (var t = 0u; t < TPQ; t++) {
                total += partial[lid + t];
            }
            let m_old = row_max[sm_row];
            let alpha = select(1.0, exp(m_old - m_new), m_new > NEG_INF);
            row_alpha[sm_row] = alpha;
            row_sum[sm_row] = row_sum[sm_row] * alpha + total;
            row_max[sm_row] = m_new;
        }
        // V of the tile over K's, keys fastest (a transposed V's rows).
        for (var e = lid; e < BK * d; e += WG) {
            let j = e % BK;
            let c = e / BK;
            kv_tile[j * (DMAX + 1u) + c] = v_at(min(k0 + j, n_kv - 1u), hk, c);
        }
        workgroupBarrier();
        let alpha = vec4<f32>(row_alpha[out_row], row_alpha[out_row + 1u], row_alpha[out_row + 2u], row_alpha[out_row + 3u]);
        out0 *= alpha.x;
        out1 *= alpha.y;
        out2 *= alpha.z;
        out3 *= alpha.w;
        for (var j = 0u; j < BK; j++) {
            // Masked keys weigh 0 and may lie over unwritten rows.
            let w = w4(out_row, j);
            if (any(w != vec4<f32>(0.0))) {
                let v = kv4(j, out_dim, d);
                out0 = fma(vec4<f32>(w.x), v, out0);
                out1 = fma(vec4<f32>(w.y), v, out1);
                out2 = fma(vec4<f32>(w.z), v, out2);
                out3 = fma(vec4<f32>(w.w), v, out3);
            }
        }
    }

    let outs = array<vec4<f32>, 4>(out0, out1, out2, out3);
    for (var k = 0u; k < 4u; k++) {
        let iq = q0 + out_row + k;
        if (iq < n_q) {
            let l = row_sum[out_row + k];
            let inv = select(0.0, 1.0 / l, l > 0.0);
            for (var m = 0u; m < 4u; m++) {
                let c = out_dim + m * DG;
                if (c < d) {
                    store_d(addr(p.d, vec4<u32>(c, h, iq, 0u)), outs[k][m] * inv);
                }
            }
        }
    }
}
