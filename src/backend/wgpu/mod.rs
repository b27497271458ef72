//! The wgpu backend: WGSL ports of the Kompute kernels, run on any adapter
//! wgpu can open (Vulkan, Metal, Dx12).
//!
//! A split is compiled into dispatches (pipelines and bind groups cached),
//! recorded into compute passes and submitted every few dozen dispatches
//! (once per split on CPU-type adapters); a split without dispatches
//! submits nothing.

mod block_layouts;
mod buffer;
mod gpu;
mod gpu_timer;
mod kernels;
mod ops;
mod params;
mod plan;
mod profile;
mod tunable;

pub use buffer::WgpuBuffer;
pub use gpu::{list_adapters, AdapterChoice, AdapterSummary};
pub use plan::DispatchStats;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::{Backend, BufferHandle, BufferRead, BufferUsage, Counters, PendingRead};
use crate::graph::{Graph, TensorId};
use crate::{Error, Result};
use gpu::Gpu;

/// Which reduction kernels to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// Subgroup operations when the device has them, else workgroup memory.
    #[default]
    Auto,
    /// `subgroupAdd`/`subgroupMax` within subgroups, shared memory across them.
    Subgroup,
    /// Tree reductions in workgroup shared memory only.
    Workgroup,
}

impl Reduction {
    /// Parses `subgroup`, `workgroup` or `auto`.
    pub fn parse(s: &str) -> Result<Reduction> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Reduction::Auto),
            "subgroup" => Ok(Reduction::Subgroup),
            "workgroup" => Ok(Reduction::Workgroup),
            other => Err(Error::invalid(format!(
                "reduction variant '{other}': expected auto, subgroup or workgroup"
            ))),
        }
    }
}

/// How to open a wgpu backend.
#[derive(Clone, Debug, Default)]
pub struct WgpuOptions {
    /// Which adapter (default: `WGINFER_ADAPTER`, else the first discrete GPU, else the first).
    pub adapter: AdapterChoice,
    /// Reduction kernels (default: `WGINFER_REDUCTION`, else subgroups when present).
    pub reduction: Reduction,
    /// Send op parameters through a uniform buffer even where the device has
    /// immediates (the fallback path, kept testable on every device).
    pub uniform_params: bool,
    /// Bytes a model may plan to fill on this device (default: its local
    /// memory, where the graphics API reports it).
    pub memory_limit: Option<u64>,
    /// Whether a mat-vec computes its activations from the nodes before it
    /// as it loads them (norm x weight, silu x up), or a mat-vec plus
    /// residual runs the rms_norm after it ahead for the next mat-vec. Each
    /// workgroup redoes that work for its rows: free on a GPU, where it
    /// saves dispatches, but a CPU-type adapter (lavapipe) pays for it (its
    /// default model decoded 20% slower with the norms run ahead), so the
    /// default (`None`) is `WGINFER_FOLD_ACTIVATIONS` (`1` or `0`) when set,
    /// else folds on every adapter that is not a CPU.
    pub fold_activations: Option<bool>,
    /// Dispatches recorded per queue submission within a split, at most:
    /// when the GPU has finished everything before, a split's first
    /// submission carries eight, each after it twice as many up to this. Submitting every few dozen dispatches lets the GPU
    /// start on a split while the host is still recording the rest of it,
    /// as llama.cpp's Vulkan backend does, and a small first one lets it
    /// start early; a CPU-type adapter shares the host's cores, so the
    /// default (`None`) is `WGINFER_SUBMIT_EVERY` when set, else
    /// [`SUBMIT_EVERY`] on GPUs and one submission per split on CPUs.
    /// `Some(0)` means one submission per split.
    pub submit_every: Option<usize>,
    /// Time each kernel on the GPU (see [`WgpuBackend::perf_report`]);
    /// the default (`None`) follows `WGINFER_PERF_LOGGER`. Each submission
    /// then waits for its timestamps: for finding where time goes, not for
    /// measuring speed.
    pub perf_logger: Option<bool>,
    /// Measure each split run's GPU time from timestamps at its
    /// submissions' starts and ends (two per submission; nothing waits for
    /// them), reported through [`Backend::counters`]:
    /// busy and span nanoseconds; the default (`None`) follows
    /// `WGINFER_GPU_TIMER`. Off while the perf logger runs.
    pub gpu_timer: Option<bool>,
    /// Row groups of the mat-vec kernel's workgroups (1, 2, 4 or 8, each
    /// four rows sharing the workgroup's activation loads through the
    /// cache; another value is an error at [`WgpuBackend::new`]);
    /// the default (`None`) is `WGINFER_MATVEC_GROUPS` when set, else two
    /// on a GPU for q4_0 and q4_1 matrices of at least 4096 rows of 4096
    /// values, one otherwise (four measured slower on an H200, two slower
    /// for smaller matrices and for f16 and q6_K ones on an H100). A device
    /// whose subgroups are wider than a group's invocations takes fewer.
    pub matvec_groups: Option<u32>,
    /// Products of at least this many 128 x 128 output tiles take the
    /// tiled kernel's 128 x 128 tiles, smaller ones 64 x 64 (where there
    /// are no cooperative matrices); the default (`None`) is
    /// `WGINFER_TILE_WIDE_FROM` when set, else 128 on a GPU and 0 on a
    /// software adapter, whose few threads do better with fewer tiles.
    pub tile_wide_from: Option<usize>,
    /// Mat-vecs of quantized weights of at least this many values first
    /// cast their activations to f16 in the weights' unit order (one more
    /// dispatch), so that each product loads 16 bytes per unit of eight
    /// values where it loaded 32. The default (`None`) is
    /// `WGINFER_MATVEC_CAST_FROM` when set, else every such mat-vec on a
    /// CPU-type adapter (lavapipe decoded 30-50% faster: the default model
    /// 3.35-3.41 -> 4.90-5.16 tok/s) and none on a GPU, where it measured
    /// slower (an H100 decoded the 8B shape at 183 tok/s with it, 194
    /// without).
    pub matvec_cast_from: Option<usize>,
}

