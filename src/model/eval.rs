//! Running the llama graph through the scheduler: one compute arena per
//! backend, sized once by a measure pass over the largest batch and reused
//! by every step, so a GPU backend sees the same buffers (and bind groups)
//! token after token.
//!
//! Graphs depend only on their [`Shape`], so a step whose shape ran before
//! reuses that graph, its schedule and its allocation (a few are kept): a
//! decode step only writes its inputs and runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::ModelConfig;
use super::kv_cache::KvCache;
use super::llama_graph::{build, Batch, Chain, FlashAttn, Pick, Shape, StepGraph, StepInputs};
use super::sampler::Sampler;
use super::weights::Weights;
use crate::backend::{Backend, BufferHandle, BufferUsage, Counters, PendingRead};
use crate::sched::{RunStats, Schedule, Scheduler};
use crate::{Error, Result};

/// Where the time of one graph went, on the host's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepTimes {
    /// Building, scheduling and allocating the graph, writing its inputs.
    pub prepare: Duration,
    /// Running the splits: recording and submitting GPU work (computing, on the CPU).
    pub run: Duration,
    /// Waiting for the results and reading the logits back.
    pub read: Duration,
}

/// Graphs kept for reuse: a prompt's, the decode step's, and a few more
/// (another prompt length, logits of every position).
const KEEP_PLANS: usize = 4;

/// A built, scheduled and allocated graph, ready to run again.
struct Plan {
    step: StepGraph,
    schedule: Schedule,
    /// The evaluation that last ran it (for evicting the oldest).
    last_used: u64,
}

/// A token on its way back from the device (see [`Evaluator::submit_picked`]).
#[derive(Debug)]
pub struct PendingToken {
    read: PendingRead,
    n_vocab: usize,
}

impl PendingToken {
    /// Waits for the token.
    pub fn wait(self) -> Result<u32> {
        let mut bytes = [0u8; 4];
        self.read.finish(&mut bytes)?;
        let id = i32::from_le_bytes(bytes);
        u32::try_from(id)
            .ok()
            .filter(|&t| (t as usize) < self.n_vocab)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the device picked token {id}, outside the vocabulary"
                ))
            })
    }
}

/// Builds, schedules and computes batches.
pub struct Evaluator {
    sched: Scheduler,
    n_batch: usize,
    splits: usize,
    last: RunStats,
    times: StepTimes,
    plans: Vec<Plan>,
    flash_attn: FlashAttn,
    reuse: bool,
    runs: u64,
    plans_built: u64,
    /// Where chained steps keep their token: a buffer on the one
    /// backend that runs the whole graph, when that backend queues its work.
    device_token: Option<BufferHandle>,
    chaining: bool,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("sched", &self.sched)
            .field("n_batch", &self.n_batch)
            .field("splits", &self.splits)
            .finish()
    }
}

impl Evaluator {
    /// Backends the scheduler holds.
    pub fn n_backends(&self) -> usize {
        self.sched.backends().len()
    }

    /// Schedules the largest graph a context runs (`n_batch` tokens ending at
    /// the last cache position, last logits only), logs where its nodes went
    /// and allocates the arenas it needs.
    pub fn new(
        backends: Vec<Arc<dyn Backend>>,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        n_batch: usize,
        flash_attn: FlashAttn,
    ) -> Result<Evaluator> {
        let mut sched = Scheduler::new(backends)?;
        let n_tokens = n_batch.clamp(1, kv.n_ctx());
        let worst = Batch {
            n_tokens,
            n_past: kv.n_ctx() - n_tokens,
            all_logits: false,
        };
        let mut s =
            sched.schedule(&build(c, w, kv, worst.shape(kv.n_ctx(), flash_attn)?, None)?.graph)?;
        sched.allocate(&mut s)?;
        let per_backend = s.ops_per_backend(sched.backends().len());
        let on: Vec<String> = sched
            .backends()
            .iter()
            .zip(&per_backend)
            .filter(|(_, &n)| n > 0)
            .map(|(b, n)| format!("{n} ops on {}", b.name()))
            .collect();
        log::info!("graph: {} splits, {}", s.splits().len(), on.join(", "));
        sched.log_placement(&s, log::Level::Debug);
        let device_token = match s.splits() {
            [only] if sched.backends()[only.backend].queues_work() => {
                Some(sched.backends()[only.backend].alloc_buffer(16, BufferUsage::Compute)?)
            }
            _ => None,
        };
        Ok(Evaluator {
            splits: s.splits().len(),
            sched,
            n_batch: n_tokens,
            last: RunStats::default(),
            times: StepTimes::default(),
            plans: Vec::new(),
            flash_attn,
            reuse: true,
            runs: 0,
            plans_built: 0,
            device_token,
            chaining: true,
        })
    }

    /// Whether steps may chain on the device ([`Evaluator::submit_picked`]):
    /// the whole graph runs on one backend that queues its work (a GPU),
    /// and chaining was not turned off.
    pub fn can_chain(&self) -> bool {
        self.chaining && self.device_token.is_some()
    }

