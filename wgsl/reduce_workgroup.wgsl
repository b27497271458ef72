// Workgroup-wide reductions through shared memory (a tree over WG slots),
// for devices without subgroup operations. Call from uniform control flow.
var<workgroup> red: array<f32, WG>;

fn wg_reduce(v: f32, ids: Ids, is_max: bool) -> f32 {
    red[ids.lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (ids.lid < s) {
            let o = red[ids.lid + s];
            red[ids.lid] = select(red[ids.lid] + o, max(red[ids.lid], o), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn wg_sum(v: f32, ids: Ids) -> f32 {
    return wg_reduce(v, ids, false);
}

fn wg_max(v: f32, ids: Ids) -> f32 {
    return wg_reduce(v, ids, true);
}
