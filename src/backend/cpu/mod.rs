//! The CPU reference backend: plain loops that define what every op means.
//!
//! Each op reads its sources through [`Src`] (strided, any supported type)
//! and returns its result as f32 values in logical order; the backend then
//! stores them into the node's layout. GPU kernels are tested against this.

mod cores;
mod ops;
mod spare;
mod strided;
mod workers;

pub use ops::argmax::row_argmax;
pub use strided::Src;

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::{check_range, Backend, BackendBuffer, BufferHandle, BufferUsage};
use crate::graph::{Graph, Op, TensorId};
use crate::tensor::Layout;
use crate::{DType, Error, Result};

const NAME: &str = "cpu";

/// Host memory, 8-byte aligned so f32/f16/block views of it need no copies.
pub struct CpuBuffer {
    words: RwLock<Vec<u64>>,
    size: usize,
    usage: BufferUsage,
    /// The backend instance that allocated it (any instance can read it).
    owner: u64,
}

/// Tells backend instances apart, so a scheduler with two of them knows
/// which one holds a tensor.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(0);

impl BackendBuffer for CpuBuffer {
    fn size(&self) -> usize {
        self.size
    }
    fn usage(&self) -> BufferUsage {
        self.usage
    }
    fn backend_name(&self) -> &str {
        NAME
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn lock_error() -> Error {
    backend_error("a buffer lock was poisoned by an earlier failure")
}

fn backend_error(msg: impl Into<String>) -> Error {
    Error::Backend {
        backend: NAME.into(),
        msg: msg.into(),
    }
}

fn cpu_buffer(buffer: &BufferHandle) -> Result<&CpuBuffer> {
    buffer.as_any().downcast_ref::<CpuBuffer>().ok_or_else(|| {
        backend_error(format!(
            "a {} buffer cannot be used by the cpu backend",
            buffer.backend_name()
        ))
    })
}

/// The reference backend, its ops split over a pool of threads.
///
/// [`CpuBackend::with_quantized_dots`] turns on the fast path, which
/// computes as ggml's CPU backend does: quantized weights take activations
/// quantized to 8 bits and integer dot products, and GELU is looked up in
/// an f16 table (the model loader uses it); without it every op is the
/// exact reference.
pub struct CpuBackend {
    /// Workers kept for the backend's life (spawning threads per op cost
    /// more than a small model's decode ops), `None` with one thread.
    pool: Option<workers::Workers>,
    owner: u64,
    quantized_dots: bool,
    /// Op results and products' temporaries, kept for the next ops.
    spare: spare::Spare,
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new()
    }
}

impl CpuBackend {
    /// A backend using one thread per physical core this process may run
    /// on (SMT siblings not counted, as llama.cpp's default).
    pub fn new() -> CpuBackend {
        CpuBackend::with_threads(cores::default_threads())
    }

    /// A backend using `threads` worker threads (at least one).
    pub fn with_threads(threads: usize) -> CpuBackend {
        let threads = threads.max(1);
        let pool = (threads > 1)
            .then(|| workers::Workers::new(threads))
            .and_then(|built| {
                built
                    .map_err(|e| log::warn!("cpu: no worker pool ({e}); ops run on one thread"))
                    .ok()
            });
        CpuBackend {
            pool,
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            quantized_dots: false,
            spare: spare::Spare::default(),
        }
    }

    /// The same backend with the fast path (q8 activations in mul_mat,
    /// ggml's table GELU) on or off (off: the reference).
    pub fn with_quantized_dots(mut self, on: bool) -> CpuBackend {
        self.quantized_dots = on;
        self
    }

    /// Whether mul_mat quantizes its activations (see [`CpuBackend`]).
    pub fn quantized_dots(&self) -> bool {
        self.quantized_dots
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, workers::Workers::threads)
    }

