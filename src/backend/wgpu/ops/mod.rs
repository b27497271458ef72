//! One module per op family: support checks, kernel choice, parameters and
//! dispatch sizes. Each returns the dispatches a node needs (none for views).

mod argmax;
mod cpy_blocks;
mod decoders;
mod elementwise;
mod flash_attn;
mod fuse;
mod get_rows;
mod mul_mat;
mod norm;
mod rope;
mod set_rows;
mod softmax;
mod top_k;

use super::kernels::KernelKey;
use super::params::{Params, TensorParams};
use super::plan::{Binding, Dispatch};
use super::{Device, WgpuBuffer};
use crate::backend::BufferHandle;
use crate::graph::{Graph, Op, TensorId};
use crate::tensor::Layout;
use crate::{DType, Result};

/// How encoders turn a tensor's buffer handle into this device's buffer.
pub type BufferOf<'a> = &'a dyn Fn(&BufferHandle) -> Result<&WgpuBuffer>;

/// Whether `node` can run on this device.
pub fn supports(dev: &Device, graph: &Graph, id: TensorId) -> bool {
    let node = graph.node(id);
    let layouts_fit = std::iter::once(id)
        .chain(node.src.iter().copied())
        .all(|t| addressable(dev, graph.layout(t)));
    if !layouts_fit {
        return false;
    }
    match node.op {
        Op::Input | Op::View | Op::Empty | Op::Transfer => true,
        Op::Add | Op::Mul => elementwise::supports_binary(graph, id),
        Op::Cpy if cpy_blocks::moves_blocks(graph, id) => cpy_blocks::supports(graph, id),
        Op::Scale(_)
        | Op::Silu
        | Op::Relu
        | Op::Gelu
        | Op::Tanh
        | Op::DiagMaskInf { .. }
        | Op::Cpy => elementwise::supports_unary(graph, id),
        Op::Norm { .. } | Op::RmsNorm { .. } => norm::supports(graph, id),
        Op::SoftMax { .. } => softmax::supports(graph, id),
        Op::MulMat => mul_mat::supports(dev, graph, id),
        Op::MulMatId => mul_mat::supports(dev, graph, id),
        Op::GetRows => get_rows::supports(graph, id),
        Op::Rope(_) => rope::supports(graph, id),
        Op::SetRows => set_rows::supports(graph, id),
        Op::FlashAttn { .. } => flash_attn::supports(graph, id),
        Op::Argmax => argmax::supports(graph, id),
        Op::TopK { .. } | Op::SampleTopK => top_k::supports(graph, id),
    }
}

