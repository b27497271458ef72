//! GPU time per split run, from timestamps at the start and end of each of
//! its compute passes (one pass per submission): how long the GPU ran the
//! run's kernels (busy) and how long from the first kernel's start to the
//! last one's end (span; span less busy is the time between submissions).
//! Against wall time per decoded token this tells whether a decode step
//! waits for the GPU, for the gaps between its submissions or for the host.
//!
//! Unlike the perf logger's timestamps between dispatches, which serialise
//! them, these leave the dispatches alone: two timestamps per submission.
//! Nor does anything wait for them: each run's are resolved into a ring of
//! slots, read when the ring is full and when the totals are asked for.
//! Turned on by `WGINFER_GPU_TIMER=1` (or
//! [`WgpuOptions::gpu_timer`](super::WgpuOptions::gpu_timer)) where the
//! device has timestamp queries; the totals come with the backend's
//! [`Counters`].

use super::profile::{asked, Stamps};
use super::Device;
use crate::backend::Counters;
use crate::Result;

/// Passes (submissions) of a run that are timed: a run of more is not
/// timed at all (a split of more than about 1,900 dispatches, 64 a
/// submission after the first few).
pub const MAX_PASSES: usize = 32;
/// Runs whose timestamps wait in the resolve buffer before they are read.
const RING: usize = 64;
/// Bytes of one run's timestamps: a begin and an end per pass, a multiple
/// of wgpu's 256-byte resolve alignment.
const SLOT_BYTES: u64 = (2 * MAX_PASSES * wgpu::QUERY_SIZE as usize) as u64;

pub struct GpuTimer {
    stamps: Stamps,
    /// Passes of each run resolved into the ring and not yet read, by slot.
    pending: Vec<usize>,
    /// Timed runs, busy and span nanoseconds so far.
    totals: Counters,
}

impl GpuTimer {
    /// A timer when `wanted` (else when `WGINFER_GPU_TIMER` asks for one)
    /// and the device has timestamp queries.
    pub fn new(dev: &Device, wanted: Option<bool>) -> Option<GpuTimer> {
        if !asked(wanted, "WGINFER_GPU_TIMER") {
            return None;
        }
        if !dev.gpu.features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            log::warn!("WGINFER_GPU_TIMER: {} has no timestamp queries", dev.name());
            return None;
        }
        let (count, bytes) = (2 * MAX_PASSES as u32, RING as u64 * SLOT_BYTES);
        Some(GpuTimer {
            stamps: Stamps::new(dev, "wginfer gpu timer", count, bytes),
            pending: Vec::with_capacity(RING),
            totals: Counters::default(),
        })
    }

    /// The timestamp writes of pass `i` of a timed run.
    pub fn writes(&self, i: usize) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.stamps.queries,
            beginning_of_pass_write_index: Some(2 * i as u32),
            end_of_pass_write_index: Some(2 * i as u32 + 1),
        }
    }

    /// Copies the timestamps of a run's `passes` into its slot, in the
    /// encoder of its last submission (after its pass).
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder, passes: usize) {
        let slot = self.pending.len() as u64;
        let count = 2 * passes as u32;
        let s = &self.stamps;
        encoder.resolve_query_set(&s.queries, 0..count, &s.resolved, slot * SLOT_BYTES);
    }

    /// Notes the run just submitted (its timestamps resolved by
    /// [`GpuTimer::resolve`]); reads the ring when it is full.
    pub fn ran(&mut self, dev: &Device, passes: usize) -> Result<()> {
        self.pending.push(passes);
        if self.pending.len() == RING {
            self.read(dev)?;
        }
        Ok(())
    }

    /// Reads the runs in the ring (waiting for the GPU) into the totals,
    /// then returns them: `gpu_timed_runs`, `gpu_busy_ns`, `gpu_span_ns`.
    pub fn totals(&mut self, dev: &Device) -> Result<Counters> {
        self.read(dev)?;
        Ok(self.totals)
    }

    fn read(&mut self, dev: &Device) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes = self.pending.len() as u64 * SLOT_BYTES;
        let mut encoder = dev.gpu.device.create_command_encoder(&Default::default());
        let s = &self.stamps;
        encoder.copy_buffer_to_buffer(&s.resolved, 0, &s.readback, 0, bytes);
        dev.gpu.queue.submit([encoder.finish()]);
        let count = self.pending.len() * 2 * MAX_PASSES;
        let (totals, pending) = (&mut self.totals, &self.pending);
        let what = "the GPU timer's timestamps";
        dev.read_timestamps(&s.readback, count, what, |stamps| {
            for (slot, &passes) in stamps.chunks_exact(2 * MAX_PASSES).zip(pending) {
                add_run(totals, s.period_ns, &slot[..2 * passes]);
            }
        })?;
        self.pending.clear();
        Ok(())
    }
}

/// Adds one run's begin/end pairs (ticks of `period_ns`) to `totals`; a
/// run whose stamps go backwards (a device that reset its clock) is left
/// out.
fn add_run(totals: &mut Counters, period_ns: f64, stamps: &[u64]) {
    let (Some(&first), Some(&last)) = (stamps.first(), stamps.last()) else {
        return;
    };
    if !stamps.windows(2).all(|w| w[0] <= w[1]) {
        return;
    }
    let busy: u64 = stamps.chunks_exact(2).map(|p| p[1] - p[0]).sum();
    let ns = |ticks: u64| (ticks as f64 * period_ns).round() as u64;
    totals.gpu_timed_runs += 1;
    totals.gpu_busy_ns += ns(busy);
    totals.gpu_span_ns += ns(last - first);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_adds_its_passes_and_the_gaps_between_them() {
        let mut totals = Counters::default();
        // Two passes, 10 and 5 ticks, 20 ticks apart, at 2 ns a tick.
        add_run(&mut totals, 2.0, &[100, 110, 130, 135]);
        assert_eq!(
            (
                totals.gpu_timed_runs,
                totals.gpu_busy_ns,
                totals.gpu_span_ns
            ),
            (1, 30, 70)
        );
        // Stamps out of order are not a run; no stamps are none.
        add_run(&mut totals, 2.0, &[100, 90]);
        add_run(&mut totals, 2.0, &[]);
        assert_eq!(totals.gpu_timed_runs, 1);
    }
}