    /// Runs `f` on the node's sources, each read-locked once.
    fn with_sources<T>(
        &self,
        graph: &Graph,
        id: TensorId,
        f: impl FnOnce(&[Src]) -> Result<T>,
    ) -> Result<T> {
        let node = graph.node(id);
        let sources = node
            .src
            .iter()
            .map(|&s| graph.data(s).map(|d| (d, *graph.layout(s))))
            .collect::<Result<Vec<_>>>()?;
        // Read-lock each distinct source buffer once.
        let mut buffers: Vec<&BufferHandle> = Vec::new();
        for (d, _) in &sources {
            if !buffers.iter().any(|b| Arc::ptr_eq(b, &d.buffer)) {
                buffers.push(&d.buffer);
            }
        }
        let guards = buffers
            .iter()
            .map(|b| cpu_buffer(b)?.words.read().map_err(|_| lock_error()))
            .collect::<Result<Vec<_>>>()?;
        let srcs = sources
            .iter()
            .map(|(d, layout)| {
                let slot = buffers
                    .iter()
                    .position(|b| Arc::ptr_eq(b, &d.buffer))
                    .unwrap_or(0);
                Src::new(bytemuck::cast_slice(&guards[slot]), d.offset, *layout)
            })
            .collect::<Result<Vec<_>>>()?;
        f(&srcs).map_err(|e| backend_error(format!("{} '{}': {e}", node.op.name(), node.name)))
    }

    fn compute_node(&self, graph: &Graph, id: TensorId) -> Result<()> {
        let node = graph.node(id);
        if node.op.is_passive() {
            return Ok(());
        }
        if node.op == Op::SetRows {
            return self.set_rows(graph, id);
        }
        if node.op == Op::Cpy && node.layout.dtype.is_quantized() {
            return self.copy_blocks(graph, id);
        }
        if node.op == Op::Cpy
            && node.layout.dtype == DType::I32
            && graph.layout(node.src[0]).dtype == DType::I32
        {
            return self.copy_i32(graph, id);
        }
        let dst = graph.data(id)?;
        let settings = ops::Settings {
            threads: self.threads(),
            quantized_dots: self.quantized_dots,
            spare: &self.spare,
        };
        let values = self.with_sources(graph, id, |srcs| ops::compute(node, srcs, settings))?;
        let buf = cpu_buffer(&dst.buffer)?;
        let mut words = buf.words.write().map_err(|_| lock_error())?;
        strided::store(
            &node.layout,
            &mut bytemuck::cast_slice_mut(&mut words)[..buf.size],
            dst.offset,
            &values,
        )?;
        self.spare.give(values);
        Ok(())
    }

    /// A copy into a quantized tensor. From one of the same block type the
    /// blocks move whole, in logical order, as ggml copies them, so nothing
    /// is requantized; from floats, each destination row's values (in
    /// logical order) are quantized as [`crate::quant::quantize_row`] does.
    fn copy_blocks(&self, graph: &Graph, id: TensorId) -> Result<()> {
        let layout = graph.node(id).layout;
        let blocks = self.with_sources(graph, id, |srcs| {
            if srcs[0].layout.dtype == layout.dtype {
                return srcs[0].blocks_in_order();
            }
            let values = srcs[0].to_f32()?;
            let mut blocks = Vec::with_capacity(layout.n_rows() * layout.row_bytes());
            for row in values.chunks_exact(layout.ne[0].max(1)) {
                blocks.extend(crate::quant::quantize_row(layout.dtype, row)?);
            }
            Ok(blocks)
        })?;
        let dst = graph.data(id)?;
        let buf = cpu_buffer(&dst.buffer)?;
        let mut words = buf.words.write().map_err(|_| lock_error())?;
        let bytes = &mut bytemuck::cast_slice_mut(&mut words)[..buf.size];
        strided::store_blocks(&layout, bytes, dst.offset, &blocks)
    }

    /// A copy between i32 tensors: the values move exactly (through f32,
    /// those past 2^24 would round).
    fn copy_i32(&self, graph: &Graph, id: TensorId) -> Result<()> {
        let layout = graph.node(id).layout;
        let values = self.with_sources(graph, id, |srcs| Ok(srcs[0].i32_in_order()))?;
        let dst = graph.data(id)?;
        let buf = cpu_buffer(&dst.buffer)?;
        let mut words = buf.words.write().map_err(|_| lock_error())?;
        let bytes = &mut bytemuck::cast_slice_mut(&mut words)[..buf.size];
        strided::store_i32(&layout, bytes, dst.offset, &values)
    }

