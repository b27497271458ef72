//! Running the llama graph: one compute arena per context, sized once by a
//! measure pass over the largest batch, and reused by every step so a GPU
//! backend sees the same buffers (and bind groups) token after token.

use std::sync::Arc;

use super::config::LlamaConfig;
use super::graph::{build, Batch, StepGraph};
use super::kv_cache::KvCache;
use super::weights::Weights;
use crate::backend::{Backend, BufferHandle, BufferUsage};
use crate::graph::plan_allocation;
use crate::{Error, Result};

/// Builds, places and computes batches on one backend.
pub struct Evaluator {
    backend: Arc<dyn Backend>,
    arena: BufferHandle,
    n_batch: usize,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("backend", &self.backend.name())
            .field("arena_bytes", &self.arena.size())
            .field("n_batch", &self.n_batch)
            .finish()
    }
}

impl Evaluator {
    /// The largest batch a context runs: `n_batch` tokens ending at the last
    /// cache position, last logits only.
    fn worst_batch(kv: &KvCache, n_batch: usize) -> Batch {
        let n_tokens = n_batch.clamp(1, kv.n_ctx());
        Batch {
            n_tokens,
            n_past: kv.n_ctx() - n_tokens,
            all_logits: false,
        }
    }

    /// Fails with the first op of the largest graph that `backend` declines.
    /// Works on planned (unallocated) weights and cache, so nothing needs
    /// uploading to find out.
    pub fn check_support(
        backend: &dyn Backend,
        c: &LlamaConfig,
        w: &Weights,
        kv: &KvCache,
        n_batch: usize,
    ) -> Result<()> {
        let step = build(c, w, kv, Evaluator::worst_batch(kv, n_batch))?;
        match unsupported_op(backend, &step) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Measures the largest graph and allocates its arena once.
    pub fn new(
        backend: Arc<dyn Backend>,
        c: &LlamaConfig,
        w: &Weights,
        kv: &KvCache,
        n_batch: usize,
    ) -> Result<Evaluator> {
        let worst = Evaluator::worst_batch(kv, n_batch);
        let g = build(c, w, kv, worst)?.graph;
        let plan = plan_allocation(&g, &g.compute_order(), backend.alignment());
        let arena = backend.alloc_buffer(plan.size.max(1), BufferUsage::Compute)?;
        Ok(Evaluator {
            backend,
            arena,
            n_batch: worst.n_tokens,
        })
    }

    /// The backend computing the graphs.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Most tokens evaluated in one graph.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Bytes of the compute arena.
    pub fn arena_bytes(&self) -> usize {
        self.arena.size()
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
        let StepGraph {
            mut graph,
            tokens: tok_id,
            positions,
            logits,
        } = build(c, w, kv, batch)?;
        let order = graph.compute_order();
        let plan = plan_allocation(&graph, &order, self.backend.alignment());
        if plan.size > self.arena.size() {
            // Only graphs larger than the measured one get here (all
            // logits of a full batch): grow once, then reuse again.
            log::info!(
                "compute arena grows from {} to {} bytes",
                self.arena.size(),
                plan.size
            );
            self.arena = self.backend.alloc_buffer(plan.size, BufferUsage::Compute)?;
        }
        plan.assign(&mut graph, &self.arena)?;
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = (batch.n_past..batch.n_past + tokens.len())
            .map(|p| p as i32)
            .collect();
        let b = self.backend.as_ref();
        graph.write_i32(b, tok_id, &ids)?;
        graph.write_i32(b, positions, &pos)?;
        b.compute(&graph, &order)?;
        graph.read_f32(b, logits)
    }
}

/// The first node of `step` that `backend` declines, as an error.
fn unsupported_op(backend: &dyn Backend, step: &StepGraph) -> Option<Error> {
    let g = &step.graph;
    g.compute_order()
        .into_iter()
        .find(|&id| !backend.supports_op(g, id))
        .map(|id| {
            let node = g.node(id);
            Error::Backend {
                backend: backend.name().to_string(),
                msg: format!(
                    "{} '{}' ({}) is not supported by this backend",
                    node.op.name(),
                    node.name,
                    node.layout.dtype
                ),
            }
        })
}