    /// How chained steps would pick `sampler`'s tokens, where they can.
    pub fn chain_pick(&self, sampler: &Sampler) -> Option<Pick> {
        sampler.device_pick().filter(|_| self.can_chain())
    }

    /// Turns chained steps off (every step then reads its logits back and
    /// the host picks the token) or back on where possible.
    pub fn set_chaining(&mut self, on: bool) {
        self.chaining = on;
    }

    /// Whether steps reuse the plan of an earlier step of the same shape.
    pub fn set_plan_reuse(&mut self, reuse: bool) {
        self.reuse = reuse;
        self.plans.clear();
    }

    /// Graphs built (and scheduled and allocated) so far; a step that
    /// reuses a graph builds none.
    pub fn plans_built(&self) -> u64 {
        self.plans_built
    }

    /// The backends, in the scheduler's priority order.
    pub fn backends(&self) -> &[Arc<dyn Backend>] {
        self.sched.backends()
    }

    /// Most tokens evaluated in one graph.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Splits of the largest graph.
    pub fn splits(&self) -> usize {
        self.splits
    }

    /// Bytes of the compute arenas.
    pub fn arena_bytes(&self) -> usize {
        self.sched.arena_bytes()
    }

    /// What the last graph's run did (splits, copies between backends).
    pub fn last_run(&self) -> RunStats {
        self.last
    }

    /// Where the last graph's time went.
    pub fn last_times(&self) -> StepTimes {
        self.times
    }

    /// Work counters of all backends together.
    pub fn counters(&self) -> Counters {
        self.backends()
            .iter()
            .map(|b| b.counters())
            .fold(Counters::default(), |a, b| a + b)
    }

    /// Evaluates `tokens` at positions `n_past..` in batches of at most
    /// `n_batch`, filling the cache; returns the logits of every position
    /// (`all_logits`) or of the last one, `n_vocab` values per position.
    pub fn eval(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        tokens: &[u32],
        n_past: usize,
        all_logits: bool,
    ) -> Result<Vec<f32>> {
        self.check_tokens(c, kv, tokens, n_past)?;
        let mut out = Vec::new();
        let mut pos = n_past;
        for chunk in tokens.chunks(self.n_batch) {
            let batch = Batch {
                n_tokens: chunk.len(),
                n_past: pos,
                all_logits,
            };
            let logits = self.eval_batch(c, w, kv, chunk, batch)?;
            if all_logits {
                out.extend_from_slice(&logits);
            } else {
                out = logits;
            }
            pos += chunk.len();
        }
        Ok(out)
    }