/// The dispatches of `nodes` (a split, in order), fusing pairs where
/// [`fuse`] allows (unless the device was opened with `WGINFER_FUSION=0`).
pub fn encode_all(
    dev: &Device,
    graph: &Graph,
    nodes: &[TensorId],
    buffer_of: BufferOf,
) -> Result<Vec<Dispatch>> {
    let mut readers: Option<Vec<u32>> = None;
    let mut out = Vec::with_capacity(nodes.len());
    // Nodes already computed by an earlier fused dispatch.
    let mut fused_away: [Option<TensorId>; 6] = [None; 6];
    for (i, &id) in nodes.iter().enumerate() {
        if fused_away.contains(&Some(id)) {
            continue;
        }
        // The next nodes that compute something: views and inputs between
        // them dispatch nothing, so they may still run as one (a view of a
        // fused node counts as its reader and prevents that).
        let computing = nodes[i + 1..]
            .iter()
            .copied()
            .filter(|&n| !graph.node(n).op.is_passive());
        let mut look = [None; 6];
        for (slot, n) in look.iter_mut().zip(computing) {
            *slot = Some(n);
        }
        let [next, after, third, ..] = look;
        let mut readers_of =
            |t: TensorId| readers.get_or_insert_with(|| graph.reader_counts())[t.0];
        let encoder = |node| OpEncoder {
            device: dev,
            graph,
            id: node,
            buffer_of,
        };
        if let (true, Some(mul), Some(mm)) = (dev.fuse && dev.fold_activations, next, after) {
            // With the residual add after the product, when that fits too.
            let add = third.filter(|&add| {
                fuse::find(dev, graph, mm, add, || readers_of(mm)) == Some(fuse::Fusion::MulMatAdd)
            });
            let silu_mul = fuse::silu_mul_into_mat_vec(dev, graph, id, mul, mm, &mut readers_of);
            if let (true, Some(add)) = (silu_mul, add) {
                if let Some(ahead) = norm_ahead(dev, graph, &look[3..], mm, add, &mut readers_of) {
                    let producer = mul_mat::Producer::SiluMul { silu: id, mul, mm };
                    out.extend(mul_mat::encode_norm_ahead(&encoder(add), producer, ahead)?);
                    let [norm, mul2, mm2] = ahead;
                    fused_away = [mul, mm, add, norm, mul2, mm2].map(Some);
                    continue;
                }
            }
            if fuse::norm_into_mat_vec(dev, graph, id, mul, mm, &mut readers_of) {
                out.extend(mul_mat::encode_normed(&encoder(mm), id, mul)?);
                fused_away = [Some(mul), Some(mm), None, None, None, None];
                continue;
            }
            if silu_mul {
                let (dst, residual) = match add {
                    Some(add) => (add, Some(graph.node(add).src[1])),
                    None => (mm, None),
                };
                out.extend(mul_mat::encode_silu_mul(
                    &encoder(dst),
                    id,
                    mul,
                    mm,
                    residual,
                )?);
                fused_away = [Some(mul), Some(mm), add, None, None, None];
                continue;
            }
        }
        if let (true, Some(k), Some(set_k), Some(set_v)) = (dev.fuse, next, after, third) {
            if rope::kv_store_fits(dev, graph, [id, k, set_k, set_v]) && readers_of(k) == 1 {
                out.extend(rope::encode_kv_store(&encoder(set_v), id, k, set_k)?);
                fused_away = [Some(k), Some(set_k), Some(set_v), None, None, None];
                continue;
            }
        }
        if let (true, Some(mm)) = (dev.fuse && dev.fold_activations, next) {
            if fuse::softmax_into_mat_vec(dev, graph, id, mm, &mut readers_of) {
                out.extend(mul_mat::encode_softmaxed(&encoder(mm), id)?);
                fused_away = [Some(mm), None, None, None, None, None];
                continue;
            }
        }
        if let (true, Some(cpy)) = (dev.fuse, next) {
            if let Some(strides) = fuse::mul_mat_into_cont(dev, graph, id, cpy, &mut readers_of) {
                out.extend(mul_mat::encode_into(&encoder(cpy), id, strides)?);
                fused_away = [Some(cpy), None, None, None, None, None];
                continue;
            }
        }
        let fusion = next
            .filter(|_| dev.fuse)
            .and_then(|next| fuse::find(dev, graph, id, next, || readers_of(id)));
        let ahead = match (fusion, next) {
            (Some(fuse::Fusion::MulMatAdd), Some(add)) => {
                norm_ahead(dev, graph, &look[1..], id, add, &mut readers_of).map(|n| (add, n))
            }
            _ => None,
        };
        if let Some((add, ahead)) = ahead {
            let producer = mul_mat::Producer::Product(id);
            out.extend(mul_mat::encode_norm_ahead(&encoder(add), producer, ahead)?);
            let [norm, mul, mm] = ahead;
            fused_away = [Some(add), Some(norm), Some(mul), Some(mm), None, None];
            continue;
        }
        match (fusion, next) {
            (Some(f), Some(next)) => {
                out.extend(fuse::encode(&encoder(next), f, id)?);
                fused_away = [Some(next), None, None, None, None, None];
            }
            _ => out.extend(encode(dev, graph, id, buffer_of)?),
        }
    }
    Ok(out)
}

/// The rms_norm, its mul and the mat-vec reading them, the first three of
/// `look`, when `producer` (a mat-vec plus residual computing `y`) can run
/// the norm ahead ([`fuse::norm_ahead`]).
fn norm_ahead(
    dev: &Device,
    graph: &Graph,
    look: &[Option<TensorId>],
    producer: TensorId,
    y: TensorId,
    readers: &mut impl FnMut(TensorId) -> u32,
) -> Option<[TensorId; 3]> {
    match *look {
        [Some(norm), Some(mul), Some(mm), ..] if dev.fuse && dev.fold_activations => {
            fuse::norm_ahead(dev, graph, producer, y, [norm, mul, mm], readers)
                .then_some([norm, mul, mm])
        }
        _ => None,
    }
}

