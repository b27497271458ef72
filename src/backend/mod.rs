//! The backend interface (ggml_backend's, in Rust): buffers, transfers,
//! op support and graph execution. Implemented by [`cpu::CpuBackend`], the
//! reference, and by the wgpu backend.

pub mod cpu;
mod tensor_io;
pub mod wgpu;

pub use crate::buffer::{BackendBuffer, BufferHandle, BufferUsage};
pub use tensor_io::TensorIo;

use crate::graph::{Graph, TensorId};
use crate::Result;

/// Work a backend has done since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Kernel launches (0 on backends that launch none).
    pub dispatches: u64,
    /// Queue submissions.
    pub submits: u64,
    /// Split runs whose GPU time was measured (with a GPU timer: see
    /// `WgpuOptions::gpu_timer`; 0 without one).
    pub gpu_timed_runs: u64,
    /// Nanoseconds the GPU spent running those runs' kernels.
    pub gpu_busy_ns: u64,
    /// Nanoseconds from each of those runs' first kernel to its last one's
    /// end (its busy time plus the gaps between its submissions).
    pub gpu_span_ns: u64,
}

impl std::ops::Add for Counters {
    type Output = Counters;

    fn add(self, o: Counters) -> Counters {
        Counters {
            dispatches: self.dispatches + o.dispatches,
            submits: self.submits + o.submits,
            gpu_timed_runs: self.gpu_timed_runs + o.gpu_timed_runs,
            gpu_busy_ns: self.gpu_busy_ns + o.gpu_busy_ns,
            gpu_span_ns: self.gpu_span_ns + o.gpu_span_ns,
        }
    }
}

/// One range for [`Backend::read_buffers`]: bytes of `buffer` from `offset`
/// into `out`.
pub struct BufferRead<'a> {
    /// The buffer to read.
    pub buffer: &'a BufferHandle,
    /// Byte offset of the range.
    pub offset: usize,
    /// Where the bytes go; its length is the range's.
    pub out: &'a mut [u8],
}

/// A read started by [`Backend::start_read`]: [`PendingRead::finish`]
/// waits for its bytes.
pub struct PendingRead(Box<WaitForBytes>);

/// What [`PendingRead::finish`] runs: waits, then fills the slice.
type WaitForBytes = dyn FnOnce(&mut [u8]) -> Result<()> + Send;

impl PendingRead {
    /// A read whose bytes `finish` gets by calling `wait`.
    pub fn new(wait: impl FnOnce(&mut [u8]) -> Result<()> + Send + 'static) -> PendingRead {
        PendingRead(Box::new(wait))
    }

    /// A read that is already done.
    pub fn done(bytes: Vec<u8>) -> PendingRead {
        PendingRead::new(move |out| {
            out.copy_from_slice(&bytes);
            Ok(())
        })
    }

    /// Waits for the bytes and copies them into `out` (the length asked for).
    pub fn finish(self, out: &mut [u8]) -> Result<()> {
        (self.0)(out)
    }
}

impl std::fmt::Debug for PendingRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingRead")
    }
}

/// A device that stores tensors and computes graph nodes.
///
/// The trait is object-safe: schedulers hold `Box<dyn Backend>`s.
pub trait Backend: Send + Sync {
    /// Human-readable name (`"cpu"`, or the adapter's name).
    fn name(&self) -> &str;

    /// Alignment in bytes that tensor offsets inside a buffer must have.
    fn alignment(&self) -> usize;

    /// Largest buffer [`Backend::alloc_buffer`] can return.
    fn max_buffer_size(&self) -> usize;

    /// Largest tensor this backend's ops can read: ops on larger ones run
    /// elsewhere (a GPU's storage binding limit).
    fn max_tensor_size(&self) -> usize {
        self.max_buffer_size()
    }

    /// Bytes of memory this backend may fill, when it knows (a GPU's local
    /// memory, or the budget it was opened with); `None` means unknown.
    fn memory(&self) -> Option<usize> {
        None
    }

    /// Allocates `size` bytes. Failure is an [`crate::Error::OutOfMemory`], never a panic.
    fn alloc_buffer(&self, size: usize, usage: BufferUsage) -> Result<BufferHandle>;

    /// Whether `buffer` was allocated by this backend (instance).
    fn owns(&self, buffer: &BufferHandle) -> bool;

    /// Copies `data` into `buffer` at `offset`.
    fn write_buffer(&self, buffer: &BufferHandle, offset: usize, data: &[u8]) -> Result<()>;

    /// Copies bytes of `buffer` from `offset` into `out`.
    fn read_buffer(&self, buffer: &BufferHandle, offset: usize, out: &mut [u8]) -> Result<()>;

    /// Copies several ranges out; a device that must wait to read back
    /// waits once for all of them.
    fn read_buffers(&self, reads: &mut [BufferRead<'_>]) -> Result<()> {
        for r in reads {
            self.read_buffer(r.buffer, r.offset, r.out)?;
        }
        Ok(())
    }

    /// Starts reading `len` bytes of `buffer` at `offset` as the work
    /// submitted so far leaves them. A device with a queue copies them out
    /// behind that work and returns at once, so the host can submit more
    /// before [`PendingRead::finish`] waits; the default reads now.
    fn start_read(&self, buffer: &BufferHandle, offset: usize, len: usize) -> Result<PendingRead> {
        let mut bytes = vec![0u8; len];
        self.read_buffer(buffer, offset, &mut bytes)?;
        Ok(PendingRead::done(bytes))
    }

    /// Whether [`Backend::compute`] returns once the work is queued rather
    /// than done (a GPU), so the host may prepare the next step meanwhile.
    fn queues_work(&self) -> bool {
        false
    }

    /// Whether this backend can compute `node` of `graph` (its op, types and layouts).
    fn supports_op(&self, graph: &Graph, node: TensorId) -> bool;

    /// Computes `nodes` (a split, in order). Every node's storage and every
    /// source's storage must live in this backend's buffers.
    fn compute(&self, graph: &Graph, nodes: &[TensorId]) -> Result<()>;

    /// Waits until all submitted work has finished.
    fn synchronize(&self) -> Result<()>;

    /// Work done so far; backends that count nothing return zeros.
    fn counters(&self) -> Counters {
        Counters::default()
    }
}

/// Checks that `offset..offset + len` lies inside a buffer of `size` bytes.
pub(crate) fn check_range(backend: &str, size: usize, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(crate::Error::Backend {
            backend: backend.to_string(),
            msg: format!(
                "access of {len} bytes at offset {offset} is outside the {size}-byte buffer"
            ),
        }),
    }
}
