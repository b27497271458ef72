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
use super::llama_graph::{build, Batch, FlashAttn, Shape, StepGraph, StepInputs};
use super::weights::Weights;
use crate::backend::{Backend, Counters};
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
            sched.schedule(&build(c, w, kv, worst.shape(kv.n_ctx(), flash_attn)?)?.graph)?;
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
        })
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
            .fold(Counters::default(), |a, b| Counters {
                dispatches: a.dispatches + b.dispatches,
                submits: a.submits + b.submits,
            })
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
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.n_vocab) {
            return Err(Error::invalid(format!(
                "token id {bad} is outside the {}-token vocabulary",
                c.n_vocab
            )));
        }
        if tokens.is_empty() || n_past + tokens.len() > kv.n_ctx() {
            return Err(Error::invalid(format!(
                "{} tokens after {n_past} do not fit the {}-position context",
                tokens.len(),
                kv.n_ctx()
            )));
        }
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

    fn eval_batch(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        kv: &KvCache,
        tokens: &[u32],
        batch: Batch,
    ) -> Result<Vec<f32>> {
        let start = Instant::now();
        let shape = batch.shape(kv.n_ctx(), self.flash_attn)?;
        let at = self.plan(c, w, kv, shape)?;
        let plan = &self.plans[at];
        let (step, s) = (&plan.step, &plan.schedule);
        let inputs = StepInputs::new(batch, tokens, shape, kv.n_ctx(), c.n_embd_kv(), c.n_swa);
        self.sched.write_i32(s, step.tokens, &inputs.tokens)?;
        self.sched.write_i32(s, step.positions, &inputs.positions)?;
        self.sched.write_f32(s, step.kq_mask, &inputs.kq_mask)?;
        if let (Some(id), Some(mask)) = (step.kq_mask_swa, &inputs.kq_mask_swa) {
            self.sched.write_f32(s, id, mask)?;
        }
        self.sched.write_i32(s, step.v_rows, &inputs.v_rows)?;
        let prepared = Instant::now();
        self.last = self.sched.compute(s)?;
        let ran = Instant::now();
        let out = self.sched.read_f32(s, step.logits)?;
        self.times = StepTimes {
            prepare: prepared - start,
            run: ran - prepared,
            read: ran.elapsed(),
        };
        Ok(out)
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
        let step = build(c, w, kv, shape)?;
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
