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

/// K and V of every layer for `n_ctx` positions, resident on a backend.
///
/// Each layer has a buffer of its own: layers stay within a GPU's binding
/// limit whatever the context length, and bind groups never change.
pub struct KvCache {
    /// Empty for a planned cache.
    layers: Vec<BufferHandle>,
    n_layer: usize,
    layer_bytes: usize,
    v_offset: usize,
    dtype: DType,
    n_ctx: usize,
    n_embd_kv: usize,
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache")
            .field("layers", &self.n_layer)
            .field("dtype", &self.dtype)
            .field("n_ctx", &self.n_ctx)
            .field("n_embd_kv", &self.n_embd_kv)
            .finish()
    }
}

impl KvCache {
    /// Allocates the cache; `dtype` is F16 (as llama.cpp) or F32.
    pub fn new(
        backend: &dyn Backend,
        n_layer: usize,
        n_ctx: usize,
        n_embd_kv: usize,
        dtype: DType,
    ) -> Result<KvCache> {
        let mut kv = KvCache::plan(backend, n_layer, n_ctx, n_embd_kv, dtype)?;
        kv.layers = (0..n_layer)
            .map(|_| backend.alloc_buffer(kv.layer_bytes, BufferUsage::Compute))
            .collect::<Result<Vec<_>>>()?;
        Ok(kv)
    }

    /// The cache's layout without its memory: graphs built from it have
    /// unbound cache tensors (see [`super::Weights::plan`]).
    pub fn plan(
        backend: &dyn Backend,
        n_layer: usize,
        n_ctx: usize,
        n_embd_kv: usize,
        dtype: DType,
    ) -> Result<KvCache> {
        if !matches!(dtype, DType::F16 | DType::F32) {
            return Err(Error::invalid(format!(
                "a KV cache of {dtype}: f16 or f32 expected"
            )));
        }
        let half = n_ctx
            .checked_mul(n_embd_kv)
            .and_then(|n| n.checked_mul(dtype.block_bytes()))
            .ok_or_else(|| Error::invalid(format!("a KV cache of {n_ctx} x {n_embd_kv}")))?;
        let align = backend.alignment().max(1);
        let v_offset = half.div_ceil(align) * align;
        Ok(KvCache {
            layers: Vec::new(),
            n_layer,
            layer_bytes: v_offset + half,
            v_offset,
            dtype,
            n_ctx,
            n_embd_kv,
        })
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
        self.n_layer * self.layer_bytes
    }

    /// Adds layer `il`'s K and V to `g`, bound to the cache's bytes (unbound
    /// for a planned cache).
    pub fn layer(&self, g: &mut Graph, il: usize) -> Result<LayerCache> {
        if il >= self.n_layer {
            return Err(Error::invalid(format!("the KV cache has no layer {il}")));
        }
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
        if let Some(buffer) = self.layers.get(il) {
            let at = |offset| TensorData {
                buffer: buffer.clone(),
                offset,
            };
            g.bind(k, at(0))?;
            g.bind(v, at(self.v_offset))?;
        }
        Ok(LayerCache { k, v })
    }
}
