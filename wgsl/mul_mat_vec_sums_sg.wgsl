// The mat-vec kernel's reduction with subgroup operations: each column's
// four row sums are added over each subgroup (one vec4 subgroupAdd), the
// partials of a row group's subgroups meet in shared memory, and one
// barrier separates the two. Call put_partial for every part (PARTS), then
// sums_ready, from uniform control flow; column_total is valid in any
// invocation afterwards.
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

// A row group's subgroups are consecutive ones: subgroups hold
// consecutive invocations (as every driver forms them for a 1-D
// workgroup) and a group holds whole subgroups.
fn column_total(col: u32, group: u32, ids: Ids) -> vec4<f32> {
    let per_group = ids.nsg / GROUPS;
    let first = col * WG + group * per_group;
    var t = partials[first];
    for (var i = 1u; i < per_group; i++) {
        t += partials[first + i];
    }
    return t;
}
