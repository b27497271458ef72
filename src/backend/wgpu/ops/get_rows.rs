//! get_rows: gathers rows of an f32, f16 or quantized table by i32 index,
//! as f32. One kernel body; the table type only picks the block decoder
//! from `wgsl/dequant.wgsl`. Out-of-range indices give zero rows.

use super::{key, OpEncoder};
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

const BODY: &[&str] = &[
    include_str!("../../../../wgsl/dequant.wgsl"),
    include_str!("../../../../wgsl/get_rows.wgsl"),
];

/// `dequant(block_byte, j)` for a table of `t`.
fn defs(t: DType) -> Option<&'static str> {
    Some(match t {
        DType::F32 | DType::F16 | DType::BF16 => {
            "fn dequant(b: u32, j: u32) -> f32 { return load_a(b); }\n"
        }
        DType::Q4_0 => "fn dequant(b: u32, j: u32) -> f32 { return q4_0_value(b, j); }\n",
        DType::Q4_1 => "fn dequant(b: u32, j: u32) -> f32 { return q4_1_value(b, j); }\n",
        DType::Q5_0 => "fn dequant(b: u32, j: u32) -> f32 { return q5_0_value(b, j); }\n",
        DType::Q5_1 => "fn dequant(b: u32, j: u32) -> f32 { return q5_1_value(b, j); }\n",
        DType::Q8_0 => "fn dequant(b: u32, j: u32) -> f32 { return q8_0_value(b, j); }\n",
        DType::Q4K => "fn dequant(b: u32, j: u32) -> f32 { return q4_k_value(b, j); }\n",
        DType::Q5K => "fn dequant(b: u32, j: u32) -> f32 { return q5_k_value(b, j); }\n",
        DType::Q6K => "fn dequant(b: u32, j: u32) -> f32 { return q6_k_value(b, j); }\n",
        DType::Q2K => "fn dequant(b: u32, j: u32) -> f32 { return q2_k_value(b, j); }\n",
        DType::Q3K => "fn dequant(b: u32, j: u32) -> f32 { return q3_k_value(b, j); }\n",
        DType::I32 => return None,
    })
}

pub fn supports(graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    defs(graph.layout(node.src[0]).dtype).is_some()
        && graph.layout(node.src[1]).dtype == DType::I32
        && node.layout.dtype == DType::F32
        && u32::try_from(node.layout.n_elements()).is_ok()
}

pub fn encode(enc: &OpEncoder) -> Result<Vec<Dispatch>> {
    let srcs = [enc.src(0), enc.src(1)];
    let table = enc.graph.layout(srcs[0]).dtype;
    let defs =
        defs(table).ok_or_else(|| enc.device.error(format!("get_rows from a {table} table")))?;
    let (bindings, mut params) = enc.bind_all(&srcs)?;
    params.x = [table.block_elems() as u32, 0, 0, 0];
    let wg = enc.workgroup(256);
    let n = enc.graph.layout(enc.id).n_elements() as u32;
    Ok(vec![Dispatch {
        key: key(enc, "get_rows", &srcs, BODY, defs, false, wg),
        bindings,
        params,
        workgroups: enc.grid(n.div_ceil(wg)),
    }])
}
