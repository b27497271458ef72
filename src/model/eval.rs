//! Running the llama graph through the scheduler: one compute arena per
//! backend, sized once by a measure pass over the largest batch and reused
//! by every step, so a GPU backend sees the same buffers (and bind groups)
//! token after token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::LlamaConfig;
use super::graph::{build, Batch, StepGraph};
use super::kv_cache::KvCache;
use super::weights::Weights;
use crate::backend::{Backend, Counters};
use crate::sched::{RunStats, Scheduler};
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

/// Builds, schedules and computes batches.
pub struct Evaluator {
    sched: Scheduler,
    n_batch: usize,
    splits: usize,
    last: RunStats,
    times: StepTimes,
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
        c: &LlamaConfig,
        w: &Weights,
        kv: &KvCache,
        n_batch: usize,
    ) -> Result<Evaluator> {
        let mut sched = Scheduler::new(backends)?;
        let n_tokens = n_batch.clamp(1, kv.n_ctx());
        let worst = Batch {
            n_tokens,
            n_past: kv.n_ctx() - n_tokens,
            all_logits: false,
        };
        let mut s = sched.schedule(&build(c, w, kv, worst)?.graph)?;
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
        })
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
        c: &LlamaConfig,
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
        c: &LlamaConfig,
        w: &Weights,
        kv: &KvCache,
        tokens: &[u32],
        batch: Batch,
    ) -> Result<Vec<f32>> {
        let start = Instant::now();
        let StepGraph {
            graph,
            tokens: tok_id,
            positions,
            logits,
        } = build(c, w, kv, batch)?;
        let mut s = self.sched.schedule(&graph)?;
        self.sched.allocate(&mut s)?;
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = (batch.n_past..batch.n_past + tokens.len())
            .map(|p| p as i32)
            .collect();
        self.sched.write_i32(&s, tok_id, &ids)?;
        self.sched.write_i32(&s, positions, &pos)?;
        let prepared = Instant::now();
        self.last = self.sched.compute(&s)?;
        let ran = Instant::now();
        let out = self.sched.read_f32(&s, logits)?;
        self.times = StepTimes {
            prepare: prepared - start,
            run: ran - prepared,
            read: ran.elapsed(),
        };
        Ok(out)
    }
}
