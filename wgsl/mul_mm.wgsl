// mul_mat, matrix times matrix (prompt processing): a workgroup of 256
// computes a TM x TM tile of d (TM = 16 R: R is 4 or 8, set by the
// encoder), stepping over K in BK positions: UNITS 8-value units of each
// weight row (BK = 8 UNITS, so a step holds 256 units, one per invocation:
// every weight block is read once per tile of columns) and the matching
// activations of the tile's columns, gathered into shared memory; then each
// invocation accumulates an R x R block of outputs from the two tiles, as
// (R/4)^2 4 x 4 blocks 64 rows and columns apart. A larger R reads shared
// memory less per multiply-add (4 vs 2 per value loaded) and decodes each
// weight for more columns; a smaller one leaves fewer idle workgroups on
// small products.
// p.x: row tiles, column tiles, a's batch divisors r2 and r3.

const TM: u32 = 16u * R;
const TN: u32 = TM;
const UNITS: u32 = 256u / TM;
const BK: u32 = 8u * UNITS;
// Blocks of 4 rows (and of 4 columns) per invocation.
const BLOCKS: u32 = R / 4u;

// k-major tiles of vec4s: ta[k * TM/4 + m/4], tb[k * TN/4 + (n/4 ^ k % 16)],
// the xor spreading one k-run of stores (consecutive invocations) over banks.
var<workgroup> ta: array<vec4<f32>, BK * TM / 4u>;
var<workgroup> tb: array<vec4<f32>, BK * TN / 4u>;

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

// What an invocation loads for the tiles (see main).
struct Loader {
    arow: u32,
    ja: u32,
    kk: u32,
    cb: u32,
    bbase: u32,
    n0: u32,
    last_col: u32,
    k_len: u32,
}

// One step's loads: the invocation's weight unit and its eight activations.
struct Step {
    w: Unit,
    b: array<f32, 8>,
}

fn load_step(ld: Loader, st: u32) -> Step {
    var out: Step;
    out.w = unit_w(ld.arow, UNITS * st + ld.ja);
    let k = x_elem(UNITS * st + (ld.kk >> 3u), ld.kk & 7u);
    let bk = ld.bbase + k * p.b.nb.x;
    for (var j = 0u; j < 8u; j++) {
        let n = ld.cb + (256u / BK) * j;
        out.b[j] = select(0.0, load_b(bk + min(ld.n0 + n, ld.last_col) * p.b.nb.y), k < ld.k_len);
    }
    return out;
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
    // of columns cb + (256 / BK) j. Out-of-range rows and columns read the
    // last one and are not stored.
    let ma = lid / UNITS;
    let ja = lid % UNITS;
    let arow = addr(p.a, vec4<u32>(0u, min(m0 + ma, p.a.ne.y - 1u), i2 / p.x.z, i3 / p.x.w));
    let kk = lid % BK;
    let cb = lid / BK;
    let bbase = addr(p.b, vec4<u32>(0u, 0u, i2, i3));

    // Outputs: rows 4tm + 64i..+4 and columns 4tn + 64j..+4 for i, j <
    // BLOCKS; acc[4 (BLOCKS i + j) + c] is column 4tn + 64j + c of rows
    // block i.
    let tm = lid % 16u;
    let tn = lid / 16u;
    var acc: array<vec4<f32>, 4u * BLOCKS * BLOCKS>;

    // n_units is a multiple of 4 for every type. Each step's global loads
    // are issued before the previous step's multiply-adds (a register
    // prefetch), so their latency hides behind them.
    let steps = n_units(k_len) / UNITS;
    let ld = Loader(arow, ja, kk, cb, bbase, n0, last_col, k_len);
    var next = load_step(ld, 0u);
    for (var st = 0u; st < steps; st++) {
        put_a(8u * ja, ma, next.w[0]);
        put_a(8u * ja + 4u, ma, next.w[1]);
        for (var j = 0u; j < 8u; j++) {
            let n = cb + (256u / BK) * j;
            tb[kk * (TN / 4u) + ((n / 4u) ^ (kk % 16u))][n % 4u] = next.b[j];
        }
        workgroupBarrier();
        if (st + 1u < steps) {
            next = load_step(ld, st + 1u);
        }
        for (var t = 0u; t < BK; t++) {
            var av: array<vec4<f32>, BLOCKS>;
            var bv: array<vec4<f32>, BLOCKS>;
            for (var i = 0u; i < BLOCKS; i++) {
                av[i] = ta[t * (TM / 4u) + 16u * i + tm];
                bv[i] = tb[t * (TN / 4u) + ((16u * i + tn) ^ (t % 16u))];
            }
            for (var i = 0u; i < BLOCKS; i++) {
                for (var j = 0u; j < BLOCKS; j++) {
                    let o = 4u * (BLOCKS * i + j);
                    acc[o] = fma(av[i], vec4<f32>(bv[j].x), acc[o]);
                    acc[o + 1u] = fma(av[i], vec4<f32>(bv[j].y), acc[o + 1u]);
                    acc[o + 2u] = fma(av[i], vec4<f32>(bv[j].z), acc[o + 2u]);
                    acc[o + 3u] = fma(av[i], vec4<f32>(bv[j].w), acc[o + 3u]);
                }
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < BLOCKS; i++) {
        for (var j = 0u; j < BLOCKS; j++) {
            let m = m0 + 4u * tm + 64u * i;
            let n = n0 + 4u * tn + 64u * j;
            let o = 4u * (BLOCKS * i + j);
            put_d(m, n, i2, i3, acc[o]);
            put_d(m, n + 1u, i2, i3, acc[o + 1u]);
            put_d(m, n + 2u, i2, i3, acc[o + 2u]);
            put_d(m, n + 3u, i2, i3, acc[o + 3u]);
        }
    }
}
