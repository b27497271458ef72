//! Running a split: its dispatches are recorded into command encoders of
//! one compute pass each, submitted in runs that grow from a few to
//! `submit_every` dispatches (once, on CPU-type adapters) so that a GPU
//! starts while the rest is recorded. Pipelines come from the kernel
//! cache and bind groups from a cache keyed by kernel and buffer windows, so
//! a new graph of the same shape builds nothing new: only parameters change.
//!
//! The same graph run again (same [`Graph::version`] and nodes: a decode
//! step reusing its plan) is not even encoded again: its list of pipelines,
//! bind groups, parameters and workgroup counts is kept, and recording it
//! is one loop of pass commands.

use std::collections::HashMap;
use std::sync::Arc;

use super::gpu_timer::{self, GpuTimer};
use super::kernels::{uniform_layout, Kernel, KernelCache, KernelKey};
use super::params::{Params, PARAMS_SIZE};
use super::profile::{self, Profiler};
use super::{ops, Device, WgpuBuffer};
use crate::backend::BufferHandle;
use crate::graph::{Graph, TensorId};
use crate::Result;

/// A window of a buffer bound to one binding slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Binding {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
    pub size: u64,
}

/// One kernel launch.
pub struct Dispatch {
    pub key: KernelKey,
    /// Sources then destination, in binding order.
    pub bindings: Vec<Binding>,
    pub params: Params,
    pub workgroups: [u32; 3],
}

/// A split's dispatches, ready to record: pipeline, bind group, parameters
/// and workgroups of each.
struct Recorded {
    version: u64,
    nodes: Vec<TensorId>,
    steps: Vec<Step>,
    last_used: u64,
}

struct Step {
    kernel: Arc<Kernel>,
    group: wgpu::BindGroup,
    params: Params,
    workgroups: [u32; 3],
    /// Bytes of the buffer windows bound (for the perf logger's GB/s).
    bound: u64,
}

/// Recorded splits kept, the least recently run dropped first: every split
/// of a few graphs (prompt and decode), even in row-split mode, where one
/// device runs a hundred splits per token.
const KEEP_RECORDED: usize = 256;

/// What one [`Backend::compute`](crate::backend::Backend::compute) of a wgpu backend recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// Kernel launches.
    pub dispatches: usize,
    /// Queue submissions (0 when the split had nothing to dispatch).
    pub submits: usize,
    /// Bind groups created (0 when a graph of the same shape ran before).
    pub new_bind_groups: usize,
    /// Whether the dispatches were encoded from the graph (false when the
    /// same graph's split ran before and its recording was reused).
    pub encoded: bool,
}

/// Dispatches in a split's first submission at most: the GPU idles until
/// it arrives, so it is small, and each after it twice the one before, up
/// to `submit_every`, so the host records ahead of the GPU at once.
const FIRST_SUBMISSION: usize = 8;

/// The ranges of `n` dispatches submitted one after another: growing from
/// [`FIRST_SUBMISSION`] when the GPU `idles` until they come, else (it is
/// still running the last run, as a pipelined decode's steps) all of
/// `submit_every`; one range when that is `usize::MAX` (one submission per
/// split).
fn submissions(
    n: usize,
    submit_every: usize,
    idles: bool,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut start = 0;
    let mut size = match submit_every {
        usize::MAX => usize::MAX,
        every if idles => FIRST_SUBMISSION.min(every).max(1),
        every => every.max(1),
    };
    std::iter::from_fn(move || {
        if start >= n {
            return None;
        }
        let end = n.min(start.saturating_add(size));
        let range = start..end;
        start = end;
        size = size.saturating_mul(2).min(submit_every);
        Some(range)
    })
}

/// Bind groups not used for this many runs are dropped (they keep buffers alive).
const KEEP_RUNS: u64 = 8;

type BindKey = (usize, Vec<Binding>);

/// Per-backend state reused across runs.
#[derive(Default)]
pub struct PlanCache {
    /// GPU time per kernel, when `WGINFER_PERF_LOGGER` asks for it.
    profiler: Option<Profiler>,
    /// GPU time per run, when `WGINFER_GPU_TIMER` asks for it.
    timer: Option<GpuTimer>,
    bind_groups: HashMap<BindKey, (wgpu::BindGroup, u64)>,
    recorded: Vec<Recorded>,
    uniforms: Option<Uniforms>,
    run: u64,
    /// Cleared at each run's last submission, set again when the GPU has
    /// done it (as the host waits on a readback): whether the GPU idles
    /// while the next run is recorded.
    gpu_busy: Arc<std::sync::atomic::AtomicBool>,
    pub last_stats: DispatchStats,
    pub totals: crate::backend::Counters,
}

/// The uniform-buffer path for parameters: one slot per dispatch.
struct Uniforms {
    buffer: wgpu::Buffer,
    group: wgpu::BindGroup,
    slots: usize,
    stride: u64,
    /// Host copy of the slots, reused from run to run.
    staging: Vec<u8>,
}

