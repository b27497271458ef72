//! Factors some families apply along the residual stream and to the
//! logits.

use crate::gguf::Gguf;
use crate::{Error, Result};

/// Factors some families apply along the residual stream; `None` where a
/// model has none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BranchScales {
    /// Multiplies the token embeddings.
    pub embedding: Option<f32>,
    /// Multiplies the attention and feed-forward outputs before each joins
    /// the residual stream.
    pub residual: Option<f32>,
    /// Multiplies the logits (Granite's `1 / logit_scale`, Cohere's
    /// `logit_scale`).
    pub logit: Option<f32>,
}

/// Cohere's logit scale (required, as llama.cpp reads it).
pub(super) fn cohere_scales(g: &Gguf, arch: &str) -> Result<BranchScales> {
    let logit = g.get_f32(&format!("{arch}.logit_scale"))?;
    if !logit.is_finite() {
        return Err(Error::invalid(format!("{arch}: logit_scale is {logit}")));
    }
    Ok(BranchScales {
        logit: Some(logit),
        ..BranchScales::default()
    })
}

/// MiniCPM's scales, as llama.cpp reads them: the file's where it has
/// them, else MiniCPM's own (embeddings times 12, each residual branch
/// times `1.4 / sqrt(n_layer)`, logits divided by `256 / n_embd`).
pub(super) fn minicpm_scales(
    g: &Gguf,
    arch: &str,
    n_layer: usize,
    n_embd: usize,
) -> Result<BranchScales> {
    let key = |s: &str| format!("{arch}.{s}");
    let embedding = g.opt_f32(&key("embedding_scale"))?.unwrap_or(12.0);
    let residual = g
        .opt_f32(&key("residual_scale"))?
        .unwrap_or(1.4 / (n_layer as f32).sqrt());
    let logit = g
        .opt_f32(&key("logit_scale"))?
        .unwrap_or(256.0 / n_embd as f32);
    if logit == 0.0 || ![embedding, residual, logit].iter().all(|v| v.is_finite()) {
        return Err(Error::invalid(format!(
            "{arch}: scales {embedding} (embeddings), {residual} (residual), {logit} (logit divisor)"
        )));
    }
    Ok(BranchScales {
        embedding: Some(embedding),
        residual: Some(residual),
        logit: Some(1.0 / logit),
    })
}

/// Granite's scales and its attention score scale, as llama.cpp reads them:
/// the logit scale is required, the others optional, and a factor of 0
/// means none. Granite's optional biases and its rope switch
/// (`rope.scaling.finetuned` false: no rope at all) are not implemented,
/// and a file that has them is an error.
pub(super) fn granite_scales(g: &Gguf, arch: &str) -> Result<(BranchScales, Option<f32>)> {
    let key = |s: &str| format!("{arch}.{s}");
    let nonzero = |v: Option<f32>| v.filter(|&v| v != 0.0);
    let logit = g.get_f32(&key("logit_scale"))?;
    if logit == 0.0 || !logit.is_finite() {
        return Err(Error::invalid(format!(
            "{arch}: logit_scale {logit} divides the logits"
        )));
    }
    if g.opt_bool(&key("rope.scaling.finetuned"))? == Some(false) {
        return Err(Error::invalid(format!(
            "{arch}: models without rope (rope.scaling.finetuned false) are not supported"
        )));
    }
    for name in ["attn_output", "ffn_gate", "ffn_up", "ffn_down"] {
        let bias = format!("blk.0.{name}.bias");
        if g.tensor(&bias).is_some() {
            return Err(Error::invalid(format!(
                "{arch}: the bias '{bias}' is not supported"
            )));
        }
    }
    let scales = BranchScales {
        embedding: nonzero(g.opt_f32(&key("embedding_scale"))?),
        residual: nonzero(g.opt_f32(&key("residual_scale"))?),
        logit: Some(1.0 / logit),
    };
    Ok((scales, nonzero(g.opt_f32(&key("attention.scale"))?)))
}