/// The dispatches that compute `id`.
pub fn encode(
    dev: &Device,
    graph: &Graph,
    id: TensorId,
    buffer_of: BufferOf,
) -> Result<Vec<Dispatch>> {
    let node = graph.node(id);
    if node.op.is_passive() {
        return Ok(vec![]);
    }
    if !supports(dev, graph, id) {
        return Err(dev.error(format!(
            "{} '{}' ({:?}) is not supported on this device",
            node.op.name(),
            node.name,
            node.layout.dtype
        )));
    }
    let enc = OpEncoder {
        device: dev,
        graph,
        id,
        buffer_of,
    };
    match node.op {
        Op::Input | Op::View | Op::Empty | Op::Transfer => Ok(vec![]),
        Op::Add | Op::Mul => elementwise::encode_binary(&enc),
        Op::Cpy if cpy_blocks::moves_blocks(graph, id) => cpy_blocks::encode(&enc),
        Op::Scale(_)
        | Op::Silu
        | Op::Relu
        | Op::Gelu
        | Op::Tanh
        | Op::DiagMaskInf { .. }
        | Op::Cpy => elementwise::encode_unary(&enc),
        Op::Norm { .. } | Op::RmsNorm { .. } => norm::encode(&enc),
        Op::SoftMax { .. } => softmax::encode(&enc),
        Op::MulMat => mul_mat::encode(&enc),
        Op::MulMatId => mul_mat::encode_by_expert(&enc),
        Op::GetRows => get_rows::encode(&enc),
        Op::Rope(_) => rope::encode(&enc),
        Op::SetRows => set_rows::encode(&enc),
        Op::FlashAttn { .. } => flash_attn::encode(&enc),
        Op::Argmax => argmax::encode(&enc),
        Op::TopK { .. } | Op::SampleTopK => top_k::encode(&enc),
    }
}

/// The granularity of a type's addresses: kernels load f32 and i32 as
/// words and f16 as half words; block formats are read byte by byte.
fn address_unit(dtype: DType) -> usize {
    match dtype {
        DType::F16 | DType::BF16 => 2,
        DType::F32 | DType::I32 => 4,
        _ => 1,
    }
}

/// Byte strides that the kernels' u32 arithmetic and element loads can use.
fn addressable(dev: &Device, layout: &Layout) -> bool {
    let unit = address_unit(layout.dtype);
    let fits_binding = layout.span_bytes() as u64 <= dev.gpu.limits.max_storage_buffer_binding_size;
    fits_binding
        && layout
            .nb
            .iter()
            .all(|&nb| nb % unit == 0 && nb <= u32::MAX as usize)
}

const VEC4: u64 = super::buffer::VEC4_BYTES as u64;

/// The largest binding window: the device's limit in whole vec4s.
pub fn max_binding_bytes(dev: &Device) -> u64 {
    dev.gpu.limits.max_storage_buffer_binding_size / VEC4 * VEC4
}

/// What an encoder needs to know about the node it encodes.
pub struct OpEncoder<'a> {
    pub device: &'a Device,
    pub graph: &'a Graph,
    pub id: TensorId,
    pub buffer_of: BufferOf<'a>,
}

