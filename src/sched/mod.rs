//! The scheduler (ggml_backend_sched's job): places every node of a graph on
//! one of several backends, cuts the graph into splits of consecutive ops on
//! one backend, copies the sources a split reads from elsewhere, keeps one
//! compute arena per backend, and runs the splits in order.
//!
//! Backends are given in priority order; the last is the fallback that
//! supports every op (the CPU). With one backend a graph is one split and
//! nothing is copied.
//!
//! ```
//! use std::sync::Arc;
//! use wginfer::backend::{cpu::CpuBackend, Backend};
//! use wginfer::graph::Graph;
//! use wginfer::sched::Scheduler;
//! use wginfer::DType;
//! # fn main() -> wginfer::Result<()> {
//! let mut sched = Scheduler::new(vec![Arc::new(CpuBackend::new())])?;
//! let mut g = Graph::new();
//! let x = g.input("x", DType::F32, &[3])?;
//! let y = g.scale(x, 2.0)?;
//! g.set_output(y)?;
//! let mut s = sched.schedule(&g)?;
//! sched.allocate(&mut s)?;
//! sched.write_f32(&s, x, &[1.0, 2.0, 3.0])?;
//! sched.compute(&s)?;
//! assert_eq!(sched.read_f32(&s, y)?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```

mod assign;
mod split;

pub use assign::Reason;
pub use split::Split;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BufferHandle, BufferRead, BufferUsage, TensorIo};
use crate::graph::{plan_allocation_where, Graph, TensorId};
use crate::{Error, Result};

/// What one [`Scheduler::compute`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Splits run.
    pub splits: usize,
    /// Tensors copied between backends.
    pub transfers: usize,
    /// Bytes those copies moved.
    pub transfer_bytes: usize,
    /// Host time the copies took, waiting for their sources included.
    pub transfer_time: Duration,
}

/// A graph placed on the scheduler's backends and cut into splits.
pub struct Schedule {
    graph: Graph,
    map: Vec<TensorId>,
    placement: Vec<(usize, Reason)>,
    splits: Vec<Split>,
    order: Vec<TensorId>,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("nodes", &self.graph.len())
            .field("splits", &self.splits.len())
            .finish()
    }
}

impl Schedule {
    /// The rebuilt graph: the original nodes plus transfer nodes.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The splits, in the order they run.
    pub fn splits(&self) -> &[Split] {
        &self.splits
    }

    /// The scheduled id of a node of the original graph.
    pub fn tensor(&self, original: TensorId) -> Result<TensorId> {
        self.map.get(original.0).copied().ok_or_else(|| {
            Error::invalid(format!(
                "tensor {} is not in the scheduled {}-node graph",
                original.0,
                self.map.len()
            ))
        })
    }

    /// Backend index and reason of a node of the original graph.
    pub fn placement(&self, original: TensorId) -> Result<(usize, Reason)> {
        Ok(self.placement[self.tensor(original)?.0])
    }

    /// Ops placed on each backend, by index.
    pub fn ops_per_backend(&self, n_backends: usize) -> Vec<usize> {
        let mut n = vec![0; n_backends];
        for s in &self.splits {
            if let Some(c) = n.get_mut(s.backend) {
                *c += s.nodes.len();
            }
        }
        n
    }
}

/// Places graphs on backends and runs them.
pub struct Scheduler {
    backends: Vec<Arc<dyn Backend>>,
    arenas: Vec<Option<BufferHandle>>,
    staging: Vec<u8>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.backends.iter().map(|b| b.name()).collect();
        f.debug_struct("Scheduler")
            .field("backends", &names)
            .field("arena_bytes", &self.arena_bytes())
            .finish()
    }
}

/// Backend `b` of a schedule's placement: an error for a schedule that a
/// scheduler with more backends made.
fn backend_at(backends: &[Arc<dyn Backend>], b: usize) -> Result<&dyn Backend> {
    backends.get(b).map(|b| b.as_ref()).ok_or_else(|| {
        Error::invalid(format!(
            "the schedule runs on backend {b}, but this scheduler has {} backends",
            backends.len()
        ))
    })
}

impl Scheduler {
    /// A scheduler over `backends`, highest priority first; the last one is
    /// the fallback for ops the others decline.
    pub fn new(backends: Vec<Arc<dyn Backend>>) -> Result<Scheduler> {
        if backends.is_empty() {
            return Err(Error::invalid("a scheduler needs at least one backend"));
        }
        Ok(Scheduler {
            arenas: vec![None; backends.len()],
            backends,
            staging: Vec::new(),
        })
    }

    /// The backends, in priority order.
    pub fn backends(&self) -> &[Arc<dyn Backend>] {
        &self.backends
    }

    /// Bytes of the compute arenas, all backends together.
    pub fn arena_bytes(&self) -> usize {
        self.arenas.iter().flatten().map(|a| a.size()).sum()
    }

    /// Places every node of `graph` and cuts it into splits. Bound tensors
    /// (weights, caches) must be in buffers of this scheduler's backends.
    pub fn schedule(&self, graph: &Graph) -> Result<Schedule> {
        let placement = assign::assign(graph, &self.backends)?;
        let cut = split::cut(graph, &placement)?;
        let s = Schedule {
            graph: cut.graph,
            map: cut.map,
            placement: cut.placement,
            splits: cut.splits,
            order: cut.order,
        };
        if log::log_enabled!(log::Level::Trace) {
            self.log_placement(&s, log::Level::Trace);
        }
        Ok(s)
    }

