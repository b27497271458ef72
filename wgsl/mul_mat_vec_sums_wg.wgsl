// The mat-vec kernel's reduction without subgroup operations: every
// column's four row sums go through one tree per row group over shared
// memory, all columns and groups in the same log2(RG_SIZE) barrier steps. Call put_partial for every
// part (PARTS), then sums_ready, from uniform control flow; column_total is
// valid in any invocation afterwards.
var<workgroup> partials: array<vec4<f32>, PARTS * WG>;

fn put_partial(col: u32, v: vec4<f32>, ids: Ids) {
    partials[col * WG + ids.lid] = v;
}

fn sums_ready(ids: Ids) {
    workgroupBarrier();
    for (var s = RG_SIZE / 2u; s > 0u; s = s >> 1u) {
        if (ids.lid % RG_SIZE < s) {
            for (var c = 0u; c < PARTS; c++) {
                partials[c * WG + ids.lid] += partials[c * WG + ids.lid + s];
            }
        }
        workgroupBarrier();
    }
}

fn column_total(col: u32, group: u32, ids: Ids) -> vec4<f32> {
    return partials[col * WG + group * RG_SIZE];
}