    /// [`Op::SetRows`]: writes only the indexed rows, so the rest of the
    /// destination (a KV cache) is neither read nor rewritten.
    fn set_rows(&self, graph: &Graph, id: TensorId) -> Result<()> {
        let node = graph.node(id);
        let (values, rows) = self.with_sources(graph, id, |srcs| {
            let rows = (0..srcs[1].layout.n_elements())
                .map(|i| srcs[1].i32_at([i, 0, 0, 0]))
                .collect::<Vec<i32>>();
            Ok((srcs[0].to_f32()?, rows))
        })?;
        let layout = node.layout;
        let row_layout = Layout::contiguous(layout.dtype, [layout.ne[0], 1, 1, 1])?;
        let dst = graph.data(id)?;
        let buf = cpu_buffer(&dst.buffer)?;
        let mut words = buf.words.write().map_err(|_| lock_error())?;
        let bytes = &mut bytemuck::cast_slice_mut(&mut words)[..buf.size];
        for (values, &row) in values.chunks_exact(layout.ne[0]).zip(&rows) {
            let row = usize::try_from(row)
                .ok()
                .filter(|&r| r < layout.ne[1])
                .ok_or_else(|| {
                    backend_error(format!(
                        "set_rows '{}': row {row} is outside 0..{}",
                        node.name, layout.ne[1]
                    ))
                })?;
            strided::store(&row_layout, bytes, dst.offset + row * layout.nb[1], values)?;
        }
        Ok(())
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn alignment(&self) -> usize {
        64
    }

    fn max_buffer_size(&self) -> usize {
        isize::MAX as usize
    }

    fn alloc_buffer(&self, size: usize, usage: BufferUsage) -> Result<BufferHandle> {
        let mut words = Vec::new();
        words
            .try_reserve_exact(size.div_ceil(8))
            .map_err(|_| Error::OutOfMemory(format!("cpu: cannot allocate {size} bytes")))?;
        words.resize(size.div_ceil(8), 0);
        Ok(Arc::new(CpuBuffer {
            words: RwLock::new(words),
            size,
            usage,
            owner: self.owner,
        }))
    }

    fn write_buffer(&self, buffer: &BufferHandle, offset: usize, data: &[u8]) -> Result<()> {
        let buf = cpu_buffer(buffer)?;
        check_range(NAME, buf.size, offset, data.len())?;
        let mut words = buf.words.write().map_err(|_| lock_error())?;
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[offset..offset + data.len()]
            .copy_from_slice(data);
        Ok(())
    }

    fn read_buffer(&self, buffer: &BufferHandle, offset: usize, out: &mut [u8]) -> Result<()> {
        let buf = cpu_buffer(buffer)?;
        check_range(NAME, buf.size, offset, out.len())?;
        let words = buf.words.read().map_err(|_| lock_error())?;
        out.copy_from_slice(&bytemuck::cast_slice::<u64, u8>(&words)[offset..offset + out.len()]);
        Ok(())
    }

    fn owns(&self, buffer: &BufferHandle) -> bool {
        cpu_buffer(buffer).is_ok_and(|b| b.owner == self.owner)
    }

    fn supports_op(&self, _graph: &Graph, _node: TensorId) -> bool {
        // The builders only create nodes the reference can compute.
        true
    }

    fn compute(&self, graph: &Graph, nodes: &[TensorId]) -> Result<()> {
        let run = || {
            for &id in nodes {
                if id.0 >= graph.len() {
                    return Err(Error::invalid(format!("node {} is not in the graph", id.0)));
                }
                self.compute_node(graph, id)?;
            }
            Ok(())
        };
        // Parallel ops split their work over the workers they run in.
        match &self.pool {
            Some(pool) => pool.enter(run),
            None => run(),
        }
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}
