//! The key/value cache: per layer, K `[n_embd_kv, n_ctx]` (one token per
//! row) and V transposed, `[n_ctx, n_embd_kv]` (one channel per row), so the
//! V operand of attention reads contiguous rows like llama.cpp's non-flash
//! path.

use crate::backend::{Backend, BufferHandle, BufferUsage};
use crate::graph::{Graph, TensorData, TensorId};
use crate::{DType, Error, Result};

/// The cache tensors of one layer, added to a graph.
#[derive(Clone, Copy, Debug)]
pub struct LayerCache {
    /// K `[n_embd_kv, n_ctx]`.
    pub k: TensorId,
    /// V `[n_ctx, n_embd_kv]`.
    pub v: TensorId,
}

/// K and V of every layer for `n_ctx` positions, each layer on its backend.
///
/// Each layer has a buffer of its own: layers stay within a GPU's binding
/// limit whatever the context length, and bind groups never change.
pub struct KvCache {
    layers: Vec<BufferHandle>,
    layer_bytes: usize,
    v_offset: usize,
    dtype: DType,
    n_ctx: usize,
    n_embd_kv: usize,
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache")
            .field("layers", &self.layers.len())
            .field("dtype", &self.dtype)
            .field("n_ctx", &self.n_ctx)
            .field("n_embd_kv", &self.n_embd_kv)
            .finish()
    }
}

impl KvCache {
    /// Allocates the cache, layer `il` on `layer_backends[il]`; `dtype` is
    /// F16 (as llama.cpp) or F32.
    pub fn new(
        layer_backends: &[&dyn Backend],
        n_ctx: usize,
        n_embd_kv: usize,
        dtype: DType,
    ) -> Result<KvCache> {
        let align = layer_backends
            .iter()
            .map(|b| b.alignment())
            .max()
            .unwrap_or(1);
        let (v_offset, layer_bytes) = Self::layer_layout(n_ctx, n_embd_kv, dtype, align)?;
        let layers = layer_backends
            .iter()
            .map(|b| b.alloc_buffer(layer_bytes, BufferUsage::Compute))
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache {
            layers,
            layer_bytes,
            v_offset,
            dtype,
            n_ctx,
            n_embd_kv,
        })
    }

    /// Bytes of one layer's K and V, V starting at an `align`ed offset:
    /// `(v_offset, layer_bytes)`.
    pub fn layer_layout(
        n_ctx: usize,
        n_embd_kv: usize,
        dtype: DType,
        align: usize,
    ) -> Result<(usize, usize)> {
        if !matches!(dtype, DType::F16 | DType::F32) {
            return Err(Error::invalid(format!(
                "a KV cache of {dtype}: f16 or f32 expected"
            )));
        }
        let half = n_ctx
            .checked_mul(n_embd_kv)
            .and_then(|n| n.checked_mul(dtype.block_bytes()))
            .ok_or_else(|| Error::invalid(format!("a KV cache of {n_ctx} x {n_embd_kv}")))?;
        let v_offset = half.div_ceil(align.max(1)) * align.max(1);
        Ok((v_offset, v_offset + half))
    }

    /// Positions the cache holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Element type of K and V.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Bytes on the backend (once allocated).
    pub fn bytes(&self) -> usize {
        self.layers.len() * self.layer_bytes
    }

    /// Adds layer `il`'s K and V to `g`, bound to the cache's bytes.
    pub fn layer(&self, g: &mut Graph, il: usize) -> Result<LayerCache> {
        let buffer = self
            .layers
            .get(il)
            .ok_or_else(|| Error::invalid(format!("the KV cache has no layer {il}")))?;
        let k = g.input(
            &format!("cache_k_l{il}"),
            self.dtype,
            &[self.n_embd_kv, self.n_ctx],
        )?;
        let v = g.input(
            &format!("cache_v_l{il}"),
            self.dtype,
            &[self.n_ctx, self.n_embd_kv],
        )?;
        let at = |offset| TensorData {
            buffer: buffer.clone(),
            offset,
        };
        g.bind(k, at(0))?;
        g.bind(v, at(self.v_offset))?;
        Ok(LayerCache { k, v })
    }
}