/// Default dispatches per submission on a GPU (see
/// [`WgpuOptions::submit_every`]): large enough that a submission's own
/// cost stays small beside its dispatches', small enough that the GPU
/// starts after a fraction of a decode step's recording.
pub const SUBMIT_EVERY: usize = 64;

/// An open device and its helpers, shared by the backend's parts.
pub(crate) struct Device {
    gpu: Gpu,
    /// Reduction variant in use (never `Auto`).
    reduction: Reduction,
    /// Whether op parameters go as immediates (else a uniform buffer).
    immediates: bool,
    /// Bytes a model may fill, when known.
    memory: Option<u64>,
    /// Whether node pairs may run as one dispatch (`WGINFER_FUSION=0` turns
    /// it off, to compare or to rule fusion out when chasing a bug).
    fuse: bool,
    /// Whether mat-vecs fold the nodes that compute their activations
    /// (see [`WgpuOptions::fold_activations`]); only when `fuse` is on.
    fold_activations: bool,
    /// Dispatches per submission (`usize::MAX`: one per split).
    submit_every: usize,
    /// Whether kernels keep wgpu's injected bounds checks and loop bounds:
    /// off on Vulkan, whose robust buffer access already keeps every access
    /// inside its binding, as they cost time in every loop;
    /// `WGINFER_SHADER_CHECKS=1` or `0` decides on any backend.
    shader_checks: bool,
    /// Intermediate results inside one op (flash attention's key splits),
    /// created on first use. Ops that use it run one after another on the
    /// queue, and wgpu orders each writer before its reader, so one buffer
    /// serves them all.
    scratch: OnceLock<wgpu::Buffer>,
    /// Activations cast for the cooperative tiled kernel (mul_mm_cast.wgsl),
    /// grown on demand; the same ordering argument as `scratch` lets every
    /// product share it.
    cast_scratch: Mutex<Option<wgpu::Buffer>>,
    /// Whether flash attention may split a step's keys over workgroups
    /// (`WGINFER_FLASH_SPLIT=0` keeps one workgroup per head and query).
    split_keys: bool,
    /// [`WgpuOptions::matvec_groups`], when chosen.
    matvec_groups: Option<u32>,
    /// [`WgpuOptions::tile_wide_from`], resolved.
    tile_wide_from: usize,
    /// [`WgpuOptions::matvec_cast_from`], resolved.
    matvec_cast_from: usize,
}

/// [`WgpuOptions::tile_wide_from`] on a GPU: smaller products would leave
/// too many of its cores idle in 128 x 128 tiles. (On lavapipe, every
/// product wide: the default model's pp128 10-12 -> 19.5 tok/s, its pp64
/// unchanged.)
const TILE_WIDE_FROM: usize = 128;

