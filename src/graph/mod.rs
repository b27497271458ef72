//! A ggml-style tensor graph: nodes in topological order, each an [`Op`] over
//! earlier nodes, with a [`Layout`] and, once bound or allocated, the bytes it
//! lives in.
//!
//! ```
//! use wginfer::{backend::{Backend, TensorIo, cpu::CpuBackend}, graph::Graph, DType};
//! # fn main() -> wginfer::Result<()> {
//! let mut g = Graph::new();
//! let x = g.input("x", DType::F32, &[4])?;
//! let y = g.silu(x)?;
//! let y = g.scale(y, 2.0)?;
//! g.set_output(y)?;
//! let cpu = CpuBackend::new();
//! cpu.allocate_graph(&mut g)?;
//! cpu.write_f32(&g, x, &[0.0, 1.0, -1.0, 2.0])?;
//! cpu.compute(&g, &g.compute_order())?;
//! let out = cpu.read_f32(&g, y)?;
//! assert!((out[1] - 2.0 * 0.7310586).abs() < 1e-6);
//! # Ok(()) }
//! ```

mod alloc;
mod build;
pub mod op;

pub use alloc::{plan_allocation, plan_allocation_where, AllocationPlan};
pub use build::{MAX_SAMPLE_TOP_K, TOP_K_CHUNK};
pub use op::{Op, RopeMode, RopeParams};

use crate::buffer::BufferHandle;
use crate::tensor::{Layout, MAX_DIMS};
use crate::{DType, Error, Result};

/// Index of a node in its [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub usize);

/// Where a tensor's bytes are: a backend buffer and a byte offset into it.
#[derive(Clone)]
pub struct TensorData {
    /// The buffer holding the bytes.
    pub buffer: BufferHandle,
    /// Offset of the tensor's first byte.
    pub offset: usize,
}

impl std::fmt::Debug for TensorData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TensorData({} bytes @ {})",
            self.buffer.size(),
            self.offset
        )
    }
}

/// One tensor of a graph: an input, a view, or the result of an op.
#[derive(Clone, Debug)]
pub struct Node {
    /// Name for logs and lookups.
    pub name: String,
    /// What computes it.
    pub op: Op,
    /// Source tensors, all earlier in the graph.
    pub src: Vec<TensorId>,
    /// Shape, strides and type.
    pub layout: Layout,
    /// When set, the node's bytes are those of another node at a byte offset
    /// (views, and copies into an existing tensor).
    pub view_of: Option<(TensorId, usize)>,
    /// Own storage, for nodes that are not views: bound by the caller or allocated.
    pub data: Option<TensorData>,
    /// Kept alive until the end of the graph (the allocator never reuses it).
    pub is_output: bool,
}

/// A graph of tensor operations, in the order they are computed.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    version: u64,
}

