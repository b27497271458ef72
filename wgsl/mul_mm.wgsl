// mul_mat, matrix times matrix (prompt processing): a workgroup of 256
// computes a TM x TN tile of d, stepping over K four 8-value units (32
// values) at a time. Each step decodes the four units of each of the tile's
// TM weight rows (one per invocation; every weight block is read once per
// tile of columns) and gathers the matching activations of its TN columns
// into shared memory; then each invocation accumulates a 4 x 4 block of
// outputs from the two tiles.
// p.x: row tiles, column tiles, a's batch divisors r2 and r3.
// WG is 256: 32 k-positions x 8 columns load b, 16 x 16 threads compute.

const TM: u32 = 64u;
const TN: u32 = 64u;

// k-major tiles of vec4s: ta[k * TM/4 + m/4], tb[k * TN/4 + (n/4 ^ k % 16)],
// the xor spreading one k-run of stores (consecutive invocations) over banks.
var<workgroup> ta: array<vec4<f32>, 8u * TM>;
var<workgroup> tb: array<vec4<f32>, 8u * TN>;

// Stores tile positions k0..k0+4 of row `m` (k-major, see above).
fn put_a(k0: u32, m: u32, v: vec4<f32>) {
    let i = k0 * (TM / 4u) + m / 4u;
    let c = m % 4u;
    ta[i][c] = v.x;
    ta[i + TM / 4u][c] = v.y;
    ta[i + 2u * (TM / 4u)][c] = v.z;
    ta[i + 3u * (TM / 4u)][c] = v.w;
}

// Stores rows m..m+4 of column n, those that exist.
fn put_d(m: u32, n: u32, i2: u32, i3: u32, v: vec4<f32>) {
    if (n >= p.b.ne.y) {
        return;
    }
    let at = addr(p.d, vec4<u32>(m, n, i2, i3));
    let rows = p.a.ne.y;
    if (m < rows) { store_d(at, v.x); }
    if (m + 1u < rows) { store_d(at + p.d.nb.x, v.y); }
    if (m + 2u < rows) { store_d(at + 2u * p.d.nb.x, v.z); }
    if (m + 3u < rows) { store_d(at + 3u * p.d.nb.x, v.w); }
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let g = group_index(ids.wid, ids.nwg);
    if (g >= n_tiles()) {
        return;
    }
    let origin = tile_origin(g);
    let m0 = origin.x;
    let n0 = origin.y;
    let i2 = origin.z;
    let i3 = origin.w;
    let last_col = p.b.ne.y - 1u;
    let k_len = p.b.ne.x;
    let lid = ids.lid;

    // Loaders: invocation lid decodes unit ja of row ma (tile positions
    // 8ja..8ja+8), and gathers tile position kk (unit kk / 8, weight kk % 8)
    // of columns cb + 8j. Out-of-range rows and columns read the last one and
    // are not stored.
    let ma = lid >> 2u;
    let ja = lid & 3u;
    let arow = addr(p.a, vec4<u32>(0u, min(m0 + ma, p.a.ne.y - 1u), i2 / p.x.z, i3 / p.x.w));
    let kk = lid & 31u;
    let cb = lid >> 5u;
    let bbase = addr(p.b, vec4<u32>(0u, 0u, i2, i3));

    // Outputs: rows 4tm..4tm+4, columns 4tn..4tn+4; acc[j] is column 4tn + j.
    let tm = lid % (TM / 4u);
    let tn = lid / (TM / 4u);
    var acc: array<vec4<f32>, 4>;

    // n_units is a multiple of 4 for every type.
    let steps = n_units(k_len) / 4u;
    for (var st = 0u; st < steps; st++) {
        let w = unit_w(arow, 4u * st + ja);
        put_a(8u * ja, ma, w[0]);
        put_a(8u * ja + 4u, ma, w[1]);
        let k = x_elem(4u * st + (kk >> 3u), kk & 7u);
        let bk = bbase + k * p.b.nb.x;
        for (var j = 0u; j < TN / 8u; j++) {
            let n = cb + 8u * j;
            let v = select(0.0, load_b(bk + min(n0 + n, last_col) * p.b.nb.y), k < k_len);
            tb[kk * (TN / 4u) + ((n / 4u) ^ (kk % 16u))][n % 4u] = v;
        }
        workgroupBarrier();
        for (var t = 0u; t < 32u; t++) {
            let av = ta[t * (TM / 4u) + tm];
            let bv = tb[t * (TN / 4u) + (tn ^ (t % 16u))];
            acc[0] = fma(av, vec4<f32>(bv.x), acc[0]);
            acc[1] = fma(av, vec4<f32>(bv.y), acc[1]);
            acc[2] = fma(av, vec4<f32>(bv.z), acc[2]);
            acc[3] = fma(av, vec4<f32>(bv.w), acc[3]);
        }
        workgroupBarrier();
    }

    let m = m0 + 4u * tm;
    let n = n0 + 4u * tn;
    put_d(m, n, i2, i3, acc[0]);
    put_d(m, n + 1u, i2, i3, acc[1]);
    put_d(m, n + 2u, i2, i3, acc[2]);
    put_d(m, n + 3u, i2, i3, acc[3]);
}