/// Size of [`Device`]'s scratch buffer: an op whose intermediate results
/// would not fit takes a path without them.
pub(crate) const SCRATCH_BYTES: u64 = 4 << 20;

impl Device {
    fn name(&self) -> &str {
        &self.gpu.summary.name
    }

    fn error(&self, msg: impl Into<String>) -> Error {
        Error::Backend {
            backend: self.name().to_string(),
            msg: msg.into(),
        }
    }

    /// Runs `f` inside validation and out-of-memory error scopes, so wgpu errors
    /// come back as `Error`s instead of reaching the uncaptured-error handler.
    fn catch<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self
            .gpu
            .device
            .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self
            .gpu
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        let invalid = pollster::block_on(validation.pop());
        let out_of_memory = pollster::block_on(oom.pop());
        match (out_of_memory, invalid) {
            (Some(e), _) => Err(Error::OutOfMemory(format!("{}: {e}", self.name()))),
            (None, Some(e)) => Err(self.error(format!("wgpu error: {e}"))),
            (None, None) => Ok(value),
        }
    }

    /// The scratch buffer ([`SCRATCH_BYTES`]).
    fn scratch(&self) -> &wgpu::Buffer {
        self.scratch.get_or_init(|| {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("scratch"),
                size: SCRATCH_BYTES,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        })
    }

    /// The cast scratch's size for `bytes` (whole MiB, so that it grows
    /// in steps), or `None` past a binding's limit.
    fn cast_scratch_size(&self, bytes: u64) -> Option<u64> {
        const MIB: u64 = 1 << 20;
        let size = bytes.max(1).div_ceil(MIB) * MIB;
        (size <= self.gpu.limits.max_storage_buffer_binding_size).then_some(size)
    }

    /// A buffer of at least `bytes` for cast activations, or `None` when
    /// it would pass the binding limit or cannot be allocated (the caller
    /// then takes a path without it). Grows in MiB steps; buffers it
    /// replaces live on in the bind groups of plans that used them.
    fn cast_scratch(&self, bytes: u64) -> Option<wgpu::Buffer> {
        let size = self.cast_scratch_size(bytes)?;
        let mut held = self.cast_scratch.lock().ok()?;
        if let Some(buffer) = held.as_ref().filter(|b| b.size() >= bytes) {
            return Some(buffer.clone());
        }
        let buffer = self
            .catch(|| {
                self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("cast activations"),
                    size,
                    usage: wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                })
            })
            .ok()?;
        *held = Some(buffer.clone());
        Some(buffer)
    }

    /// Waits for the GPU and hands the first `count` timestamps in
    /// `readback` (a MAP_READ buffer they were copied into) to `f`; `what`
    /// names them in errors.
    fn read_timestamps<R>(
        &self,
        readback: &wgpu::Buffer,
        count: usize,
        what: &str,
        f: impl FnOnce(&[u64]) -> R,
    ) -> Result<R> {
        let slice = readback.slice(..(count * wgpu::QUERY_SIZE as usize) as u64);
        let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        if !matches!(pollster::block_on(rx.receive()), Some(Ok(()))) {
            return Err(self.error(format!("reading {what} failed")));
        }
        let out = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| self.error(format!("reading {what}: {e}")))?;
            f(bytemuck::cast_slice(&view))
        };
        readback.unmap();
        Ok(out)
    }

    /// Blocks until the queue is idle.
    fn wait(&self) -> Result<()> {
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| self.error(format!("waiting for the device failed: {e}")))
    }
}

/// The mat-vec row groups asked for by `options`, else by
/// `WGINFER_MATVEC_GROUPS`; anything but 1, 2, 4 or 8 is an error.
fn matvec_groups(options: &WgpuOptions) -> Result<Option<u32>> {
    let invalid = |v: &str| {
        Error::invalid(format!(
            "mat-vec row groups {v}: expected 1, 2, 4 or 8 (WgpuOptions::matvec_groups, WGINFER_MATVEC_GROUPS)"
        ))
    };
    let groups = match (
        options.matvec_groups,
        std::env::var("WGINFER_MATVEC_GROUPS"),
    ) {
        (Some(g), _) => Some(g),
        (None, Ok(v)) => Some(v.trim().parse::<u32>().map_err(|_| invalid(&v))?),
        (None, Err(_)) => None,
    };
    match groups {
        Some(g) if !(g.is_power_of_two() && g <= 8) => Err(invalid(&g.to_string())),
        g => Ok(g),
    }
}

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A [`Backend`] on one wgpu device.
pub struct WgpuBackend {
    dev: Device,
    owner: u64,
    transfers: buffer::Transfers,
    kernels: kernels::KernelCache,
    plans: Mutex<plan::PlanCache>,
}

