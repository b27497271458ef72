//! The sampler on the device: top-k over chunks of the logits (one
//! workgroup per chunk, k rounds of two max reductions) and the draw from
//! the best candidates (one invocation).

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, Op, TensorId};
use crate::{DType, Result};

const TOP_K: &[&str] = &[include_str!("../../../../wgsl/top_k.wgsl")];
const SAMPLE: &[&str] = &[include_str!("../../../../wgsl/sample_top_k.wgsl")];

/// The top-k kernel's workgroup and the entries each invocation holds
/// (top_k.wgsl's `PER`): a chunk is at most their product.
const WG: u32 = 256;
const PER_INVOCATION: usize = 16;

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let f32_in = node
        .src
        .iter()
        .all(|&s| graph.layout(s).dtype == DType::F32 && graph.layout(s).is_contiguous());
    match node.op {
        Op::TopK { chunk, .. } => {
            f32_in && node.layout.dtype == DType::F32 && chunk <= WG as usize * PER_INVOCATION
        }
        Op::SampleTopK => f32_in && node.layout.dtype == DType::I32,
        _ => false,
    }
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    match enc.op() {
        Op::TopK { k, chunk, pairs } => {
            let src = enc.src(0);
            let (bindings, mut params) = enc.bind_all(&[src])?;
            let entries = match pairs {
                true => enc.graph.layout(src).n_elements() / 2,
                false => enc.graph.layout(src).n_elements(),
            };
            let chunks = enc.graph.layout(enc.id).ne[2];
            // What the entries are (top_k.wgsl): a row's values, pairs,
            // or rows of one chunk each.
            let rows = enc.graph.layout(src).ne[1] > 1;
            let entries_are = match (pairs, rows) {
                (true, _) => 1,
                (false, false) => 0,
                (false, true) => 2,
            };
            params.x = [k as u32, chunk as u32, entries_are, entries as u32];
            Ok(vec![Dispatch {
                key: key(enc, "top_k", &[src], TOP_K, "", true, WG),
                bindings,
                params,
                workgroups: enc.grid(chunks as u32),
            }])
        }
        _ => {
            let srcs = [enc.src(0), enc.src(1)];
            let (bindings, params) = enc.bind_all(&srcs)?;
            Ok(vec![Dispatch {
                key: key(enc, "sample_top_k", &srcs, SAMPLE, "", false, 1),
                bindings,
                params,
                workgroups: [1, 1, 1],
            }])
        }
    }
}