/// Source of [`Graph::version`]s: every change of every graph takes the next.
static NEXT_VERSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Pads a shape of 1 to 4 dimensions with ones.
pub fn shape4(ne: &[usize]) -> Result<[usize; MAX_DIMS]> {
    if ne.is_empty() || ne.len() > MAX_DIMS {
        return Err(Error::shape(format!(
            "{} dimensions; 1 to 4 are allowed",
            ne.len()
        )));
    }
    let mut out = [1; MAX_DIMS];
    out[..ne.len()].copy_from_slice(ne);
    Ok(out)
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// All nodes, in computation order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// A number that changes whenever the graph does (a node added, renamed,
    /// marked as output or bound), unique across graphs: a backend may reuse
    /// what it derived from a graph (its recorded dispatches) while the
    /// version stays the same. A clone keeps the version, as it is the same
    /// graph until one of the two changes.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Node `id` for changing it; the graph takes a new version.
    pub(crate) fn node_mut(&mut self, id: TensorId) -> &mut Node {
        self.version = NEXT_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &mut self.nodes[id.0]
    }

    /// The node of a tensor; panics on an id from another graph (see [`Graph::check_ids`]).
    pub fn node(&self, id: TensorId) -> &Node {
        &self.nodes[id.0]
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The layout of a tensor.
    pub fn layout(&self, id: TensorId) -> &Layout {
        &self.node(id).layout
    }

    /// The first node with this name.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.nodes.iter().position(|n| n.name == name).map(TensorId)
    }

    /// Every node id, in order: the whole graph as one split.
    pub fn compute_order(&self) -> Vec<TensorId> {
        (0..self.nodes.len()).map(TensorId).collect()
    }

    /// Checks that ids belong to this graph (an id from another graph is an error).
    pub fn check_ids(&self, ids: &[TensorId]) -> Result<()> {
        match ids.iter().find(|id| id.0 >= self.nodes.len()) {
            Some(id) => Err(Error::invalid(format!(
                "tensor {} is not in this {}-node graph",
                id.0,
                self.len()
            ))),
            None => Ok(()),
        }
    }

    /// Renames a tensor (names show up in logs and errors).
    pub fn set_name(&mut self, id: TensorId, name: impl Into<String>) -> Result<()> {
        self.check_ids(&[id])?;
        self.node_mut(id).name = name.into();
        Ok(())
    }

    /// Keeps a tensor's bytes until the end of the graph so it can be read back.
    pub fn set_output(&mut self, id: TensorId) -> Result<()> {
        self.check_ids(&[id])?;
        self.node_mut(id).is_output = true;
        Ok(())
    }

    fn push(&mut self, name: String, op: Op, src: Vec<TensorId>, layout: Layout) -> TensorId {
        self.version = NEXT_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.nodes.push(Node {
            name,
            op,
            src,
            layout,
            view_of: None,
            data: None,
            is_output: false,
        });
        TensorId(self.nodes.len() - 1)
    }

    /// Appends `node` as it is (a scheduler rebuilding a graph); its sources
    /// and view root must already be in this graph.
    pub(crate) fn push_node(&mut self, node: Node) -> Result<TensorId> {
        let refs: Vec<TensorId> = node
            .src
            .iter()
            .copied()
            .chain(node.view_of.map(|v| v.0))
            .collect();
        self.check_ids(&refs)?;
        self.version = NEXT_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.nodes.push(node);
        Ok(TensorId(self.nodes.len() - 1))
    }

    /// A copy of `a`'s bytes with `a`'s layout, for another backend to read
    /// (see [`Op::Transfer`]).
    pub(crate) fn transfer(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        let name = format!("{}#copy", self.node(a).name);
        let layout = *self.layout(a);
        Ok(self.push(name, Op::Transfer, vec![a], layout))
    }

    /// A leaf tensor (weights, token ids, a cache) with a contiguous layout.
    pub fn input(&mut self, name: &str, dtype: DType, ne: &[usize]) -> Result<TensorId> {
        let layout = Layout::contiguous(dtype, shape4(ne)?)?;
        Ok(self.push(name.to_string(), Op::Input, vec![], layout))
    }

    /// An uninitialised contiguous tensor for later ops to write into
    /// through views (see [`Op::Empty`]).
    pub fn empty(&mut self, name: &str, dtype: DType, ne: &[usize]) -> Result<TensorId> {
        let layout = Layout::contiguous(dtype, shape4(ne)?)?;
        Ok(self.push(name.to_string(), Op::Empty, vec![], layout))
    }

    /// How many nodes read each node, as a source or as the tensor they view
    /// or write into; an output counts one reader more (the caller).
    pub fn reader_counts(&self) -> Vec<u32> {
        let mut n: Vec<u32> = self.nodes.iter().map(|x| u32::from(x.is_output)).collect();
        for node in &self.nodes {
            for s in node.src.iter().chain(node.view_of.as_ref().map(|v| &v.0)) {
                n[s.0] += 1;
            }
        }
        n
    }

    /// The node that owns the bytes of `id`, and the byte offset of `id` in them.
    pub fn storage_root(&self, id: TensorId) -> (TensorId, usize) {
        let (mut cur, mut offset) = (id, 0);
        while let Some((src, off)) = self.node(cur).view_of {
            cur = src;
            offset += off;
        }
        (cur, offset)
    }

    /// Binds a non-view tensor to bytes in a buffer (weights, caches, inputs).
    pub fn bind(&mut self, id: TensorId, data: TensorData) -> Result<()> {
        self.check_ids(&[id])?;
        let node = self.node(id);
        if node.view_of.is_some() {
            return Err(Error::invalid(format!(
                "'{}' is a view and has no storage of its own",
                node.name
            )));
        }
        let end = data.offset.checked_add(node.layout.span_bytes());
        if end.is_none_or(|end| end > data.buffer.size()) {
            return Err(Error::invalid(format!(
                "'{}' needs {} bytes at offset {}, past the end of its {}-byte buffer",
                node.name,
                node.layout.span_bytes(),
                data.offset,
                data.buffer.size()
            )));
        }
        self.node_mut(id).data = Some(data);
        Ok(())
    }

    /// Where the bytes of a tensor are, following views to their storage.
    pub fn data(&self, id: TensorId) -> Result<TensorData> {
        self.check_ids(&[id])?;
        let (root, offset) = self.storage_root(id);
        let data = self.node(root).data.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "tensor '{}' has no storage: bind or allocate the graph first",
                self.node(id).name
            ))
        })?;
        Ok(TensorData {
            buffer: data.buffer.clone(),
            offset: data.offset + offset,
        })
    }

    /// Where a contiguous tensor's bytes are (an error for a strided one:
    /// only contiguous tensors are read or written whole).
    pub fn contiguous_data(&self, id: TensorId) -> Result<TensorData> {
        self.check_ids(&[id])?;
        if !self.layout(id).is_contiguous() {
            return Err(Error::invalid(format!(
                "'{}' is not contiguous: only contiguous tensors are read or written whole",
                self.node(id).name
            )));
        }
        self.data(id)
    }
}
