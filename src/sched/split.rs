//! Cutting a placed graph into splits: runs of consecutive ops on one
//! backend. The graph is rebuilt with a transfer node for every source a
//! split reads from another backend, and an allocation order in which each
//! split's transfers come before its first op.

use std::collections::HashMap;

use super::assign::{Placement, Reason};
use crate::graph::{Graph, Op, TensorId};
use crate::Result;

/// Consecutive ops that run on one backend, with the copies they need first.
#[derive(Clone, Debug)]
pub struct Split {
    /// Index of the backend in the scheduler.
    pub backend: usize,
    /// The ops, in order (ids of the scheduled graph).
    pub nodes: Vec<TensorId>,
    /// Transfer nodes filled before the split runs.
    pub transfers: Vec<TensorId>,
}

/// The rebuilt graph and what running it needs.
pub(super) struct Cut {
    pub graph: Graph,
    /// Scheduled id of every original node.
    pub map: Vec<TensorId>,
    /// Backend and reason of every scheduled node.
    pub placement: Placement,
    pub splits: Vec<Split>,
    /// Execution order for memory planning.
    pub order: Vec<TensorId>,
}

pub(super) fn cut(graph: &Graph, placement: &Placement) -> Result<Cut> {
    let mut out = Cut {
        graph: Graph::new(),
        map: Vec::with_capacity(graph.len()),
        placement: Vec::with_capacity(graph.len()),
        splits: Vec::new(),
        order: Vec::new(),
    };
    // (split, original source) -> its transfer node.
    let mut copies: HashMap<(usize, TensorId), TensorId> = HashMap::new();
    for (i, node) in graph.nodes().iter().enumerate() {
        let (b, reason) = placement[i];
        let mut node = node.clone();
        node.view_of = node.view_of.map(|(v, off)| (out.map[v.0], off));
        if node.op.is_passive() {
            node.src = node.src.iter().map(|s| out.map[s.0]).collect();
        } else {
            if out.splits.last().is_none_or(|s| s.backend != b) {
                out.splits.push(Split {
                    backend: b,
                    nodes: Vec::new(),
                    transfers: Vec::new(),
                });
            }
            let k = out.splits.len() - 1;
            let mut src = Vec::with_capacity(node.src.len());
            for &s in &node.src {
                if placement[s.0].0 == b {
                    src.push(out.map[s.0]);
                    continue;
                }
                let t = match copies.get(&(k, s)) {
                    Some(&t) => t,
                    None => {
                        let t = out.graph.transfer(out.map[s.0])?;
                        out.placement.push((b, Reason::Transfer));
                        out.splits[k].transfers.push(t);
                        copies.insert((k, s), t);
                        t
                    }
                };
                src.push(t);
            }
            node.src = src;
        }
        let compute = !node.op.is_passive();
        let id = out.graph.push_node(node)?;
        out.map.push(id);
        out.placement.push((b, reason));
        if compute {
            if let Some(split) = out.splits.last_mut() {
                split.nodes.push(id);
            }
        }
    }
    // Reasons name original nodes, some later ones (upward expansion).
    let map = &out.map;
    for p in &mut out.placement {
        p.1 = p.1.remap(|t| map[t.0]);
    }
    out.order = allocation_order(&out);
    Ok(out)
}

/// Unbound inputs first (the caller writes them before anything runs), then
/// the graph in order with each split's transfers hoisted to its start.
fn allocation_order(cut: &Cut) -> Vec<TensorId> {
    let g = &cut.graph;
    let is_input = |id: TensorId| g.node(id).op == Op::Input;
    let mut order: Vec<TensorId> = (0..g.len())
        .map(TensorId)
        .filter(|&id| is_input(id))
        .collect();
    let mut first_of_split: HashMap<TensorId, usize> = HashMap::new();
    for (k, split) in cut.splits.iter().enumerate() {
        if let Some(&first) = split.nodes.first() {
            first_of_split.insert(first, k);
        }
    }
    for id in (0..g.len()).map(TensorId) {
        let op = g.node(id).op;
        if op == Op::Input || op == Op::Transfer {
            continue;
        }
        if let Some(&k) = first_of_split.get(&id) {
            order.extend_from_slice(&cut.splits[k].transfers);
        }
        order.push(id);
    }
    order
}
