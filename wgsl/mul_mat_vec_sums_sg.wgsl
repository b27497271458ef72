// The mat-vec kernel's reduction with subgroup operations: each column's
// four row sums are added over each subgroup (one vec4 subgroupAdd), the
// subgroups' partials meet in shared memory, and one barrier separates the
// two. Call put_partial for every part (PARTS), then sums_ready, from uniform
// control flow; column_total is valid in any invocation afterwards.
var<workgroup> partials: array<vec4<f32>, PARTS * WG>;

fn put_partial(col: u32, v: vec4<f32>, ids: Ids) {
    let s = subgroupAdd(v);
    if (ids.sid == 0u) {
        partials[col * WG + ids.sgid] = s;
    }
}

fn sums_ready(ids: Ids) {
    workgroupBarrier();
}

fn column_total(col: u32, ids: Ids) -> vec4<f32> {
    var t = partials[col * WG];
    for (var i = 1u; i < ids.nsg; i++) {
        t += partials[col * WG + i];
    }
    return t;
}
