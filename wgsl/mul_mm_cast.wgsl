// The activations `a` (f32, f16 or bf16 [K, N, B2, B3], any strides) of a
// product on cooperative matrices (or of a mat-vec), as f16 in the order its tiles take
// them: each column's units (of the weights' decoder: x_elem, n_units)
// one after another, unit u as the eight values at x_elem(u, 0..8), zero
// past K; columns in order, batches after columns. One invocation per
// unit and column writes its 16 bytes. Converting once here, where every
// row tile of the product used to load and convert the f32 activations
// again, halves their reads and takes the conversions out of its steps.
// `cast_load(byte)` (from the encoder) reads one activation: `a` as it is,
// or silu(gate) * up of a folded silu x up (gate in `a`, up `p.y.z` bytes
// further in the same binding).

fn cast_value(col: u32, u: u32, i: u32) -> f32 {
    let k = x_elem(u, i);
    return select(0.0, cast_load(col + min(k, p.a.ne.x - 1u) * p.a.nb.x), k < p.a.ne.x);
}

fn cast_pair(col: u32, u: u32, i: u32) -> u32 {
    return pack2x16float(vec2<f32>(cast_value(col, u, i), cast_value(col, u, i + 1u)));
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let g = group_index(ids.wid, ids.nwg) * WG + ids.lid;
    let units = n_units(p.a.ne.x);
    if (g >= units * p.a.ne.y * p.a.ne.z * p.a.ne.w) {
        return;
    }
    let u = g % units;
    let c = g / units;
    let n = c % p.a.ne.y;
    let b = c / p.a.ne.y;
    let col = addr(p.a, vec4<u32>(0u, n, b % p.a.ne.z, b / p.a.ne.z));
    let at = (p.d.offset >> 2u) + 4u * g;
    d[at] = cast_pair(col, u, 0u);
    d[at + 1u] = cast_pair(col, u, 2u);
    d[at + 2u] = cast_pair(col, u, 4u);
    d[at + 3u] = cast_pair(col, u, 6u);
}