impl WgpuBackend {
    /// Opens the adapter chosen by `options`.
    pub fn new(options: &WgpuOptions) -> Result<WgpuBackend> {
        let gpu = Gpu::open(&options.adapter)?;
        let wanted = match (options.reduction, std::env::var("WGINFER_REDUCTION")) {
            (Reduction::Auto, Ok(env)) => Reduction::parse(&env)?,
            (r, _) => r,
        };
        let reduction = match wanted {
            Reduction::Workgroup => Reduction::Workgroup,
            Reduction::Subgroup if !gpu.has_subgroups() => {
                return Err(Error::invalid(format!(
                    "{} has no subgroup operations",
                    gpu.summary.name
                )));
            }
            _ if gpu.has_subgroups() => Reduction::Subgroup,
            _ => Reduction::Workgroup,
        };
        let immediates = gpu.has_immediates(params::PARAMS_SIZE) && !options.uniform_params;
        let is_cpu = gpu.summary.device_type == "Cpu";
        let fold_from_env = std::env::var("WGINFER_FOLD_ACTIVATIONS")
            .ok()
            .map(|v| v.trim() != "0");
        let fold_activations = options
            .fold_activations
            .or(fold_from_env)
            .unwrap_or(!is_cpu);
        let from_env = std::env::var("WGINFER_SUBMIT_EVERY")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok());
        let submit_every = match options.submit_every.or(from_env) {
            Some(0) => usize::MAX,
            Some(n) => n,
            None if is_cpu => usize::MAX,
            None => SUBMIT_EVERY,
        };
        log::info!(
            "wgpu: {} using {reduction:?} reductions, parameters as {}",
            gpu.summary.name,
            if immediates { "immediates" } else { "uniforms" }
        );
        // Vulkan devices check every access themselves (wgpu turns on
        // robust buffer access), so wgpu's own checks only cost time there;
        // elsewhere they stay unless asked off.
        let shader_checks = match std::env::var("WGINFER_SHADER_CHECKS") {
            Ok(v) => v.trim() != "0",
            Err(_) => gpu.summary.backend != "Vulkan",
        };
        let dev = Device {
            memory: match (gpu.summary.memory, options.memory_limit) {
                (Some(have), Some(cap)) => Some(have.min(cap)),
                (have, cap) => have.or(cap),
            },
            gpu,
            reduction,
            immediates,
            fuse: std::env::var("WGINFER_FUSION").map_or(true, |v| v.trim() != "0"),
            shader_checks,
            scratch: OnceLock::new(),
            cast_scratch: Mutex::new(None),
            split_keys: std::env::var("WGINFER_FLASH_SPLIT").map_or(true, |v| v.trim() != "0"),
            fold_activations,
            submit_every,
            matvec_groups: matvec_groups(options)?,
            tile_wide_from: options.tile_wide_from.unwrap_or_else(|| {
                std::env::var("WGINFER_TILE_WIDE_FROM")
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(if is_cpu { 0 } else { TILE_WIDE_FROM })
            }),
            matvec_cast_from: options.matvec_cast_from.unwrap_or_else(|| {
                std::env::var("WGINFER_MATVEC_CAST_FROM")
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(if is_cpu { 0 } else { usize::MAX })
            }),
        };
        let profiler = profile::Profiler::new(&dev, options.perf_logger);
        // The perf logger's waits would be timed too.
        let timer = match profiler {
            Some(_) => None,
            None => gpu_timer::GpuTimer::new(&dev, options.gpu_timer),
        };
        let plans = plan::PlanCache::new(profiler, timer);
        Ok(WgpuBackend {
            dev,
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            transfers: buffer::Transfers::new(),
            kernels: kernels::KernelCache::default(),
            plans: Mutex::new(plans),
        })
    }

    /// The adapter this backend runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.dev.gpu.summary
    }

    /// Bytes of the largest tensor a kernel can bind (the device's storage
    /// binding limit): ops on larger tensors are not supported here and
    /// are scheduled on another backend.
    pub fn max_binding_bytes(&self) -> u64 {
        self.dev.gpu.limits.max_storage_buffer_binding_size
    }

    /// Whether op parameters travel as immediates (else through a uniform buffer).
    pub fn uses_immediates(&self) -> bool {
        self.dev.immediates
    }

    /// The reduction variant in use (`Subgroup` or `Workgroup`).
    pub fn reduction(&self) -> Reduction {
        self.dev.reduction
    }

    /// GPU time per kernel so far, most expensive first, when the backend
    /// was opened with [`WgpuOptions::perf_logger`] (or
    /// `WGINFER_PERF_LOGGER=1`) on a device that can time dispatches; it is
    /// also printed to stderr when the backend is dropped.
    pub fn perf_report(&self) -> Option<String> {
        self.plans
            .lock()
            .ok()
            .and_then(|p| p.profile_report(self.dev.name()))
    }

    /// Dispatches and submits of the most recent [`Backend::compute`].
    pub fn last_run_stats(&self) -> DispatchStats {
        self.plans.lock().map(|p| p.last_stats).unwrap_or_default()
    }

    fn buffer<'a>(&self, handle: &'a BufferHandle) -> Result<&'a WgpuBuffer> {
        handle
            .as_any()
            .downcast_ref::<WgpuBuffer>()
            .filter(|b| b.owner == self.owner)
            .ok_or_else(|| {
                self.dev.error(format!(
                    "a buffer of '{}' cannot be used by this device",
                    handle.backend_name()
                ))
            })
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> &str {
        self.dev.name()
    }

    fn alignment(&self) -> usize {
        self.dev
            .gpu
            .limits
            .min_storage_buffer_offset_alignment
            .max(16) as usize
    }

    fn max_buffer_size(&self) -> usize {
        self.dev.gpu.limits.max_buffer_size as usize
    }

    fn max_tensor_size(&self) -> usize {
        let binding = usize::try_from(self.max_binding_bytes()).unwrap_or(usize::MAX);
        binding.min(self.max_buffer_size())
    }

    fn memory(&self) -> Option<usize> {
        self.dev
            .memory
            .map(|m| usize::try_from(m).unwrap_or(usize::MAX))
    }

    fn alloc_buffer(&self, size: usize, usage: BufferUsage) -> Result<BufferHandle> {
        Ok(Arc::new(
            self.transfers.alloc(&self.dev, size, usage, self.owner)?,
        ))
    }

    fn owns(&self, buffer: &BufferHandle) -> bool {
        self.buffer(buffer).is_ok()
    }

    fn write_buffer(&self, buffer: &BufferHandle, offset: usize, data: &[u8]) -> Result<()> {
        self.transfers
            .write(&self.dev, self.buffer(buffer)?, offset, data)
    }

    fn read_buffer(&self, buffer: &BufferHandle, offset: usize, out: &mut [u8]) -> Result<()> {
        self.transfers
            .read(&self.dev, self.buffer(buffer)?, offset, out)
    }

    fn read_buffers(&self, reads: &mut [BufferRead<'_>]) -> Result<()> {
        let mut own = Vec::with_capacity(reads.len());
        for r in reads.iter_mut() {
            own.push((self.buffer(r.buffer)?, r.offset, &mut *r.out));
        }
        self.transfers.read_many(&self.dev, &mut own)
    }

    fn start_read(&self, buffer: &BufferHandle, offset: usize, len: usize) -> Result<PendingRead> {
        self.transfers
            .start_read(&self.dev, self.buffer(buffer)?, offset, len)
    }

    fn queues_work(&self) -> bool {
        true
    }

    fn supports_op(&self, graph: &Graph, node: TensorId) -> bool {
        graph.check_ids(&[node]).is_ok() && ops::supports(&self.dev, graph, node)
    }

    fn compute(&self, graph: &Graph, nodes: &[TensorId]) -> Result<()> {
        graph.check_ids(nodes)?;
        let mut plans = self
            .plans
            .lock()
            .map_err(|_| self.dev.error("plan cache lock poisoned"))?;
        plans.run(&self.dev, &self.kernels, graph, nodes, &|h| self.buffer(h))
    }

    fn synchronize(&self) -> Result<()> {
        self.dev.wait()
    }

    fn counters(&self) -> Counters {
        let Ok(mut plans) = self.plans.lock() else {
            return Counters::default();
        };
        match plans.counters(&self.dev) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("{e}");
                plans.totals
            }
        }
    }
}

impl Drop for WgpuBackend {
    fn drop(&mut self) {
        if let Ok(plans) = self.plans.lock() {
            if let Some(report) = plans.profile_report(self.dev.name()) {
                eprint!("{report}");
            }
        }
    }
}
