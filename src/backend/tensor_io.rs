//! A graph's tensors on a backend: allocating the ones not bound yet, and
//! moving their values in and out (ggml_backend_tensor_set/get). Every
//! [`Backend`] has these methods.

use super::{Backend, BufferHandle, BufferUsage};
use crate::graph::{plan_allocation, Graph, TensorId};
use crate::{DType, Error, Result};

/// Tensor allocation and transfers through a backend.
pub trait TensorIo {
    /// Allocates one buffer for every tensor of `graph` not bound yet
    /// (intermediates share memory once their last reader ran).
    fn allocate_graph(&self, graph: &mut Graph) -> Result<BufferHandle>;

    /// Writes a contiguous tensor's bytes.
    fn write_bytes(&self, graph: &Graph, id: TensorId, bytes: &[u8]) -> Result<()>;

    /// Reads a contiguous tensor's bytes.
    fn read_bytes(&self, graph: &Graph, id: TensorId) -> Result<Vec<u8>>;

    /// Writes f32 values, converted (or quantized) to the tensor's type.
    fn write_f32(&self, graph: &Graph, id: TensorId, values: &[f32]) -> Result<()>;

    /// Writes i32 values (token ids, positions, row indices).
    fn write_i32(&self, graph: &Graph, id: TensorId, values: &[i32]) -> Result<()>;

    /// Reads a contiguous tensor as f32 values (dequantizing if needed).
    fn read_f32(&self, graph: &Graph, id: TensorId) -> Result<Vec<f32>>;
}

impl<B: Backend + ?Sized> TensorIo for B {
    fn allocate_graph(&self, graph: &mut Graph) -> Result<BufferHandle> {
        let plan = plan_allocation(graph, &graph.compute_order(), self.alignment())?;
        let buffer = self.alloc_buffer(plan.size.max(1), BufferUsage::Compute)?;
        plan.assign(graph, &buffer)?;
        Ok(buffer)
    }

    fn write_bytes(&self, graph: &Graph, id: TensorId, bytes: &[u8]) -> Result<()> {
        let data = graph.contiguous_data(id)?;
        let want = graph.layout(id).span_bytes();
        if bytes.len() != want {
            return Err(Error::invalid(format!(
                "'{}' takes {want} bytes, got {}",
                graph.node(id).name,
                bytes.len()
            )));
        }
        self.write_buffer(&data.buffer, data.offset, bytes)
    }

    fn read_bytes(&self, graph: &Graph, id: TensorId) -> Result<Vec<u8>> {
        let data = graph.contiguous_data(id)?;
        let mut out = vec![0; graph.layout(id).span_bytes()];
        self.read_buffer(&data.buffer, data.offset, &mut out)?;
        Ok(out)
    }

    fn write_f32(&self, graph: &Graph, id: TensorId, values: &[f32]) -> Result<()> {
        graph.check_ids(&[id])?;
        let layout = graph.layout(id);
        if values.len() != layout.n_elements() {
            return Err(Error::invalid(format!(
                "'{}' has {} elements, got {} values",
                graph.node(id).name,
                layout.n_elements(),
                values.len()
            )));
        }
        let bytes = crate::quant::quantize_row(layout.dtype, values)?;
        self.write_bytes(graph, id, &bytes)
    }

    fn write_i32(&self, graph: &Graph, id: TensorId, values: &[i32]) -> Result<()> {
        graph.check_ids(&[id])?;
        if graph.layout(id).dtype != DType::I32 {
            return Err(Error::invalid(format!(
                "'{}' is not an i32 tensor",
                graph.node(id).name
            )));
        }
        self.write_bytes(graph, id, bytemuck::cast_slice(values))
    }

    fn read_f32(&self, graph: &Graph, id: TensorId) -> Result<Vec<f32>> {
        let bytes = self.read_bytes(graph, id)?;
        let dtype = graph.layout(id).dtype;
        if dtype == crate::DType::I32 {
            // Indices (argmax results) as values.
            return Ok(bytes
                .chunks_exact(4)
                .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f32)
                .collect());
        }
        let mut out = vec![0.0; graph.layout(id).n_elements()];
        crate::quant::dequantize_row(dtype, &bytes, &mut out)?;
        Ok(out)
    }
}
