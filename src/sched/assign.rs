//! Placement passes, after ggml_backend_sched: every node gets a backend
//! and the reason it landed there.
//!
//! 1. Storage: a tensor whose bytes are bound (weights, caches, copies into
//!    them) runs where those bytes are.
//! 2. Weights: an op reading weights runs where the weights are, if that
//!    backend supports it.
//! 3. Expansion: unplaced ops take a neighbour's backend, first spreading
//!    the preferred (non-fallback) backends down and up the graph, then any.
//! 4. Whatever is left goes to the first backend, in priority order, that
//!    supports it: ops a GPU declines end on the CPU.
//! 5. Inputs go where they are first read, views where the tensor they view is.

use std::sync::Arc;

use crate::backend::{Backend, BufferUsage};
use crate::graph::{Graph, TensorId};
use crate::{Error, Result};

/// Why the scheduler put a node on its backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its bytes (or the bytes it views or writes into) are in that backend's buffers.
    Storage,
    /// It reads the weights of this node, stored on that backend.
    Weights(TensorId),
    /// Its neighbour in the graph (this node) runs there.
    Neighbour(TensorId),
    /// An input, placed where this node first reads it.
    FirstUse(TensorId),
    /// A view of (or a write into) this node, which lives there.
    ViewOf(TensorId),
    /// The preferred backend (this index) does not support the op; this is
    /// the first backend, in priority order, that does.
    Declined(usize),
    /// Nothing tied it anywhere: the first backend that supports it.
    Fallback,
    /// A copy of a source that lives on another backend, made for a split here.
    Transfer,
}

impl Reason {
    /// The same reason with its node id passed through `f` (for a rebuilt graph).
    pub(super) fn remap(self, f: impl Fn(TensorId) -> TensorId) -> Reason {
        match self {
            Reason::Weights(t) => Reason::Weights(f(t)),
            Reason::Neighbour(t) => Reason::Neighbour(f(t)),
            Reason::FirstUse(t) => Reason::FirstUse(f(t)),
            Reason::ViewOf(t) => Reason::ViewOf(f(t)),
            other => other,
        }
    }
}

/// A backend index per node, with the reason.
pub(super) type Placement = Vec<(usize, Reason)>;

/// An op that writes into a tensor of `backend` which `backend` cannot compute.
fn unsupported_write(backend: &dyn Backend, graph: &Graph, i: usize) -> Error {
    let node = &graph.nodes()[i];
    Error::Backend {
        backend: backend.name().to_string(),
        msg: format!(
            "{} '{}' writes into a tensor stored here but is not supported here",
            node.op.name(),
            node.name
        ),
    }
}

pub(super) fn assign(graph: &Graph, backends: &[Arc<dyn Backend>]) -> Result<Placement> {
    let n = graph.len();
    let fallback = backends.len() - 1;
    let nodes = graph.nodes();
    let supports = |b: usize, i: usize| backends[b].supports_op(graph, TensorId(i));
    let mut at: Vec<Option<(usize, Reason)>> = vec![None; n];
    let mut declined: Vec<Option<usize>> = vec![None; n];

    // 1. Bound storage.
    for (i, node) in nodes.iter().enumerate() {
        let (root, _) = graph.storage_root(TensorId(i));
        let Some(data) = &graph.node(root).data else {
            continue;
        };
        let b = backends
            .iter()
            .position(|b| b.owns(&data.buffer))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "tensor '{}' is in a buffer of '{}', which none of the scheduler's backends owns",
                    node.name,
                    data.buffer.backend_name()
                ))
            })?;
        if !node.op.is_passive() && !supports(b, i) {
            return Err(unsupported_write(backends[b].as_ref(), graph, i));
        }
        at[i] = Some((b, Reason::Storage));
    }

    // 2. Ops next to their weights.
    for (i, node) in nodes.iter().enumerate() {
        if node.op.is_passive() || at[i].is_some() {
            continue;
        }
        for &s in &node.src {
            let (root, _) = graph.storage_root(s);
            let weights = graph
                .node(root)
                .data
                .as_ref()
                .filter(|d| d.buffer.usage() == BufferUsage::Weights);
            if let Some(&(b, _)) = weights.and(at[root.0].as_ref()) {
                if supports(b, i) {
                    at[i] = Some((b, Reason::Weights(root)));
                    break;
                }
                declined[i].get_or_insert(b);
            }
        }
    }

    // 3. Expansion: preferred backends down and up, then every backend.
    let ops: Vec<usize> = (0..n).filter(|&i| !nodes[i].op.is_passive()).collect();
    for (any_backend, upward) in [(false, false), (false, true), (true, false), (true, true)] {
        let mut cur: Option<(usize, usize)> = None;
        let order: Box<dyn Iterator<Item = &usize>> = if upward {
            Box::new(ops.iter().rev())
        } else {
            Box::new(ops.iter())
        };
        for &i in order {
            match (at[i], cur) {
                (Some((b, _)), _) => cur = (any_backend || b != fallback).then_some((b, i)),
                (None, Some((b, from))) if supports(b, i) => {
                    at[i] = Some((b, Reason::Neighbour(TensorId(from))));
                    cur = Some((b, i));
                }
                (None, Some((b, _))) => {
                    declined[i].get_or_insert(b);
                    cur = None;
                }
                (None, None) => {}
            }
        }
    }

    // 4. The rest: the first backend that supports it.
    for &i in &ops {
        if at[i].is_some() {
            continue;
        }
        let b = (0..backends.len())
            .find(|&b| supports(b, i))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "no backend supports {} '{}' ({})",
                    nodes[i].op.name(),
                    nodes[i].name,
                    nodes[i].layout.dtype
                ))
            })?;
        let reason = match declined[i].or((b > 0).then_some(0)) {
            Some(by) if by != b => Reason::Declined(by),
            _ => Reason::Fallback,
        };
        at[i] = Some((b, reason));
    }

    // 5. Inputs where first read; views (and writes into a tensor) with their root.
    for i in 0..n {
        if at[i].is_some() || nodes[i].view_of.is_some() {
            continue;
        }
        let reader = ops.iter().find(|&&j| {
            nodes[j]
                .src
                .iter()
                .any(|&s| graph.storage_root(s).0 .0 == i)
        });
        at[i] = Some(match reader {
            Some(&j) => (at[j].map_or(0, |(b, _)| b), Reason::FirstUse(TensorId(j))),
            None => (0, Reason::Fallback),
        });
    }
    for (i, node) in nodes.iter().enumerate() {
        let (root, _) = graph.storage_root(TensorId(i));
        let Some((b, _)) = at[root.0] else {
            continue;
        };
        if root.0 == i || at[i].is_some_and(|(have, _)| have == b) {
            continue;
        }
        if !node.op.is_passive() && !supports(b, i) {
            return Err(unsupported_write(backends[b].as_ref(), graph, i));
        }
        at[i] = Some((b, Reason::ViewOf(root)));
    }
    at.into_iter()
        .enumerate()
        .map(|(i, a)| {
            a.ok_or_else(|| Error::invalid(format!("node '{}' was not placed", nodes[i].name)))
        })
        .collect()
}