impl Uniforms {
    fn new(dev: &Device, slots: usize) -> Result<Uniforms> {
        let device = &dev.gpu.device;
        let align = dev.gpu.limits.min_uniform_buffer_offset_alignment as u64;
        let stride = (PARAMS_SIZE as u64).div_ceil(align) * align;
        dev.catch(|| {
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wginfer params"),
                size: stride * slots as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("wginfer params"),
                layout: &uniform_layout(device),
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &buffer,
                        offset: 0,
                        size: wgpu::BufferSize::new(PARAMS_SIZE as u64),
                    }),
                }],
            });
            Uniforms {
                buffer,
                group,
                slots,
                stride,
                staging: Vec::new(),
            }
        })
    }
}

impl PlanCache {
    pub fn new(profiler: Option<Profiler>, timer: Option<GpuTimer>) -> PlanCache {
        PlanCache {
            profiler,
            timer,
            ..PlanCache::default()
        }
    }

    /// Dispatches and submits so far, with the GPU timer's totals (read
    /// now, waiting for the GPU) when there is one.
    pub fn counters(&mut self, dev: &Device) -> Result<crate::backend::Counters> {
        let timed = match self.timer.as_mut() {
            Some(t) => t.totals(dev)?,
            None => crate::backend::Counters::default(),
        };
        // The timer counts only GPU time, the totals only launches.
        Ok(self.totals + timed)
    }

    /// GPU time per kernel so far, when profiling.
    pub fn profile_report(&self, device: &str) -> Option<String> {
        self.profiler.as_ref().map(|p| p.report(device))
    }

