//! Mixture-of-experts feed-forwards as llama.cpp reads them.

use super::Family;
use crate::gguf::Gguf;
use crate::{Error, Result};

/// A mixture-of-experts feed-forward, as llama.cpp's `build_moe_ffn` with
/// a softmax gate: each token's `n_used` most probable experts (by the
/// router `ffn_gate_inp`), their SwiGLU outputs summed weighted by their
/// probabilities, renormalized to sum to 1 where `norm_weights`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Experts {
    /// Experts per layer (`{arch}.expert_count`).
    pub n_expert: usize,
    /// Experts each token goes through (`{arch}.expert_used_count`).
    pub n_used: usize,
    /// Hidden width of each expert (`{arch}.expert_feed_forward_length`
    /// for Qwen 3 MoE, `feed_forward_length` for llama's Mixtral files).
    pub n_ff: usize,
    /// Hidden width of the shared expert that every token also goes
    /// through, added to the chosen experts' sum (Granite MoE's
    /// `expert_shared_feed_forward_length`, `ffn_*_shexp`); 0 for none.
    pub n_ff_shared: usize,
    /// Whether the chosen experts' probabilities are scaled to sum to 1
    /// (llama.cpp's `norm_w`: Mixtral, Qwen 3 MoE, Granite MoE) or kept as
    /// the softmax over every expert gave them (OLMoE, Qwen 2 MoE).
    pub norm_weights: bool,
    /// Whether the shared expert's output is scaled per token by the
    /// sigmoid of `ffn_gate_inp_shexp` times the input (Qwen 2 MoE).
    pub shared_gate: bool,
}

/// The experts of a file whose `{arch}.expert_count` is above 0 (llama,
/// Qwen 3 MoE, Granite MoE, OLMoE and Qwen 2 MoE; other families' experts
/// are an error).
pub(super) fn experts(
    g: &Gguf,
    arch: &str,
    family: Family,
    n_ff: usize,
) -> Result<Option<Experts>> {
    let key = |s: &str| format!("{arch}.{s}");
    let n_expert = match g.opt_usize(&key("expert_count"))?.unwrap_or(0) {
        // Hunyuan's dense files may say one expert: llama.cpp reads none.
        n if n <= 1 && family == Family::HunyuanDense => 0,
        n => n,
    };
    let moe_only = matches!(
        family,
        Family::Qwen3Moe | Family::GraniteMoe | Family::Olmoe | Family::Qwen2Moe
    );
    let moe_family = moe_only || family == Family::Llama;
    match (n_expert, moe_family) {
        (0, _) if moe_only => return Err(Error::invalid(format!("{arch}: expert_count is 0"))),
        (0, _) => return Ok(None),
        (_, false) => {
            return Err(Error::invalid(format!(
                "{arch}: mixtures of experts are supported for llama, qwen3moe, granitemoe, olmoe and qwen2moe only"
            )))
        }
        _ => {}
    }
    let n_used = g.get_usize(&key("expert_used_count"))?;
    // top-k keeps at most half of the entries it chooses from.
    if n_used == 0 || n_used > n_expert / 2 {
        return Err(Error::invalid(format!(
            "{arch}: {n_used} experts used of {n_expert}: expected 1 to half of them"
        )));
    }
    let n_ff_expert = match family {
        Family::Qwen3Moe | Family::Qwen2Moe => g
            .opt_usize(&key("expert_feed_forward_length"))?
            .unwrap_or(n_ff / n_used),
        _ => n_ff,
    };
    if n_ff_expert == 0 {
        return Err(Error::invalid(format!("{arch}: the experts' width is 0")));
    }
    let n_ff_shared = match family {
        Family::GraniteMoe => g
            .opt_usize(&key("expert_shared_feed_forward_length"))?
            .unwrap_or(0),
        // Qwen 2 MoE always has one, as wide as the feed-forward unless
        // the file says otherwise.
        Family::Qwen2Moe => g
            .opt_usize(&key("expert_shared_feed_forward_length"))?
            .filter(|&w| w > 0)
            .unwrap_or(n_ff),
        _ => 0,
    };
    Ok(Some(Experts {
        n_expert,
        n_used,
        n_ff: n_ff_expert,
        n_ff_shared,
        norm_weights: !matches!(family, Family::Olmoe | Family::Qwen2Moe),
        shared_gate: family == Family::Qwen2Moe,
    }))
}
