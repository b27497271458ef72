//! The key/value cache: per layer, K `[n_embd_kv, n_ctx]` (one token per
//! row) and V transposed, `[n_ctx, n_embd_kv]` (one channel per row), so the
//! V operand of attention reads contiguous rows like llama.cpp's non-flash
//! path.

use crate::backend::{Backend, BufferHandle, BufferUsage};
use crate::graph::{Graph, TensorData, TensorId};
use crate::{DType, Error, Result};

/// Most K (or V) values of one layer: the graph addresses them with i32
/// indices (V's `channel * n_ctx + position`, from 0 to this minus one).
pub(crate) const MAX_KV_VALUES: usize = 1 << 31;

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
    /// `(v_offset, layer_bytes)`. An error for a type other than F16 and
    /// F32, or for more than 2^31 values of K (the graph's i32 cache
    /// indices reach no further).
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
        let too_big = || Error::invalid(format!("a KV cache of {n_ctx} x {n_embd_kv} overflows"));
        let values = n_ctx.checked_mul(n_embd_kv).ok_or_else(too_big)?;
        // The graph writes V through i32 indices into the layer's
        // `n_ctx * n_embd_kv` values, and K at i32 positions.
        if values > MAX_KV_VALUES {
            return Err(Error::invalid(format!(
                "a KV cache of {n_ctx} positions x {n_embd_kv} values is more than the \
                 {MAX_KV_VALUES} values per layer that i32 cache indices reach: \
                 use a shorter context"
            )));
        }
        let half = values
            .checked_mul(dtype.block_bytes())
            .ok_or_else(too_big)?;
        let align = align.max(1);
        let v_offset = half
            .div_ceil(align)
            .checked_mul(align)
            .ok_or_else(too_big)?;
        let layer = v_offset.checked_add(half).ok_or_else(too_big)?;
        Ok((v_offset, layer))
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
