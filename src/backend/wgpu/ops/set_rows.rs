//! set_rows (the KV-cache store): one invocation per source element, each
//! writing its value into the indexed row of the destination.

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const BODY: &[&str] = &[include_str!("../../../../wgsl/set_rows.wgsl")];

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let float = |t: DType| matches!(t, DType::F32 | DType::F16);
    float(graph.layout(node.src[0]).dtype)
        && float(node.layout.dtype)
        && graph.layout(node.src[1]).dtype == DType::I32
        && u32::try_from(graph.layout(node.src[0]).n_elements()).is_ok()
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let srcs = [enc.src(0), enc.src(1)];
    let (bindings, mut params) = enc.bind_all(&srcs)?;
    let n = u32::try_from(enc.graph.layout(srcs[0]).n_elements())
        .map_err(|_| enc.device.error("set_rows is too large"))?;
    params.x = [n, 0, 0, 0];
    let wg = enc.workgroup(256);
    Ok(vec![Dispatch {
        key: key(enc, "set_rows", &srcs, BODY, "", false, wg),
        bindings,
        params,
        workgroups: enc.grid(n.div_ceil(wg)),
    }])
}
