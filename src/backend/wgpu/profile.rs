//! GPU time per kernel, from timestamps written between dispatches (like
//! llama.cpp's `GGML_VK_PERF_LOGGER`). Turned on by `WGINFER_PERF_LOGGER=1`
//! (or [`WgpuOptions::perf_logger`](super::WgpuOptions::perf_logger)) where
//! the device can write timestamps inside compute passes; each
//! submission then waits for its timestamps, so this is for finding where
//! GPU time goes, not for measuring speed. The totals are printed to stderr
//! when the backend is dropped.
//!
//! A timestamp between two dispatches is not free: on an H100 it turns a
//! 2.2 µs dependent dispatch into 8.4 µs (`examples/dispatch_floor`), so
//! every launch's time here includes about 6 µs that an unlogged run does
//! not spend. Compare short kernels with each other, not with wall time.

use std::collections::HashMap;

use super::Device;
use crate::Result;

/// Timestamps one submission can hold: the dispatches of one submission plus one.
pub const MAX_DISPATCHES: usize = 255;

/// Time, launches and bytes bound of one kernel at one grid size.
#[derive(Clone, Copy, Default)]
struct KernelTime {
    launches: u64,
    ns: f64,
    bound: u64,
}

/// One dispatch as the perf logger sees it. Launches of a kernel are
/// counted apart per grid size, which tells the shapes of a mat-vec apart.
pub struct Launch<'a> {
    pub kernel: &'a str,
    pub workgroups: [u32; 3],
    /// Bytes of the buffer windows bound: for a mat-vec, about its weights,
    /// so bytes over time is close to its read bandwidth.
    pub bound: u64,
}

/// A timestamp query set with the buffers its values are resolved into
/// and read back from: the perf logger's and the GPU timer's.
pub struct Stamps {
    pub queries: wgpu::QuerySet,
    pub resolved: wgpu::Buffer,
    pub readback: wgpu::Buffer,
    pub period_ns: f64,
}

impl Stamps {
    /// `count` timestamps, resolved into (and read back from) `bytes`.
    pub fn new(dev: &Device, label: &str, count: u32, bytes: u64) -> Stamps {
        let device = &dev.gpu.device;
        let buffer = |usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Stamps {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some(label),
                ty: wgpu::QueryType::Timestamp,
                count,
            }),
            resolved: buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
            readback: buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            period_ns: f64::from(dev.gpu.queue.get_timestamp_period()),
        }
    }
}

/// `wanted`, or where that is `None`, whether the environment variable
/// `var` is set to something other than 0.
pub fn asked(wanted: Option<bool>, var: &str) -> bool {
    wanted.unwrap_or_else(|| std::env::var(var).is_ok_and(|v| v.trim() != "0"))
}

pub struct Profiler {
    stamps: Stamps,
    per_kernel: HashMap<String, KernelTime>,
    runs: u64,
}

impl Profiler {
    /// A profiler when `wanted` (else when `WGINFER_PERF_LOGGER` asks for
    /// one) and the device can time dispatches.
    pub fn new(dev: &Device, wanted: Option<bool>) -> Option<Profiler> {
        if !asked(wanted, "WGINFER_PERF_LOGGER") {
            return None;
        }
        let inside =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        if !dev.gpu.features.contains(inside) {
            log::warn!(
                "WGINFER_PERF_LOGGER: {} cannot write timestamps inside compute passes",
                dev.name()
            );
            return None;
        }
        let count = MAX_DISPATCHES as u32 + 1;
        let bytes = u64::from(count) * wgpu::QUERY_SIZE as u64;
        Some(Profiler {
            stamps: Stamps::new(dev, "wginfer perf logger", count, bytes),
            per_kernel: HashMap::new(),
            runs: 0,
        })
    }

    /// Writes the timestamp before dispatch `i` of a submission (`i ==
    /// n`: after the last).
    pub fn stamp(&self, pass: &mut wgpu::ComputePass<'_>, i: usize) {
        pass.write_timestamp(&self.stamps.queries, i as u32);
    }

    /// Copies the `n + 1` timestamps of a submission of `n` dispatches where
    /// [`Profiler::collect`] reads them.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder, n: usize) {
        let count = n as u32 + 1;
        let s = &self.stamps;
        encoder.resolve_query_set(&s.queries, 0..count, &s.resolved, 0);
        let bytes = u64::from(count) * wgpu::QUERY_SIZE as u64;
        encoder.copy_buffer_to_buffer(&s.resolved, 0, &s.readback, 0, bytes);
    }

    /// Waits for a submitted batch and adds each dispatch's time to its kernel.
    pub fn collect(&mut self, dev: &Device, launches: &[Launch<'_>]) -> Result<()> {
        let what = "the perf logger's timestamps";
        let (per_kernel, period_ns) = (&mut self.per_kernel, self.stamps.period_ns);
        dev.read_timestamps(&self.stamps.readback, launches.len() + 1, what, |stamps| {
            for (launch, pair) in launches.iter().zip(stamps.windows(2)) {
                let [x, y, z] = launch.workgroups;
                let name = format!("{} [{x}x{y}x{z}]", launch.kernel);
                let t = per_kernel.entry(name).or_default();
                t.launches += 1;
                t.ns += pair[1].saturating_sub(pair[0]) as f64 * period_ns;
                t.bound += launch.bound;
            }
        })
    }

    /// Counts one run of a split.
    pub fn count_run(&mut self) {
        self.runs += 1;
    }

    /// The totals, most expensive kernel first.
    pub fn report(&self, device: &str) -> String {
        let mut rows: Vec<_> = self.per_kernel.iter().collect();
        rows.sort_by(|a, b| b.1.ns.total_cmp(&a.1.ns));
        let total: f64 = rows.iter().map(|r| r.1.ns).sum();
        let runs = self.runs.max(1) as f64;
        let mut out = format!(
            "wginfer perf logger, {device}: {:.1} us of GPU time per split run over {} runs \
             (each launch's time includes writing a timestamp; examples/dispatch_floor measures that)\n",
            total / runs / 1e3,
            self.runs
        );
        for (name, t) in rows {
            out += &format!(
                "  {:>9.1} us/run {:>5.1}%  {:>7.1} launches/run  {:>7.2} us each  {:>7.1} GB/s bound  {name}\n",
                t.ns / runs / 1e3,
                100.0 * t.ns / total.max(1.0),
                t.launches as f64 / runs,
                t.ns / t.launches.max(1) as f64 / 1e3,
                t.bound as f64 / t.ns.max(1.0),
            );
        }
        out
    }
}
