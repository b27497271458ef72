//! Memory planning for a graph, in the spirit of ggml-alloc: one measure pass
//! gives every unbound tensor an offset in a single buffer, and an
//! intermediate's bytes are reused once its last reader has run.

use super::{Graph, Op, TensorData, TensorId};
use crate::buffer::BufferHandle;
use crate::{Error, Result};

/// Offsets for the tensors that need storage, and the buffer size they take.
#[derive(Clone, Debug, Default)]
pub struct AllocationPlan {
    /// Bytes the buffer must have.
    pub size: usize,
    /// `(tensor, offset)` for every tensor the plan places.
    pub offsets: Vec<(TensorId, usize)>,
}

impl AllocationPlan {
    /// Binds every planned tensor to its offset in `buffer`.
    pub fn assign(&self, graph: &mut Graph, buffer: &BufferHandle) -> Result<()> {
        for &(id, offset) in &self.offsets {
            graph.bind(
                id,
                TensorData {
                    buffer: buffer.clone(),
                    offset,
                },
            )?;
        }
        Ok(())
    }
}

/// The most ops a backend runs as one dispatch: the wgpu backend's silu,
/// mul by up, mat-vec and residual add (or rope of q and k with the K and V
/// cache stores). (With one op of delay, the add's result once took the
/// bytes of the gate/up product that the mat-vec was still reading, and a
/// GPU decoded garbage.)
const FUSED_CHAIN: usize = 4;

/// A first-fit free list over one linear address range.
#[derive(Default)]
struct FreeList {
    free: Vec<(usize, usize)>, // (offset, size), sorted by offset, coalesced
    high_water: usize,
}

impl FreeList {
    /// An offset for `size` bytes; `None` when the range would pass
    /// `usize::MAX` (free blocks lie below the high-water mark, so only
    /// growing it can overflow).
    fn alloc(&mut self, size: usize) -> Option<usize> {
        if let Some(i) = self.free.iter().position(|&(_, s)| s >= size) {
            let (off, s) = self.free[i];
            if s == size {
                self.free.remove(i);
            } else {
                self.free[i] = (off + size, s - size);
            }
            return Some(off);
        }
        // Grow the top block if it ends at the high-water mark.
        if let Some(&(off, s)) = self.free.last() {
            if off + s == self.high_water {
                self.high_water = off.checked_add(size)?;
                self.free.pop();
                return Some(off);
            }
        }
        let off = self.high_water;
        self.high_water = off.checked_add(size)?;
        Some(off)
    }

    fn release(&mut self, off: usize, size: usize) {
        let i = self.free.partition_point(|&(o, _)| o < off);
        self.free.insert(i, (off, size));
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }
}

fn round_up(n: usize, align: usize) -> Option<usize> {
    n.div_ceil(align).checked_mul(align)
}

/// Plans storage for the unbound tensors among `nodes` (in execution order).
///
/// Inputs and outputs keep their bytes for the whole graph; any other result
/// is released after the last node in `nodes` that reads it (through views
/// too), for the op after the next one to reuse. An error for a node that
/// is not in `graph`, or tensors that together pass `usize::MAX` bytes.
pub fn plan_allocation(
    graph: &Graph,
    nodes: &[TensorId],
    alignment: usize,
) -> Result<AllocationPlan> {
    plan_allocation_where(graph, nodes, alignment, |_| true)
}

