// top_k: the k best entries of each chunk of a row's values, or of an
// earlier top_k's (value, index) pairs, best first, as pairs; one
// workgroup per chunk (the sampler's top-k on the device). Each invocation
// holds up to PER entries in registers; each of the k rounds picks the
// best entry after the previous pick in the order (larger value, then
// lower index) with two max reductions, as argmax does. Indices are f32
// (exact below 2^24); padding is (-inf, -1).
// p.x: k, entries per chunk, what the entries are (0: a row's values, 1:
// pairs, 2: rows of one chunk each, indices within the row), entries in
// all.

const PER: u32 = 16u;

fn is_nan(v: f32) -> bool {
    // Compilers may assume floats are never NaN, so look at the bits.
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let c = group_index(ids.wid, ids.nwg);
    let k = p.x.x;
    let chunk = p.x.y;
    let pairs = p.x.z == 1u;
    let in_row = p.x.z == 2u;
    let n = p.x.w;
    if (c * chunk >= n) {
        return;
    }
    let neg_inf = bitcast<f32>(0xff800000u);
    var v: array<f32, PER>;
    var at: array<f32, PER>;
    for (var j = 0u; j < PER; j++) {
        let e = ids.lid + j * WG;
        let i = c * chunk + e;
        v[j] = neg_inf;
        at[j] = -1.0;
        if (e < chunk && i < n) {
            var value = 0.0;
            var index = select(f32(i), f32(e), in_row);
            if (pairs) {
                value = load_a(p.a.offset + 8u * i);
                index = load_a(p.a.offset + 8u * i + 4u);
            } else {
                value = load_a(addr(p.a, vec4<u32>(i, 0u, 0u, 0u)));
            }
            if (index >= 0.0 && !is_nan(value)) {
                v[j] = value;
                at[j] = index;
            }
        }
    }
    var last_v = 0.0;
    var last_at = -1.0;
    for (var r = 0u; r < k; r++) {
        var bv = neg_inf;
        var bat = -1.0;
        for (var j = 0u; j < PER; j++) {
            let after_last = last_at < 0.0 || v[j] < last_v || (v[j] == last_v && at[j] > last_at);
            let better = bat < 0.0 || v[j] > bv || (v[j] == bv && at[j] < bat);
            if (at[j] >= 0.0 && after_last && better) {
                bv = v[j];
                bat = at[j];
            }
        }
        let m = wg_max(select(neg_inf, bv, bat >= 0.0), ids);
        let first = -wg_max(select(neg_inf, -bat, bat >= 0.0 && bv == m), ids);
        let found = first < 16777216.0;
        let o = p.d.offset + 8u * (c * k + r);
        // The entry's own invocation stores it (m may be the other zero).
        if (found && bat == first) {
            store_d(o, bv);
            store_d(o + 4u, bat);
        }
        if (!found && ids.lid == 0u) {
            store_d(o, neg_inf);
            store_d(o + 4u, -1.0);
        }
        if (found) {
            last_v = m;
            last_at = first;
        } else {
            // Nothing is left: every later round pads.
            last_v = neg_inf;
            last_at = 16777216.0;
        }
    }
}