    fn bind_group(
        &mut self,
        dev: &Device,
        kernel: &Arc<Kernel>,
        bindings: &[Binding],
    ) -> Result<wgpu::BindGroup> {
        let key = (Arc::as_ptr(kernel) as usize, bindings.to_vec());
        if let Some((group, used)) = self.bind_groups.get_mut(&key) {
            *used = self.run;
            return Ok(group.clone());
        }
        let entries: Vec<_> = bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &b.buffer,
                    offset: b.offset,
                    size: wgpu::BufferSize::new(b.size),
                }),
            })
            .collect();
        let group = dev.catch(|| {
            dev.gpu
                .device
                .create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(&kernel.name),
                    layout: &kernel.layout,
                    entries: &entries,
                })
        })?;
        self.bind_groups.insert(key, (group.clone(), self.run));
        self.last_stats.new_bind_groups += 1;
        Ok(group)
    }

    /// The index of the recorded dispatches of `nodes`, encoding them when
    /// this graph version's split has none.
    fn recorded(
        &mut self,
        dev: &Device,
        kernels: &KernelCache,
        graph: &Graph,
        nodes: &[TensorId],
        buffer_of: &dyn Fn(&BufferHandle) -> Result<&WgpuBuffer>,
    ) -> Result<usize> {
        let version = graph.version();
        if let Some(i) = self
            .recorded
            .iter()
            .position(|r| r.version == version && r.nodes == nodes)
        {
            self.recorded[i].last_used = self.run;
            return Ok(i);
        }
        let dispatches = ops::encode_all(dev, graph, nodes, buffer_of)?;
        let mut steps = Vec::with_capacity(dispatches.len());
        for d in dispatches {
            let kernel = kernels.get(dev, &d.key)?;
            let group = self.bind_group(dev, &kernel, &d.bindings)?;
            steps.push(Step {
                kernel,
                group,
                params: d.params,
                workgroups: d.workgroups,
                bound: d.bindings.iter().map(|b| b.size).sum(),
            });
        }
        self.last_stats.encoded = true;
        let recorded = Recorded {
            version,
            nodes: nodes.to_vec(),
            steps,
            last_used: self.run,
        };
        if self.recorded.len() < KEEP_RECORDED {
            self.recorded.push(recorded);
            return Ok(self.recorded.len() - 1);
        }
        let oldest = (0..self.recorded.len())
            .min_by_key(|&i| self.recorded[i].last_used)
            .unwrap_or(0);
        self.recorded[oldest] = recorded;
        Ok(oldest)
    }

    /// Records and submits the dispatches of `nodes`.
    pub fn run(
        &mut self,
        dev: &Device,
        kernels: &KernelCache,
        graph: &Graph,
        nodes: &[TensorId],
        buffer_of: &dyn Fn(&BufferHandle) -> Result<&WgpuBuffer>,
    ) -> Result<()> {
        self.run += 1;
        self.last_stats = DispatchStats::default();
        let at = self.recorded(dev, kernels, graph, nodes, buffer_of)?;
        let n = self.recorded[at].steps.len();
        self.last_stats.dispatches = n;
        if n == 0 {
            return Ok(()); // an empty command buffer crashes some drivers
        }
        let immediates = dev.immediates;
        if !immediates && self.uniforms.as_ref().is_none_or(|u| u.slots < n) {
            self.uniforms = Some(Uniforms::new(dev, n.next_power_of_two())?);
        }
        let steps = &self.recorded[at].steps;
        if let Some(u) = self.uniforms.as_mut().filter(|_| !immediates) {
            let stride = u.stride as usize;
            u.staging.clear();
            u.staging.resize(stride * n, 0);
            for (slot, step) in u.staging.chunks_exact_mut(stride).zip(steps) {
                slot[..PARAMS_SIZE as usize].copy_from_slice(bytemuck::bytes_of(&step.params));
            }
            dev.gpu.queue.write_buffer(&u.buffer, 0, &u.staging);
        }
        let uniforms = self.uniforms.as_ref().filter(|_| !immediates);
        let per_submit = match self.profiler {
            Some(_) => dev.submit_every.min(profile::MAX_DISPATCHES),
            None => dev.submit_every,
        };
        let mut submits = 0;
        let mut profiled = Ok(());
        let idles = !self.gpu_busy.load(std::sync::atomic::Ordering::Acquire);
        let passes = submissions(steps.len(), per_submit, idles).count();
        let timer = self
            .timer
            .as_ref()
            .filter(|_| passes <= gpu_timer::MAX_PASSES);
        let timed = timer.is_some();
        dev.catch(|| {
            for (pass_index, range) in submissions(steps.len(), per_submit, idles).enumerate() {
                let first = range.start;
                let chunk = &steps[range];
                let mut encoder =
                    dev.gpu
                        .device
                        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some("wginfer split"),
                        });
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("wginfer split"),
                        timestamp_writes: timer.map(|t| t.writes(pass_index)),
                    });
                    for (i, step) in chunk.iter().enumerate() {
                        if let Some(p) = &self.profiler {
                            p.stamp(&mut pass, i);
                        }
                        pass.set_pipeline(&step.kernel.pipeline);
                        pass.set_bind_group(0, &step.group, &[]);
                        match uniforms {
                            Some(u) => pass.set_bind_group(
                                1,
                                &u.group,
                                &[((first + i) as u64 * u.stride) as u32],
                            ),
                            None => pass.set_immediates(0, bytemuck::bytes_of(&step.params)),
                        }
                        let [x, y, z] = step.workgroups;
                        pass.dispatch_workgroups(x, y, z);
                    }
                    if let Some(p) = &self.profiler {
                        p.stamp(&mut pass, chunk.len());
                    }
                }
                if let Some(p) = &self.profiler {
                    p.resolve(&mut encoder, chunk.len());
                }
                if let Some(t) = timer.filter(|_| pass_index + 1 == passes) {
                    t.resolve(&mut encoder, passes);
                }
                dev.gpu.queue.submit([encoder.finish()]);
                submits += 1;
                if let Some(p) = self.profiler.as_mut().filter(|_| profiled.is_ok()) {
                    let launches: Vec<profile::Launch> = chunk
                        .iter()
                        .map(|s| profile::Launch {
                            kernel: &s.kernel.name,
                            workgroups: s.workgroups,
                            bound: s.bound,
                        })
                        .collect();
                    profiled = p.collect(dev, &launches);
                }
            }
        })?;
        profiled?;
        if let Some(t) = self.timer.as_mut().filter(|_| timed) {
            t.ran(dev, passes)?;
        }
        self.gpu_busy
            .store(true, std::sync::atomic::Ordering::Release);
        let busy = Arc::clone(&self.gpu_busy);
        dev.gpu.queue.on_submitted_work_done(move || {
            busy.store(false, std::sync::atomic::Ordering::Release)
        });
        if let Some(p) = self.profiler.as_mut() {
            p.count_run();
        }
        self.last_stats.submits = submits;
        self.totals.dispatches += n as u64;
        self.totals.submits += submits as u64;
        let run = self.run;
        self.bind_groups
            .retain(|_, (_, used)| run - *used < KEEP_RUNS);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::submissions;

    #[test]
    fn submissions_grow_to_the_limit_and_cover_every_dispatch() {
        let sizes = |n, every| {
            submissions(n, every, true)
                .map(|r| r.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(sizes(182, 64), [8, 16, 32, 64, 62]);
        assert_eq!(sizes(5, 64), [5]);
        assert_eq!(sizes(0, 64), Vec::<usize>::new());
        assert_eq!(sizes(20, 4), [4, 4, 4, 4, 4]);
        assert_eq!(sizes(3, usize::MAX), [3]);
        assert_eq!(sizes(500, usize::MAX), [500]);
        let busy: Vec<_> = submissions(182, 64, false).map(|r| r.len()).collect();
        assert_eq!(busy, [64, 64, 54]);
        let ranges: Vec<_> = submissions(1000, 64, true).collect();
        assert_eq!(ranges.first().map(|r| r.start), Some(0));
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(ranges.last().map(|r| r.end), Some(1000));
    }
}