/// [`plan_allocation`] for the tensors that `here` accepts (those one backend
/// stores); the others still count as readers, so a tensor that another
/// backend copies stays alive until the copy.
pub fn plan_allocation_where(
    graph: &Graph,
    nodes: &[TensorId],
    alignment: usize,
    here: impl Fn(TensorId) -> bool,
) -> Result<AllocationPlan> {
    graph.check_ids(nodes)?;
    let align = alignment.max(1);
    let place = |list: &mut FreeList, id: TensorId| {
        let bytes = graph.layout(id).span_bytes();
        round_up(bytes, align)
            .and_then(|size| Some((list.alloc(size)?, size)))
            .ok_or_else(|| {
                Error::OutOfMemory(format!(
                    "'{}' ({bytes} bytes) does not fit in the address space after the \
                     graph's other tensors",
                    graph.node(id).name
                ))
            })
    };
    let needs_storage = |id: TensorId| {
        let n = graph.node(id);
        n.view_of.is_none() && n.data.is_none() && here(id)
    };
    let mut last_use = vec![None; graph.len()];
    for (step, &id) in nodes.iter().enumerate() {
        for &s in &graph.node(id).src {
            last_use[graph.storage_root(s).0 .0] = Some(step);
        }
        // A copy into an existing tensor writes that tensor's storage.
        last_use[graph.storage_root(id).0 .0].get_or_insert(step);
    }

    let mut list = FreeList::default();
    let mut plan = AllocationPlan::default();
    let mut placed = vec![None; graph.len()];
    // Bytes freed at one op are reused only FUSED_CHAIN ops later: a backend
    // may run a chain of ops as one dispatch, reading the first op's sources
    // while it writes the last one's result, so those must not share bytes.
    // Frees since the last op, and those of the ops before it, oldest first.
    let mut freed: Vec<(usize, usize)> = Vec::new();
    let mut waiting: std::collections::VecDeque<Vec<(usize, usize)>> = Default::default();
    // Inputs first: the caller writes them before any op runs, so they must
    // not share bytes with an intermediate that an earlier op frees.
    for &id in nodes {
        if needs_storage(id) && graph.node(id).op == Op::Input {
            let (off, size) = place(&mut list, id)?;
            placed[id.0] = Some((off, size));
            plan.offsets.push((id, off));
        }
    }
    for (step, &id) in nodes.iter().enumerate() {
        if needs_storage(id) && graph.node(id).op != Op::Input {
            let (off, size) = place(&mut list, id)?;
            placed[id.0] = Some((off, size));
            plan.offsets.push((id, off));
        }
        if !graph.node(id).op.is_passive() {
            waiting.push_back(std::mem::take(&mut freed));
            if waiting.len() > FUSED_CHAIN - 2 {
                for (off, size) in waiting.pop_front().unwrap_or_default() {
                    list.release(off, size);
                }
            }
        }
        let mut release = |root: TensorId| {
            let node = graph.node(root);
            if last_use[root.0] == Some(step) && !node.is_output && node.op != Op::Input {
                if let Some(bytes) = placed[root.0].take() {
                    freed.push(bytes);
                }
            }
        };
        for &s in &graph.node(id).src {
            release(graph.storage_root(s).0);
        }
        release(id);
    }
    plan.size = list.high_water;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn intermediates_share_memory_outputs_do_not() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[256]).unwrap();
        let a = g.silu(x).unwrap();
        let b = g.relu(a).unwrap(); // a is dead after this
        let c = g.gelu(b).unwrap(); // a's bytes are not free yet
        let e = g.tanh(c).unwrap(); // nor here
        let f = g.silu(e).unwrap(); // nor here: b to f may run as one dispatch
        let d = g.scale(f, 2.0).unwrap(); // may reuse a's bytes
        g.set_output(d).unwrap();
        let plan = plan_allocation(&g, &g.compute_order(), 256).unwrap();
        let off = |id| plan.offsets.iter().find(|(t, _)| *t == id).unwrap().1;
        assert_eq!(plan.offsets.len(), 7);
        for t in [c, e, f] {
            assert_ne!(off(t), off(a), "{t:?} may not take a's bytes, freed at b");
        }
        assert_eq!(off(d), off(a), "d reuses a, dead after b");
    }

    /// A feed-forward's end as the wgpu backend runs it: silu of the gate,
    /// times up, the down product and the residual add in one dispatch,
    /// which reads the gate/up product while it writes the add's result.
    #[test]
    fn a_fused_chain_does_not_write_over_its_first_sources() {
        let (k, ff) = (64, 128);
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[k]).unwrap();
        let w_gate_up = g.input("w_gate_up", DType::F32, &[k, 2 * ff]).unwrap();
        let w_down = g.input("w_down", DType::F32, &[ff, k]).unwrap();
        let gate_up = g.mul_mat(w_gate_up, x).unwrap();
        let gate = g.view(gate_up, &[ff], &[], 0).unwrap();
        let up = g.view(gate_up, &[ff], &[], 4 * ff).unwrap();
        let act = g.silu(gate).unwrap();
        let prod = g.mul(act, up).unwrap();
        let down = g.mul_mat(w_down, prod).unwrap();
        let out = g.add(down, x).unwrap();
        let next = g.scale(out, 2.0).unwrap();
        g.set_output(next).unwrap();
        let plan = plan_allocation(&g, &g.compute_order(), 256).unwrap();
        let span = |id: TensorId| {
            let at = plan.offsets.iter().find(|(t, _)| *t == id).unwrap().1;
            at..at + g.layout(id).span_bytes()
        };
        let (read, written) = (span(gate_up), span(out));
        assert!(
            written.end <= read.start || read.end <= written.start,
            "the add's result {written:?} overlaps the gate/up product {read:?}"
        );
    }

    #[test]
    fn an_input_after_freed_intermediates_gets_bytes_of_its_own() {
        // The caller writes y before anything runs; a's and b's bytes are
        // written by ops, so y must not share them, wherever it is created.
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[64]).unwrap();
        let a = g.silu(x).unwrap();
        let b = g.relu(a).unwrap();
        let c = g.gelu(b).unwrap();
        let y = g.input("y", DType::F32, &[64]).unwrap();
        let d = g.add(c, y).unwrap();
        g.set_output(d).unwrap();
        let plan = plan_allocation(&g, &g.compute_order(), 256).unwrap();
        let off = |id| plan.offsets.iter().find(|(t, _)| *t == id).unwrap().1;
        for t in [x, a, b, c, d] {
            assert_ne!(off(y), off(t), "y shares bytes with {t:?}");
        }
    }

    /// Tensors whose bytes together pass `usize::MAX` are an error, not an
    /// overflow of the plan's offsets; so is a node of another graph.
    #[test]
    fn too_many_bytes_and_foreign_nodes_are_errors() {
        let mut g = Graph::new();
        let half = 1usize << (usize::BITS - 3); // f32 values: half the address space
        let x = g.input("x", DType::F32, &[half]).unwrap();
        let y = g.input("y", DType::F32, &[half]).unwrap();
        let e = plan_allocation(&g, &[x, y], 256).unwrap_err();
        assert!(e.to_string().contains("'y'"), "{e}");
        assert!(plan_allocation(&g, &[TensorId(7)], 256).is_err());
    }
}
