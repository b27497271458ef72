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

pub struct Profiler {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    period_ns: f64,
    per_kernel: HashMap<String, KernelTime>,
    runs: u64,
}

impl Profiler {
    /// A profiler when `wanted` (else when `WGINFER_PERF_LOGGER` asks for
    /// one) and the device can time dispatches.
    pub fn new(dev: &Device, wanted: Option<bool>) -> Option<Profiler> {
        let wanted = wanted
            .unwrap_or_else(|| std::env::var("WGINFER_PERF_LOGGER").is_ok_and(|v| v.trim() != "0"));
        if !wanted {
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
        let device = &dev.gpu.device;
        let count = MAX_DISPATCHES as u32 + 1;
        let bytes = u64::from(count) * wgpu::QUERY_SIZE as u64;
        let buffer = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Some(Profiler {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("wginfer perf logger"),
                ty: wgpu::QueryType::Timestamp,
                count,
            }),
            resolved: buffer(
                "wginfer timestamps",
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(
                "wginfer timestamps readback",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            period_ns: f64::from(dev.gpu.queue.get_timestamp_period()),
            per_kernel: HashMap::new(),
            runs: 0,
        })
    }

    /// Writes the timestamp before dispatch `i` of a submission (`i ==
    /// n`: after the last).
    pub fn stamp(&self, pass: &mut wgpu::ComputePass<'_>, i: usize) {
        pass.write_timestamp(&self.queries, i as u32);
    }

    /// Copies the `n + 1` timestamps of a submission of `n` dispatches where
    /// [`Profiler::collect`] reads them.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder, n: usize) {
        let count = n as u32 + 1;
        encoder.resolve_query_set(&self.queries, 0..count, &self.resolved, 0);
        let bytes = u64::from(count) * wgpu::QUERY_SIZE as u64;
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, bytes);
    }

    /// Waits for a submitted batch and adds each dispatch's time to its kernel.
    pub fn collect(&mut self, dev: &Device, launches: &[Launch<'_>]) -> Result<()> {
        let bytes = (launches.len() as u64 + 1) * wgpu::QUERY_SIZE as u64;
        let slice = self.readback.slice(..bytes);
        let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        dev.wait()?;
        if !matches!(pollster::block_on(rx.receive()), Some(Ok(()))) {
            return Err(dev.error("reading the perf logger's timestamps failed"));
        }
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| dev.error(format!("reading the perf logger's timestamps: {e}")))?;
            let stamps: &[u64] = bytemuck::cast_slice(&view);
            for (launch, pair) in launches.iter().zip(stamps.windows(2)) {
                let [x, y, z] = launch.workgroups;
                let name = format!("{} [{x}x{y}x{z}]", launch.kernel);
                let t = self.per_kernel.entry(name).or_default();
                t.launches += 1;
                t.ns += pair[1].saturating_sub(pair[0]) as f64 * self.period_ns;
                t.bound += launch.bound;
            }
        }
        self.readback.unmap();
        Ok(())
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
