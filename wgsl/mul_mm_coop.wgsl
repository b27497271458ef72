// mul_mat, matrix times matrix on cooperative matrices (tensor cores): a
// workgroup of eight 32-wide subgroups computes a 128 x 128 tile of d,
// stepping over K eight 8-value units (64 values) at a time (the last step
// of a row of an odd number of four-unit groups is half zeros). Each step
// decodes the tile's weights and gathers the matching
// activations into f16 tiles in workgroup memory; each subgroup then
// multiplies a 32 x 64 block as 2 x 4 16x16x16 products with f32
// accumulators. Each accumulator goes to d through a 16 x 16 scratch of its
// subgroup, so partial tiles and any strides store like mul_mm's. Every
// coopLoad/coopStore stride is a literal (naga 30's SPIR-V writer requires
// it); cooperative operations sit in uniform control flow.
// p.x: row tiles, column tiles, a's batch divisors r2 and r3.

const TM: u32 = 128u;
const TN: u32 = 128u;
// Row stride of the f16 tiles: 64 values and 8 of padding (144 bytes, a
// multiple of 16 as cooperative loads want).
const SK: u32 = 72u;

// ta[m * SK + t]: weight t of the step (unit t / 8, value t % 8) of row m;
// tb[n * SK + t]: the activation of column n at the same row position.
var<workgroup> ta: array<f16, TM * SK>;
var<workgroup> tb: array<f16, TN * SK>;
// One finished 16 x 16 product per subgroup, column-major.
var<workgroup> tc: array<f32, 8u * 256u>;

// Stores this subgroup's product `c`, rows m..m+16 and columns n..n+16 of
// d, those that exist, through its scratch.
fn store_block(c: coop_mat16x16<f32, C>, ids: Ids, m: u32, n: u32, i2: u32, i3: u32, live: bool) {
    let base = 256u * ids.sgid;
    coopStore(c, &tc[base], 16u);
    workgroupBarrier();
    for (var e = ids.sid; e < 256u; e += 32u) {
        let mm = m + e % 16u;
        let nn = n + e / 16u;
        if (live && mm < p.a.ne.y && nn < p.b.ne.y) {
            store_d(addr(p.d, vec4<u32>(mm, nn, i2, i3)), tc[base + e]);
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    // A workgroup past the tiles (the grid rounds up) computes tile 0 and
    // stores nothing: cooperative operations need uniform control flow.
    let flat = group_index(ids.wid, ids.nwg);
    let live = flat < n_tiles();
    let origin = tile_origin(select(0u, flat, live));
    let m0 = origin.x;
    let n0 = origin.y;
    let i2 = origin.z;
    let i3 = origin.w;
    let last_col = p.b.ne.y - 1u;
    let k_len = p.b.ne.x;
    let lid = ids.lid;

    // Weight loaders: invocation lid decodes units 4 * (lid & 1) to 4 *
    // (lid & 1) + 4 of row lid >> 1. Activation loaders: position lid & 63
    // of columns (lid >> 6) + 4j. Rows and columns past the end read the
    // last one and are not stored. (Loops of fixed trip counts, so the
    // loads of one step are all in flight together: a version looping over
    // the tile with the invocation index as start measured 1.5x slower.)
    let ma = lid >> 1u;
    let ja = 4u * (lid & 1u);
    let arow = addr(p.a, vec4<u32>(0u, min(m0 + ma, p.a.ne.y - 1u), i2 / p.x.z, i3 / p.x.w));
    let kk = lid & 63u;
    let cb = lid >> 6u;
    let bbase = addr(p.b, vec4<u32>(0u, 0u, i2, i3));

    // This subgroup's 32 x 64 block.
    let r0 = 32u * (ids.sgid & 3u);
    let c0 = 64u * (ids.sgid >> 2u);
    var c00: coop_mat16x16<f32, C>;
    var c01: coop_mat16x16<f32, C>;
    var c02: coop_mat16x16<f32, C>;
    var c03: coop_mat16x16<f32, C>;
    var c10: coop_mat16x16<f32, C>;
    var c11: coop_mat16x16<f32, C>;
    var c12: coop_mat16x16<f32, C>;
    var c13: coop_mat16x16<f32, C>;

    let units = n_units(k_len);
    let steps = (units + 7u) / 8u;
    for (var st = 0u; st < steps; st++) {
        for (var j = 0u; j < 4u; j++) {
            let u = 8u * st + ja + j;
            // Past the row's last unit (a half step): zeros, not the next row.
            let w = unit_w(arow, min(u, units - 1u));
            let live_u = u < units;
            let at = ma * SK + 8u * (ja + j);
            for (var i = 0u; i < 4u; i++) {
                ta[at + i] = f16(select(0.0, w[0][i], live_u));
                ta[at + 4u + i] = f16(select(0.0, w[1][i], live_u));
            }
        }
        let ub = 8u * st + (kk >> 3u);
        let k = x_elem(min(ub, units - 1u), kk & 7u);
        let bk = bbase + k * p.b.nb.x;
        let live_k = ub < units && k < k_len;
        for (var j = 0u; j < TN / 4u; j++) {
            let n = cb + 4u * j;
            let v = select(0.0, load_b(bk + min(n0 + n, last_col) * p.b.nb.y), live_k);
            tb[n * SK + kk] = f16(v);
        }
        workgroupBarrier();
        for (var h = 0u; h < 64u; h += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&ta[r0 * SK + h], 72u);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&ta[(r0 + 16u) * SK + h], 72u);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&tb[c0 * SK + h], 72u);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&tb[(c0 + 16u) * SK + h], 72u);
            let b2 = coopLoad<coop_mat16x16<f16, B>>(&tb[(c0 + 32u) * SK + h], 72u);
            let b3 = coopLoad<coop_mat16x16<f16, B>>(&tb[(c0 + 48u) * SK + h], 72u);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c02 = coopMultiplyAdd(a0, b2, c02);
            c03 = coopMultiplyAdd(a0, b3, c03);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            c12 = coopMultiplyAdd(a1, b2, c12);
            c13 = coopMultiplyAdd(a1, b3, c13);
        }
        workgroupBarrier();
    }

    let m = m0 + r0;
    let n = n0 + c0;
    store_block(c00, ids, m, n, i2, i3, live);
    store_block(c01, ids, m, n + 16u, i2, i3, live);
    store_block(c02, ids, m, n + 32u, i2, i3, live);
    store_block(c03, ids, m, n + 48u, i2, i3, live);
    store_block(c10, ids, m + 16u, n, i2, i3, live);
    store_block(c11, ids, m + 16u, n + 16u, i2, i3, live);
    store_block(c12, ids, m + 16u, n + 32u, i2, i3, live);
    store_block(c13, ids, m + 16u, n + 48u, i2, i3, live);
}