impl OpEncoder<'_> {
    /// The node's `i`-th source.
    pub fn src(&self, i: usize) -> TensorId {
        self.graph.node(self.id).src[i]
    }

    /// The node's op.
    pub fn op(&self) -> Op {
        self.graph.node(self.id).op
    }

    /// The binding window holding `t` and `t`'s parameters relative to it.
    ///
    /// A buffer within the device's binding limit is bound whole, so the bind
    /// group stays the same when only offsets change; a larger one is bound
    /// from the aligned start of the tensor.
    pub fn bind(&self, t: TensorId) -> Result<(Binding, TensorParams)> {
        let data = self.graph.data(t)?;
        let buf = (self.buffer_of)(&data.buffer)?;
        let layout = self.graph.layout(t);
        let limits = &self.device.gpu.limits;
        let total = buf.buffer.size();
        let max = max_binding_bytes(self.device);
        let start = if total <= max {
            0
        } else {
            // Whole vec4s, so a kernel may bind the window as vec4 words.
            let align = u64::from(limits.min_storage_buffer_offset_alignment).max(VEC4);
            data.offset as u64 / align * align
        };
        let size = (total - start).min(max);
        let rel = data.offset as u64 - start;
        let unit = address_unit(layout.dtype) as u64;
        if rel + layout.span_bytes() as u64 > size || !rel.is_multiple_of(unit) {
            return Err(self.device.error(format!(
                "tensor '{}' ({} bytes at offset {}) cannot be bound within the {max}-byte binding limit",
                self.graph.node(t).name,
                layout.span_bytes(),
                data.offset
            )));
        }
        let params = TensorParams::new(layout, rel as usize).ok_or_else(|| {
            self.device.error(format!(
                "tensor '{}' is too large to address",
                self.graph.node(t).name
            ))
        })?;
        Ok((
            Binding {
                buffer: buf.buffer.clone(),
                offset: start,
                size,
            },
            params,
        ))
    }

    /// Binds `srcs` then the node itself as `a`, `b`, ..., `d`.
    pub fn bind_all(&self, srcs: &[TensorId]) -> Result<(Vec<Binding>, Params)> {
        let mut params = Params::default();
        let mut bindings = Vec::with_capacity(srcs.len() + 1);
        for (i, &s) in srcs.iter().enumerate() {
            let (b, t) = self.bind(s)?;
            bindings.push(b);
            match i {
                0 => params.a = t,
                _ => params.b = t,
            }
        }
        let (b, t) = self.bind(self.id)?;
        bindings.push(b);
        params.d = t;
        Ok((bindings, params))
    }

    /// A workgroup size for simple kernels, within the device's limits.
    pub fn workgroup(&self, want: u32) -> u32 {
        workgroup_within(self.device, want)
    }

    /// A grid of `n` workgroups, spilling into y and z past the per-dimension limit.
    pub fn grid(&self, n: u32) -> [u32; 3] {
        let max = self
            .device
            .gpu
            .limits
            .max_compute_workgroups_per_dimension
            .max(1);
        let x = n.clamp(1, max);
        let rest = n.div_ceil(x);
        let y = rest.clamp(1, max);
        [x, y, rest.div_ceil(y).max(1)]
    }
}

/// Kernel name: `<op>_<srcT>[_<srcT>]_<dstT>[_<variant>]`.
pub fn kernel_name(op: &str, srcs: &[DType], dst: DType, variant: &str) -> String {
    let mut name = op.to_string();
    for t in srcs {
        name.push('_');
        name.push_str(t.name());
    }
    name.push('_');
    name.push_str(dst.name());
    if !variant.is_empty() {
        name.push('_');
        name.push_str(variant);
    }
    name
}

/// The key of a kernel over the types of `srcs` writing `enc`'s node.
/// The largest power of two up to `want` (at least 1) that the device's
/// workgroup limits allow.
pub fn workgroup_within(dev: &Device, want: u32) -> u32 {
    let limits = &dev.gpu.limits;
    let cap = limits
        .max_compute_invocations_per_workgroup
        .min(limits.max_compute_workgroup_size_x);
    let wg = want.min(cap).max(1);
    1 << wg.ilog2()
}

pub fn key(
    enc: &OpEncoder,
    op: &str,
    srcs: &[TensorId],
    body: &'static [&'static str],
    defs: &'static str,
    reduces: bool,
    workgroup: u32,
) -> KernelKey {
    let types: Vec<DType> = srcs.iter().map(|&s| enc.graph.layout(s).dtype).collect();
    let dst = enc.graph.layout(enc.id).dtype;
    let variant = if reduces {
        match enc.device.reduction {
            super::Reduction::Subgroup => "sg",
            _ => "wg",
        }
    } else {
        ""
    };
    KernelKey {
        name: kernel_name(op, &types, dst, variant),
        body,
        defs,
        enables: "",
        srcs: types,
        dst,
        reduces,
        workgroup,
        groups: 1,
        wide: false,
    }
}
