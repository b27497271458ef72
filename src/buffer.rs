//! Buffers as the graph sees them: opaque, shared handles to memory that a
//! backend owns. Tensors point into them ([`crate::graph::TensorData`]);
//! only backends create, read or write them.

use std::any::Any;
use std::sync::Arc;

/// What a buffer will hold; a backend may place them differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferUsage {
    /// Model weights: written once, read by every graph.
    Weights,
    /// Activations, caches and inputs: read and written by graphs.
    Compute,
}

/// Memory owned by one backend. Obtain one from
/// [`crate::backend::Backend::alloc_buffer`].
pub trait BackendBuffer: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> usize;
    /// What the buffer was allocated for.
    fn usage(&self) -> BufferUsage;
    /// Name of the backend that owns it.
    fn backend_name(&self) -> &str;
    /// For the owning backend to recover its concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// A shared handle to a backend buffer.
pub type BufferHandle = Arc<dyn BackendBuffer>;