    /// Logs the splits and, for every op, its backend and why it is there.
    pub fn log_placement(&self, s: &Schedule, level: log::Level) {
        let name = |b: usize| self.backends.get(b).map_or("?", |b| b.name());
        let g = &s.graph;
        log::log!(
            level,
            "schedule: {} nodes, {} splits",
            g.len(),
            s.splits.len()
        );
        for (k, split) in s.splits.iter().enumerate() {
            log::log!(
                level,
                "split {k}: {} ops on {}, {} inputs copied in",
                split.nodes.len(),
                name(split.backend),
                split.transfers.len()
            );
            for &id in split.transfers.iter().chain(&split.nodes) {
                let node = g.node(id);
                let why = match s.placement[id.0].1 {
                    Reason::Storage => "its bytes are there".to_string(),
                    Reason::Weights(w) => format!("reads weights '{}'", g.node(w).name),
                    Reason::Neighbour(n) => format!("next to '{}'", g.node(n).name),
                    Reason::FirstUse(n) => format!("first read by '{}'", g.node(n).name),
                    Reason::ViewOf(n) => format!("views '{}'", g.node(n).name),
                    Reason::Declined(b) => format!("{} does not support it", name(b)),
                    Reason::Fallback => "first backend that supports it".to_string(),
                    Reason::Transfer => format!("copy of '{}'", g.node(node.src[0]).name),
                };
                log::log!(level, "  {} '{}': {why}", node.op.name(), node.name);
            }
        }
    }

    /// Binds every unbound tensor of `s` to the arena of its backend,
    /// growing an arena that is too small (the first, largest graph sizes them).
    pub fn allocate(&mut self, s: &mut Schedule) -> Result<()> {
        for (b, backend) in self.backends.iter().enumerate() {
            let placement = &s.placement;
            let plan = plan_allocation_where(&s.graph, &s.order, backend.alignment(), |id| {
                placement[id.0].0 == b
            })?;
            if plan.offsets.is_empty() {
                continue;
            }
            let arena = match &self.arenas[b] {
                Some(a) if a.size() >= plan.size => a.clone(),
                old => {
                    if let Some(old) = old {
                        log::info!(
                            "{}: compute arena grows from {} to {} bytes",
                            backend.name(),
                            old.size(),
                            plan.size
                        );
                    }
                    let a = backend.alloc_buffer(plan.size.max(1), BufferUsage::Compute)?;
                    self.arenas[b] = Some(a.clone());
                    a
                }
            };
            plan.assign(&mut s.graph, &arena)?;
        }
        Ok(())
    }

    fn backend_of(&self, s: &Schedule, original: TensorId) -> Result<(&dyn Backend, TensorId)> {
        let id = s.tensor(original)?;
        let b = s.placement[id.0].0;
        Ok((backend_at(&self.backends, b)?, id))
    }

    /// Writes i32 values into an input of the original graph.
    pub fn write_i32(&self, s: &Schedule, input: TensorId, values: &[i32]) -> Result<()> {
        let (b, id) = self.backend_of(s, input)?;
        b.write_i32(&s.graph, id, values)
    }

    /// Writes f32 values (converted to the tensor's type) into an input.
    pub fn write_f32(&self, s: &Schedule, input: TensorId, values: &[f32]) -> Result<()> {
        let (b, id) = self.backend_of(s, input)?;
        b.write_f32(&s.graph, id, values)
    }

    /// Reads a tensor of the original graph (an output) as f32 values.
    pub fn read_f32(&self, s: &Schedule, tensor: TensorId) -> Result<Vec<f32>> {
        let (b, id) = self.backend_of(s, tensor)?;
        b.read_f32(&s.graph, id)
    }

    /// Runs the splits in order, copying each split's inputs in first.
    pub fn compute(&mut self, s: &Schedule) -> Result<RunStats> {
        let mut stats = RunStats::default();
        for split in &s.splits {
            let start = Instant::now();
            self.copy_in(s, split, &mut stats)?;
            stats.transfer_time += start.elapsed();
            backend_at(&self.backends, split.backend)?.compute(&s.graph, &split.nodes)?;
            stats.splits += 1;
        }
        Ok(stats)
    }

    /// Fills a split's transfer nodes: one batched read per source backend,
    /// so a GPU is waited for once per split, then a write of each.
    fn copy_in(&mut self, s: &Schedule, split: &Split, stats: &mut RunStats) -> Result<()> {
        let to = backend_at(&self.backends, split.backend)?;
        let source = |t: &TensorId| s.placement[s.graph.node(*t).src[0].0].0;
        let mut sources: Vec<usize> = split.transfers.iter().map(source).collect();
        sources.sort_unstable();
        sources.dedup();
        for from in sources {
            let group: Vec<TensorId> = split
                .transfers
                .iter()
                .copied()
                .filter(|t| source(t) == from)
                .collect();
            let lens: Vec<usize> = group
                .iter()
                .map(|&t| s.graph.layout(t).span_bytes())
                .collect();
            self.staging.resize(lens.iter().sum(), 0);
            let sources = group
                .iter()
                .map(|&t| s.graph.data(s.graph.node(t).src[0]))
                .collect::<Result<Vec<_>>>()?;
            let mut rest = &mut self.staging[..];
            let mut reads = Vec::with_capacity(group.len());
            for (have, &len) in sources.iter().zip(&lens) {
                let (out, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                reads.push(BufferRead {
                    buffer: &have.buffer,
                    offset: have.offset,
                    out,
                });
            }
            backend_at(&self.backends, from)?.read_buffers(&mut reads)?;
            let mut at = 0;
            for (&t, &len) in group.iter().zip(&lens) {
                let want = s.graph.data(t)?;
                to.write_buffer(&want.buffer, want.offset, &self.staging[at..at + len])?;
                at += len;
            }
            stats.transfers += group.len();
            stats.transfer_bytes += at;
        }
        Ok(())
    }
}
