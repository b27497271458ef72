// Workgroup-wide reductions with subgroup operations: one subgroupAdd or
// subgroupMax per subgroup, then the per-subgroup partials through shared
// memory. Works for any subgroup size. Call from uniform control flow.
struct Ids {
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_invocation_id) sid: u32,
    @builtin(subgroup_id) sgid: u32,
    @builtin(num_subgroups) nsg: u32,
}

var<workgroup> red: array<f32, WG>;

fn wg_reduce(v: f32, ids: Ids, is_max: bool) -> f32 {
    let part = select(subgroupAdd(v), subgroupMax(v), is_max);
    if (ids.sid == 0u) {
        red[ids.sgid] = part;
    }
    workgroupBarrier();
    var r = red[0];
    for (var i = 1u; i < ids.nsg; i++) {
        r = select(r + red[i], max(r, red[i]), is_max);
    }
    workgroupBarrier();
    return r;
}

fn wg_sum(v: f32, ids: Ids) -> f32 {
    return wg_reduce(v, ids, false);
}

fn wg_max(v: f32, ids: Ids) -> f32 {
    return wg_reduce(v, ids, true);
}
