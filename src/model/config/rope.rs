//! Rope settings of a model file: dims, base and scaling as llama.cpp reads
//! them, and which per-pair frequency factors the file carries.

use super::Family;
use crate::gguf::Gguf;
use crate::graph::{RopeMode, RopeParams};
use crate::{DType, Error, Result};

/// The tensor of rope frequency factors, shared by every layer.
pub const ROPE_FACTORS: &str = "rope_freqs.weight";
/// LongRoPE's factors past the original context.
pub const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";
/// LongRoPE's factors within the original context.
pub const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";

/// Which rope frequency factors the file has for this family, each checked
/// to be f32 with one value per rotated pair. llama.cpp reads
/// `rope_freqs.weight` for llama only and LongRoPE's pair for phi3 only; a
/// file of another family with them is an error rather than a model that
/// quietly ignores them.
pub(super) fn rope_factors(g: &Gguf, family: Family, rope: &RopeParams) -> Result<RopeFactors> {
    let arch = g.architecture()?;
    let names: &[&str] = match family {
        Family::Llama
        | Family::Mistral3
        | Family::Granite
        | Family::GraniteMoe
        | Family::Exaone
        | Family::Exaone4
        | Family::Cohere2
        | Family::MiniCpm
        | Family::Arcee => &[ROPE_FACTORS],
        Family::Phi3 => &[ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT],
        Family::Gemma3
        | Family::Gemma2
        | Family::Gemma
        | Family::Qwen2
        | Family::Qwen3
        | Family::Qwen3Moe
        | Family::Olmoe
        | Family::Qwen2Moe
        | Family::Olmo2
        | Family::SmolLM3
        | Family::Ernie45
        | Family::Glm4
        | Family::HunyuanDense
        | Family::Starcoder2
        | Family::StableLm => &[],
    };
    let every = [ROPE_FACTORS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT];
    let unread = every
        .iter()
        .find(|n| !names.contains(n) && g.tensor(n).is_some());
    if let Some(other) = unread {
        return Err(Error::invalid(format!(
            "{arch}: rope frequency factors ({other}) are not supported for this architecture"
        )));
    }
    let mut found = false;
    for info in names.iter().filter_map(|n| g.tensor(n)) {
        let want = [rope.n_dims / 2];
        if info.shape() != want || info.dtype()? != DType::F32 {
            return Err(Error::invalid(format!(
                "{arch}: {} is {} {:?}; f32 {want:?} expected (half the rotated dims)",
                info.name,
                info.type_name(),
                info.shape()
            )));
        }
        found = true;
    }
    Ok(match (found, family) {
        (false, _) => RopeFactors::None,
        (true, Family::Phi3) => RopeFactors::LongShort,
        (true, _) => RopeFactors::Freqs,
    })
}

/// The tensors of rope frequency factors a file has (each f32, one value
/// per rotated pair, shared by every layer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeFactors {
    /// None: every pair turns at its plain frequency.
    None,
    /// `rope_freqs.weight` (Llama 3.1 and later: long-context scaling baked
    /// into the file).
    Freqs,
    /// LongRoPE's `rope_factors_short.weight` for contexts up to the
    /// original one and `rope_factors_long.weight` past it (Phi-3 128k);
    /// either may be missing.
    LongShort,
}

/// Default rope base when the file has none (llama.cpp's).
pub(super) const DEFAULT_FREQ_BASE: f32 = 10_000.0;

/// Rope dims, base and scaling as llama.cpp reads them (`rope.scaling.*`,
/// with the older `rope.scale_linear`); YaRN's ramp is on only for `yarn`.
pub(super) fn rope_params(
    g: &Gguf,
    arch: &str,
    mode: RopeMode,
    head_dim: usize,
    n_ctx_train: usize,
) -> Result<RopeParams> {
    let key = |s: &str| format!("{arch}.{s}");
    let n_dims = g
        .opt_usize(&key("rope.dimension_count"))?
        .unwrap_or(head_dim);
    if n_dims == 0 || !n_dims.is_multiple_of(2) || n_dims > head_dim {
        return Err(Error::invalid(format!(
            "{arch}: rope.dimension_count {n_dims} must be even and at most the head size {head_dim}"
        )));
    }
    let freq_base = g
        .opt_f32(&key("rope.freq_base"))?
        .unwrap_or(DEFAULT_FREQ_BASE);
    let kind = g
        .opt_str(&key("rope.scaling.type"))?
        .unwrap_or("linear")
        .to_string();
    let factor = match g.opt_f32(&key("rope.scaling.factor"))? {
        Some(f) => f,
        None => g.opt_f32(&key("rope.scale_linear"))?.unwrap_or(0.0),
    };
    let mut p = RopeParams::new(mode, n_dims, freq_base);
    p.n_ctx_orig = g
        .opt_usize(&key("rope.scaling.original_context_length"))?
        .unwrap_or(n_ctx_train);
    match kind.as_str() {
        "none" => {}
        // LongRoPE's factors are tensors (see rope_factors).
        "linear" | "yarn" | "longrope" => {
            if factor != 0.0 {
                p.freq_scale = 1.0 / factor;
            }
        }
        other => {
            return Err(Error::invalid(format!(
                "{arch}: rope scaling '{other}' is not supported (none, linear, yarn, longrope are)"
            )))
        }
    }
    if kind == "yarn" {
        p.ext_factor = g
            .opt_f32(&key("rope.scaling.yarn_ext_factor"))?
            .unwrap_or(1.0);
        if let Some(b) = g.opt_f32(&key("rope.scaling.yarn_beta_fast"))? {
            p.beta_fast = b;
        }
        if let Some(b) = g.opt_f32(&key("rope.scaling.yarn_beta_slow"))? {
            p.beta_slow = b;
        }
    }
    if let Some(a) = g.opt_f32(&key("rope.scaling.attn_factor"))? {
        p.attn_factor = a;
    }
    if !(p.freq_base > 0.0 && p.freq_scale.is_finite() && p.freq_scale > 0.0) {
        return Err(Error::invalid(format!(
            "{arch}: rope freq_base {} / freq_scale {} must be positive",
            p.freq_base, p.freq_scale
        )));
    }
    Ok(p)
}

/// Mistral 3's YaRN: llama.cpp divides the attention factor by YaRN's
/// magnitude scale at `rope.scaling.yarn_log_multiplier`, when there is one.
pub(super) fn yarn_log_multiplier(g: &Gguf, arch: &str, rope: &mut RopeParams) -> Result<()> {
    let log_mul = g
        .opt_f32(&format!("{arch}.rope.scaling.yarn_log_multiplier"))?
        .unwrap_or(0.0);
    let factor = 1.0 / rope.freq_scale;
    if log_mul != 0.0 && rope.ext_factor != 0.0 && factor > 1.0 {
        rope.attn_factor /= 1.0 + 0.1 * log_mul * factor.ln();
    }
    Ok(())
}