    /// Checks that `tokens` are in the vocabulary and fit the context after `n_past`.
    fn check_tokens(
        &self,
        c: &ModelConfig,
        kv: &KvCache,
        tokens: &[u32],
        n_past: usize,
    ) -> Result<()> {
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.n_vocab) {
            return Err(Error::invalid(format!(
                "token id {bad} is outside the {}-token vocabulary",
                c.n_vocab
            )));
        }
        let fits = n_past
            .checked_add(tokens.len())
            .is_some_and(|end| end <= kv.n_ctx());
        if tokens.is_empty() || !fits {
            return Err(Error::invalid(format!(
                "{} tokens after {n_past} do not fit the {}-position context",
                tokens.len(),
                kv.n_ctx()
            )));
        }
        Ok(())
    }

    fn eval_batch(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        tokens: &[u32],
        batch: Batch,
    ) -> Result<Vec<f32>> {
        let at = self.run_batch(c, w, kv, tokens, batch, Chain::Off, [0.0; 4])?;
        let start = Instant::now();
        let plan = &self.plans[at];
        let out = self.sched.read_f32(&plan.schedule, plan.step.logits)?;
        self.times.read = start.elapsed();
        Ok(out)
    }

    /// Evaluates `tokens` at `n_past..` (in batches of at most `n_batch`),
    /// leaving the last position's pick (by `sampler`, on the device) on
    /// the device, and returns that token's read without waiting for it:
    /// the next [`Evaluator::submit_chained`] may be submitted first. Only
    /// where [`Evaluator::chain_pick`] gives a pick.
    pub fn submit_picked(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        tokens: &[u32],
        n_past: usize,
        sampler: &mut Sampler,
    ) -> Result<PendingToken> {
        let pick = self.pick_for(sampler)?;
        if tokens.is_empty() {
            return Err(Error::invalid("no tokens to evaluate"));
        }
        // The batches before the last one run as `eval` runs them.
        let head = (tokens.len() - 1) / self.n_batch * self.n_batch;
        if head > 0 {
            self.eval(c, w, kv, &tokens[..head], n_past, false)?;
        }
        self.check_tokens(c, kv, &tokens[head..], n_past + head)?;
        let batch = Batch {
            n_tokens: tokens.len() - head,
            n_past: n_past + head,
            all_logits: false,
        };
        let settings = sampler.next_device_settings();
        self.run_batch(
            c,
            w,
            kv,
            &tokens[head..],
            batch,
            Chain::Start(pick),
            settings,
        )?;
        self.read_device_token(c)
    }

    /// Evaluates, at position `n_past`, the token the previous chained step
    /// left on the device, leaving this step's pick (by `sampler`) in its
    /// place; returns the pick's read without waiting for it.
    pub fn submit_chained(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        n_past: usize,
        sampler: &mut Sampler,
    ) -> Result<PendingToken> {
        let pick = self.pick_for(sampler)?;
        let batch = Batch {
            n_tokens: 1,
            n_past,
            all_logits: false,
        };
        // The token is on the device; the host's inputs only need its count.
        let settings = sampler.next_device_settings();
        self.run_batch(c, w, kv, &[0], batch, Chain::Continue(pick), settings)?;
        self.read_device_token(c)
    }

    fn pick_for(&self, sampler: &Sampler) -> Result<Pick> {
        self.chain_pick(sampler)
            .ok_or_else(|| Error::invalid("these steps cannot pick their tokens on this device"))
    }

    fn read_device_token(&mut self, c: &ModelConfig) -> Result<PendingToken> {
        let buffer = self
            .device_token
            .as_ref()
            .ok_or_else(|| Error::invalid("no device token"))?;
        let backend = self
            .sched
            .backends()
            .iter()
            .find(|b| b.owns(buffer))
            .ok_or_else(|| Error::invalid("the device token's backend is gone"))?;
        Ok(PendingToken {
            read: backend.start_read(buffer, 0, 4)?,
            n_vocab: c.n_vocab,
        })
    }

    /// Builds (or reuses) the plan of `batch` with `chain`, writes its
    /// inputs (the device sampler's `settings` where it has them) and runs
    /// it; returns the plan's index.
    #[allow(clippy::too_many_arguments)]
    fn run_batch(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        tokens: &[u32],
        batch: Batch,
        chain: Chain,
        settings: [f32; 4],
    ) -> Result<usize> {
        let start = Instant::now();
        let shape = Shape {
            chain,
            ..batch.shape(kv.n_ctx(), self.flash_attn)?
        };
        let at = self.plan(c, w, kv, shape)?;
        let plan = &self.plans[at];
        let (step, s) = (&plan.step, &plan.schedule);
        let inputs = StepInputs::new(batch, tokens, shape, kv.n_ctx(), c)?;
        if !matches!(chain, Chain::Continue(_)) {
            self.sched.write_i32(s, step.tokens, &inputs.tokens)?;
        }
        if let Some(id) = step.sampler_settings {
            self.sched.write_f32(s, id, &settings)?;
        }
        self.sched.write_i32(s, step.positions, &inputs.positions)?;
        self.sched.write_f32(s, step.kq_mask, &inputs.kq_mask)?;
        if let (Some(id), Some(mask)) = (step.kq_mask_swa, &inputs.kq_mask_swa) {
            self.sched.write_f32(s, id, mask)?;
        }
        self.sched.write_i32(s, step.v_rows, &inputs.v_rows)?;
        if let (Some(id), Some(t)) = (step.attn_temperature, &inputs.attn_temperature) {
            self.sched.write_f32(s, id, t)?;
        }
        let prepared = Instant::now();
        self.last = self.sched.compute(s)?;
        self.times = StepTimes {
            prepare: prepared - start,
            run: prepared.elapsed(),
            read: Duration::ZERO,
        };
        Ok(at)
    }

    /// The index of the plan for `shape`, built (evicting the least
    /// recently used one past [`KEEP_PLANS`]) when there is none.
    fn plan(&mut self, c: &ModelConfig, w: &Weights, kv: &KvCache, shape: Shape) -> Result<usize> {
        self.runs += 1;
        if !self.reuse {
            self.plans.clear();
        }
        if let Some(i) = self.plans.iter().position(|p| p.step.shape == shape) {
            self.plans[i].last_used = self.runs;
            return Ok(i);
        }
        let step = build(c, w, kv, shape, self.device_token.as_ref())?;
        let mut schedule = self.sched.schedule(&step.graph)?;
        let arenas = self.sched.arena_bytes();
        self.sched.allocate(&mut schedule)?;
        if self.sched.arena_bytes() != arenas {
            // A grown arena is a new buffer: plans in the old one would keep
            // it alive beside the new one.
            self.plans.clear();
        }
        self.plans_built += 1;
        let plan = Plan {
            step,
            schedule,
            last_used: self.runs,
        };
        if self.plans.len() < KEEP_PLANS {
            self.plans.push(plan);
            return Ok(self.plans.len() - 1);
        }
        let oldest = (0..self.plans.len())
            .min_by_key(|&i| self.plans[i].last_used)
            .unwrap_or(0);
        self.plans[oldest] = plan;
        Ok(oldest)
    }
}
