//! Hyperparameters of a model, read from GGUF metadata: the family (keyed by
//! `general.architecture`) picks which graph variations apply.

mod experts;
mod rope;
mod scales;
mod swa;

use experts::experts;
pub use experts::Experts;
use rope::{rope_factors, rope_params, yarn_log_multiplier};
pub use rope::{RopeFactors, ROPE_FACTORS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT};
pub use scales::BranchScales;
use scales::{cohere_scales, granite_scales, minicpm_scales};
use swa::sliding_window;

use crate::gguf::Gguf;
use crate::graph::{RopeMode, RopeParams};
use crate::{Error, Result};

/// The model families wginfer builds graphs for, by `general.architecture`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// llama.cpp's `llama` graph (Llama, SmolLM2, Mistral-style files).
    Llama,
    /// llama.cpp's `gemma3` graph: sliding-window attention on five layers of
    /// six, per-head q/k norms, norms after attention and the feed-forward,
    /// embeddings scaled by `sqrt(n_embd)`, GELU-gated feed-forward.
    Gemma3,
    /// llama.cpp's `gemma2` graph: Gemma 3's without q/k norms, sliding-window
    /// attention on every other layer with one rope base, and the attention
    /// scores and logits soft-capped (`cap * tanh(x / cap)`).
    Gemma2,
    /// llama.cpp's `gemma` graph (Gemma 1, CodeGemma): Gemma 2's without
    /// norms after attention and the feed-forward, sliding windows or soft
    /// caps; the output is always the token embeddings, as in llama.cpp.
    Gemma,
    /// llama.cpp's `qwen2` graph (Qwen 2 and 2.5): llama's, with neox rope
    /// and biases on the q/k/v projections.
    Qwen2,
    /// llama.cpp's `qwen3` graph: llama's, with neox rope and per-head q/k
    /// norms.
    Qwen3,
    /// llama.cpp's `qwen3moe` graph (Qwen3-30B-A3B, Qwen3-235B-A22B):
    /// Qwen 3's, with a mixture-of-experts feed-forward.
    Qwen3Moe,
    /// llama.cpp's `smollm3` graph: llama's, without rope on every fourth
    /// layer (NoPE).
    SmolLM3,
    /// llama.cpp's `phi3` graph (Phi-3, Phi-3.5, Phi-4 mini): llama's with
    /// one q/k/v matrix (`attn_qkv`) and one gate/up matrix (`ffn_up`, gate
    /// rows first), neox rope, and LongRoPE's short/long frequency factors
    /// where the file has them.
    Phi3,
    /// llama.cpp's `mistral3` graph (Ministral 3, Mistral Small 3.x):
    /// llama's, with YaRN's attention factor scaled by
    /// `rope.scaling.yarn_log_multiplier`, and attention temperature
    /// scaling past the original context.
    Mistral3,
    /// llama.cpp's `granite` graph (IBM Granite 3.x dense models): llama's,
    /// with the embeddings, the attention scores, each residual branch and
    /// the logits scaled by factors from the file.
    Granite,
    /// llama.cpp's `granitemoe` graph (IBM Granite 3.x MoE): Granite's, with
    /// a mixture-of-experts feed-forward and, where the file has one, a
    /// shared expert every token also goes through.
    GraniteMoe,
    /// llama.cpp's `olmoe` graph (OLMoE): llama's, with neox rope, RMS
    /// norms over the whole q and k projections before the heads split, and
    /// a mixture-of-experts feed-forward whose chosen probabilities are not
    /// renormalized.
    Olmoe,
    /// llama.cpp's `qwen2moe` graph (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen 2's,
    /// with a mixture-of-experts feed-forward whose chosen probabilities are
    /// not renormalized, plus a shared expert scaled per token by the
    /// sigmoid of its own gate (`ffn_gate_inp_shexp`).
    Qwen2Moe,
    /// llama.cpp's `olmo2` graph (OLMo 2): llama's with neox rope, no norms
    /// before attention and the feed-forward but RMS norms after each
    /// (before the residual adds), and RMS norms over the whole q and k
    /// projections; OLMo 3 adds sliding-window layers (three of every
    /// four unless the file lists them) roped without YaRN scaling.
    Olmo2,
    /// llama.cpp's `ernie4_5` graph (Baidu ERNIE 4.5 dense, 0.3B): llama's;
    /// an attention output bias, which llama.cpp loads but never adds, is
    /// a load error here rather than a difference.
    Ernie45,
    /// llama.cpp's `exaone` graph (LG EXAONE 3.0/3.5): llama's with neox
    /// rope (rope frequency factors read as llama's).
    Exaone,
    /// llama.cpp's `glm4` graph (GLM-4-9B-0414, GLM-Z1): llama's with RMS
    /// norms both before and after attention and the feed-forward, one
    /// gate/up matrix (`ffn_up`, gate rows first), q/k/v biases, and
    /// normal rope over part of each head (`rope.dimension_count`).
    Glm4,
    /// llama.cpp's `exaone4` graph (LG EXAONE 4.0): no norms before
    /// attention and the feed-forward but RMS norms after each, per-head
    /// q/k norms, neox rope; the 64-layer (32B) shape alone attends
    /// through a sliding window on three layers of four, roping only
    /// those.
    Exaone4,
    /// llama.cpp's `hunyuan-dense` graph (Tencent Hunyuan 0.5B-7B dense):
    /// llama's with neox rope and per-head q/k norms after the rope.
    HunyuanDense,
    /// llama.cpp's `cohere2` graph (Cohere Command R7B): layer norms
    /// without bias, attention and the feed-forward side by side on one
    /// normed input, a sliding window on three layers of four with the
    /// fourth unroped, normal rope over part of each head, and the logits
    /// scaled by `logit_scale`.
    Cohere2,
    /// llama.cpp's `starcoder2` graph (StarCoder2 3B/7B/15B): layer norms
    /// with biases, biases on every projection, and a GELU feed-forward
    /// without a gate; neox rope.
    Starcoder2,
    /// llama.cpp's `stablelm` graph (StableLM 2 1.6B, StableLM 3B): layer
    /// norms with biases, neox rope over part of each head, q/k/v biases
    /// where the file has them. The 12B's per-head q/k norms and parallel
    /// blocks are a load error.
    StableLm,
    /// llama.cpp's `minicpm` graph (MiniCPM 1B/2B), Granite's: the
    /// embeddings, each residual branch and the logits scaled, by the
    /// file's factors or MiniCPM's defaults.
    MiniCpm,
    /// llama.cpp's `arcee` graph (Arcee AFM-4.5B): llama's with a
    /// feed-forward without a gate, `down(relu(up(x))^2)`.
    Arcee,
}

/// Every family, with its `general.architecture` name.
const FAMILIES: &[(&str, Family)] = &[
    ("llama", Family::Llama),
    ("gemma3", Family::Gemma3),
    ("gemma2", Family::Gemma2),
    ("gemma", Family::Gemma),
    ("qwen2", Family::Qwen2),
    // Qwen2-VL's and Qwen2.5-VL's language model, for text: its
    // multi-section rope turns every section by the same position then,
    // which is Qwen 2's neox rope.
    ("qwen2vl", Family::Qwen2),
    ("qwen3", Family::Qwen3),
    ("qwen3moe", Family::Qwen3Moe),
    ("smollm3", Family::SmolLM3),
    ("phi3", Family::Phi3),
    ("mistral3", Family::Mistral3),
    ("granite", Family::Granite),
    ("granitemoe", Family::GraniteMoe),
    ("olmoe", Family::Olmoe),
    ("qwen2moe", Family::Qwen2Moe),
    ("olmo2", Family::Olmo2),
    ("ernie4_5", Family::Ernie45),
    ("exaone", Family::Exaone),
    ("glm4", Family::Glm4),
    ("exaone4", Family::Exaone4),
    ("hunyuan-dense", Family::HunyuanDense),
    ("cohere2", Family::Cohere2),
    ("starcoder2", Family::Starcoder2),
    ("stablelm", Family::StableLm),
    ("minicpm", Family::MiniCpm),
    ("arcee", Family::Arcee),
];

/// Architectures wginfer can load: the names of the family table, in order
/// (a test holds the two together).
pub const SUPPORTED_ARCHITECTURES: &[&str] = &[
    "llama",
    "gemma3",
    "gemma2",
    "gemma",
    "qwen2",
    "qwen2vl",
    "qwen3",
    "qwen3moe",
    "smollm3",
    "phi3",
    "mistral3",
    "granite",
    "granitemoe",
    "olmoe",
    "qwen2moe",
    "olmo2",
    "ernie4_5",
    "exaone",
    "glm4",
    "exaone4",
    "hunyuan-dense",
    "cohere2",
    "starcoder2",
    "stablelm",
    "minicpm",
    "arcee",
];

/// The feed-forward's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x * sigmoid(x)` (llama).
    Silu,
    /// GELU, tanh approximation (gemma).
    GeluTanh,
    /// `relu(x)^2` (Arcee's ungated feed-forward).
    ReluSquared,
}

/// SmolLM3's layers without rope: every fourth (llama.cpp's
/// `n_no_rope_layer_step`, fixed for the architecture).
const SMOLLM3_NOPE_PERIOD: usize = 4;

/// Everything the llama graph needs to know about a model, all from the file.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// `general.architecture`.
    pub arch: String,
    /// Transformer blocks (`{arch}.block_count`).
    pub n_layer: usize,
    /// Width of the residual stream (`{arch}.embedding_length`).
    pub n_embd: usize,
    /// Hidden width of the feed-forward block (`{arch}.feed_forward_length`).
    pub n_ff: usize,
    /// Query heads (`{arch}.attention.head_count`).
    pub n_head: usize,
    /// Key/value heads (`{arch}.attention.head_count_kv`, default `n_head`).
    pub n_head_kv: usize,
    /// Values per head (`{arch}.attention.key_length`, default `n_embd / n_head`).
    pub head_dim: usize,
    /// The norms' epsilon (`{arch}.attention.layer_norm_rms_epsilon`, or
    /// `attention.layer_norm_epsilon` for the layer-norm families).
    pub norm_eps: f32,
    /// Context length the model was trained with (`{arch}.context_length`).
    pub n_ctx_train: usize,
    /// Vocabulary size: the number of tokenizer tokens.
    pub n_vocab: usize,
    /// Rotary embedding (dims, base, linear/YaRN scaling).
    pub rope: RopeParams,
    /// Whether the output projection reuses `token_embd.weight` (no `output.weight`).
    pub tied_output: bool,
    /// Which graph variations apply.
    pub family: Family,
    /// Sliding attention window (`{arch}.attention.sliding_window`): a token
    /// on a sliding layer sees the last `n_swa` positions only; 0 for none.
    pub n_swa: usize,
    /// Rope of the sliding-window layers (the other layers use `rope`).
    pub rope_swa: RopeParams,
    /// Scale of the attention scores (`1 / sqrt(head_dim)`).
    pub kq_scale: f32,
    /// Where rope's per-pair frequency factors come from, if anywhere.
    pub rope_factors: RopeFactors,
    /// Attention temperature scale (`{arch}.attention.temperature_scale`,
    /// Mistral 3); 0 for none.
    pub attn_temp_scale: f32,
    /// Granite's factors: of the embeddings (`{arch}.embedding_scale`), of
    /// each residual branch before its add (`{arch}.residual_scale`), and
    /// the divisor of the logits (`{arch}.logit_scale`).
    pub scales: BranchScales,
    /// Whether each layer attends through the sliding window (when
    /// `n_swa > 0`).
    pub swa_layers: Vec<bool>,
    /// Gemma 2's soft cap of the (scaled) attention scores:
    /// `cap * tanh(x / cap)` before the softmax.
    pub attn_softcap: Option<f32>,
    /// Gemma 2's soft cap of the logits.
    pub final_softcap: Option<f32>,
    /// The feed-forward's experts, for mixture-of-experts models.
    pub experts: Option<Experts>,
    /// Whether q, k and v come from one matrix, `attn_qkv` (Phi-3, and
    /// GLM-4 files converted with one).
    pub fused_qkv: bool,
}

/// The layers the graph runs: `{arch}.block_count` less the trailing
/// multi-token-prediction layers a file may carry for speculative decoding
/// (`{arch}.nextn_predict_layers`, GLM's NextN), which llama.cpp loads but
/// never evaluates.
fn main_layers(g: &Gguf, arch: &str) -> Result<usize> {
    let n_layer = g.get_usize(&format!("{arch}.block_count"))?;
    let nextn_key = format!("{arch}.nextn_predict_layers");
    let nextn = g.opt_usize(&nextn_key)?.unwrap_or(0);
    if nextn >= n_layer && n_layer > 0 {
        return Err(Error::invalid(format!(
            "{arch}: {nextn_key} is {nextn} of {n_layer} layers; no layer would be left"
        )));
    }
    Ok(n_layer - nextn.min(n_layer))
}

/// An error for a file whose rope is M-RoPE (`{arch}.rope.dimension_sections`
/// with a section above 0: GLM-4.1V and other vision-language files, whose
/// q/k rows are permuted for llama.cpp's multi-section rope) — except
/// Qwen2-VL's, whose text tokens take one position in all three sections
/// (the fourth must be empty), which is neox rope.
fn reject_mrope(g: &Gguf, arch: &str) -> Result<()> {
    let key = format!("{arch}.rope.dimension_sections");
    let sections = match g.opt_array(&key)? {
        Some(a) => a.to_i64_vec().unwrap_or_default(),
        None => return Ok(()),
    };
    let text_rope = arch == "qwen2vl" && sections.get(3).is_none_or(|&s| s == 0);
    if !text_rope && sections.iter().any(|&s| s != 0) {
        return Err(Error::invalid(format!(
            "{arch}: multi-section rope ({key} {sections:?}, vision-language files) is not supported"
        )));
    }
    Ok(())
}

impl ModelConfig {
    /// Reads the hyperparameters; an error names the missing or malformed key,
    /// or the architecture when it is not one of [`SUPPORTED_ARCHITECTURES`].
    pub fn from_gguf(g: &Gguf) -> Result<ModelConfig> {
        let arch = g.architecture()?.to_string();
        let family = FAMILIES
            .iter()
            .find(|(name, _)| *name == arch)
            .map(|&(_, f)| f)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "architecture '{arch}' is not supported (supported: {})",
                    SUPPORTED_ARCHITECTURES.join(", ")
                ))
            })?;
        let key = |s: &str| format!("{arch}.{s}");
        let n_layer = main_layers(g, &arch)?;
        let n_embd = g.get_usize(&key("embedding_length"))?;
        let n_ff = g.get_usize(&key("feed_forward_length"))?;
        let n_head = g.get_usize(&key("attention.head_count"))?;
        let n_head_kv = g
            .opt_usize(&key("attention.head_count_kv"))?
            .unwrap_or(n_head);
        let norm_eps = match family {
            Family::Cohere2 | Family::Starcoder2 | Family::StableLm => {
                g.get_f32(&key("attention.layer_norm_epsilon"))?
            }
            _ => g.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
        };
        let n_ctx_train = g.get_usize(&key("context_length"))?;
        let n_vocab = g.get_str_array("tokenizer.ggml.tokens")?.len();

        for (what, v) in [
            ("block_count", n_layer),
            ("embedding_length", n_embd),
            ("feed_forward_length", n_ff),
            ("attention.head_count", n_head),
            ("attention.head_count_kv", n_head_kv),
            ("context_length", n_ctx_train),
            ("tokenizer token count", n_vocab),
        ] {
            if v == 0 {
                return Err(Error::invalid(format!("{arch}: {what} is 0")));
            }
        }
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(Error::invalid(format!(
                "{arch}: {n_head} query heads are not a multiple of {n_head_kv} key/value heads"
            )));
        }
        let head_dim = match g.opt_usize(&key("attention.key_length"))? {
            Some(d) => d,
            None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
            None => {
                return Err(Error::invalid(format!(
                    "{arch}: embedding_length {n_embd} is not a multiple of head_count {n_head}"
                )))
            }
        };
        let value_dim = g
            .opt_usize(&key("attention.value_length"))?
            .unwrap_or(head_dim);
        if value_dim != head_dim || head_dim == 0 {
            return Err(Error::invalid(format!(
                "{arch}: key length {head_dim} and value length {value_dim} must be equal and non-zero"
            )));
        }
        // The widths of all heads together (`n_embd_q`, and `n_embd_kv`
        // with its divisor of `n_head` heads) must fit: a key length from
        // the file can be anything.
        if head_dim.checked_mul(n_head).is_none() {
            return Err(Error::invalid(format!(
                "{arch}: key length {head_dim} times {n_head} heads overflows"
            )));
        }
        let mode = match family {
            Family::Llama
            | Family::SmolLM3
            | Family::Ernie45
            | Family::Mistral3
            | Family::Granite
            | Family::GraniteMoe
            | Family::Glm4
            | Family::Cohere2
            | Family::MiniCpm
            | Family::Arcee => RopeMode::Normal,
            Family::Gemma3
            | Family::Gemma2
            | Family::Gemma
            | Family::Qwen2
            | Family::Qwen3
            | Family::Qwen3Moe
            | Family::Olmoe
            | Family::Qwen2Moe
            | Family::Olmo2
            | Family::Exaone
            | Family::Exaone4
            | Family::HunyuanDense
            | Family::Starcoder2
            | Family::StableLm
            | Family::Phi3 => RopeMode::Neox,
        };
        reject_mrope(g, &arch)?;
        if g.tensor("output.bias").is_some() {
            return Err(Error::invalid(format!(
                "{arch}: an output bias ('output.bias') is not supported"
            )));
        }
        if family == Family::StableLm {
            for name in ["blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"] {
                if g.tensor(name).is_some() {
                    return Err(Error::invalid(format!(
                        "{arch}: per-head q/k norms ('{name}', StableLM 2 12B) are not supported"
                    )));
                }
            }
            if g.tensor("blk.0.ffn_norm.weight").is_none() {
                return Err(Error::invalid(format!(
                    "{arch}: parallel attention and feed-forward (no 'blk.0.ffn_norm.weight', StableLM 2 12B) are not supported"
                )));
            }
        }
        let mut rope = rope_params(g, &arch, mode, head_dim, n_ctx_train)?;
        let mut attn_temp_scale = 0.0;
        if family == Family::Mistral3 {
            // llama.cpp reads the multiplier for a few families only.
            yarn_log_multiplier(g, &arch, &mut rope)?;
            attn_temp_scale = g
                .opt_f32(&key("attention.temperature_scale"))?
                .unwrap_or(0.0);
        }
        let rope_factors = rope_factors(g, family, &rope)?;
        let out_bias = "blk.0.attn_output.bias";
        if family == Family::Ernie45 && g.tensor(out_bias).is_some() {
            return Err(Error::invalid(format!(
                "{arch}: the bias '{out_bias}' is not supported (llama.cpp does not add it)"
            )));
        }
        let (scales, attention_scale) = match family {
            Family::Granite | Family::GraniteMoe => granite_scales(g, &arch)?,
            Family::Cohere2 => (cohere_scales(g, &arch)?, None),
            Family::MiniCpm => (minicpm_scales(g, &arch, n_layer, n_embd)?, None),
            _ => (BranchScales::default(), None),
        };
        let swa = sliding_window(g, &arch, family, n_layer, &rope)?;
        let cap = |name: &str| -> Result<Option<f32>> {
            let cap = g.opt_f32(&key(name))?.filter(|&c| c != 0.0);
            match cap {
                Some(c) if !c.is_finite() => Err(Error::invalid(format!("{arch}: {name} is {c}"))),
                _ => Ok(cap),
            }
        };
        let final_cap = cap("final_logit_softcapping")?;
        let (attn_softcap, final_softcap) = match (family, final_cap) {
            (Family::Gemma2, _) => (cap("attn_logit_softcapping")?, final_cap),
            (_, Some(c)) => {
                return Err(Error::invalid(format!(
                    "{arch}: final logit soft-capping ({c}) is not supported"
                )))
            }
            (_, None) => (None, None),
        };
        let experts = experts(g, &arch, family, n_ff)?;
        Ok(ModelConfig {
            arch,
            n_layer,
            n_embd,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            norm_eps,
            n_ctx_train,
            n_vocab,
            rope,
            // llama.cpp's Gemma 1 graph reads the embeddings even where a
            // file has an output matrix.
            tied_output: family == Family::Gemma || g.tensor("output.weight").is_none(),
            family,
            n_swa: swa.n_swa,
            rope_swa: swa.rope,
            kq_scale: match family {
                // llama.cpp scales Gemma 3 27B (62 layers) by the residual
                // width per head, not the head size.
                Family::Gemma3 if n_layer == 62 => 1.0 / ((n_embd / n_head) as f32).sqrt(),
                // And Gemma 2 27B (46 layers) likewise.
                Family::Gemma2 if n_layer == 46 => 1.0 / ((n_embd / n_head) as f32).sqrt(),
                _ => attention_scale.unwrap_or(1.0 / (head_dim as f32).sqrt()),
            },
            rope_factors,
            attn_temp_scale,
            scales,
            swa_layers: swa.layers,
            attn_softcap,
            final_softcap,
            experts,
            fused_qkv: family == Family::Phi3
                || (family == Family::Glm4 && g.tensor("blk.0.attn_qkv.weight").is_some()),
        })
    }

    /// The attention temperature of position `pos` (Mistral 3, as llama.cpp's
    /// `llm_graph_input_attn_temp`): queries are multiplied by
    /// `1 + scale ln(floor(pos / n_ctx_orig) + 1)`, which is 1 within the
    /// original context. `None` for models without it.
    pub fn attn_temperature(&self, pos: usize) -> Option<f32> {
        if self.attn_temp_scale == 0.0 {
            return None;
        }
        let period = self.rope.n_ctx_orig.max(1);
        let steps = (pos / period) as f64;
        Some(((steps + 1.0).ln() * f64::from(self.attn_temp_scale) + 1.0) as f32)
    }

    /// Whether layer `il` attends through the sliding window.
    pub fn is_swa_layer(&self, il: usize) -> bool {
        self.n_swa > 0 && self.swa_layers.get(il).copied().unwrap_or(false)
    }

    /// The tensor of rope frequency factors for a context of `n_ctx`
    /// positions, if the file has one (llama.cpp's `get_rope_factors`);
    /// `has` tells whether the file has a tensor.
    pub fn rope_factors_tensor(
        &self,
        has: impl Fn(&str) -> bool,
        n_ctx: usize,
    ) -> Option<&'static str> {
        let name = match self.rope_factors {
            RopeFactors::None => return None,
            RopeFactors::Freqs => ROPE_FACTORS,
            RopeFactors::LongShort if n_ctx > self.rope.n_ctx_orig => ROPE_FACTORS_LONG,
            RopeFactors::LongShort => ROPE_FACTORS_SHORT,
        };
        has(name).then_some(name)
    }

    /// Whether gate and up come from one matrix, `ffn_up` (gate rows
    /// first).
    pub fn fused_gate_up(&self) -> bool {
        matches!(self.family, Family::Phi3 | Family::Glm4)
    }

    /// Whether layer `il` ropes its queries and keys (SmolLM3 leaves every
    /// fourth layer without positions, EXAONE 4 with a window its global
    /// layers).
    pub fn ropes_layer(&self, il: usize) -> bool {
        match self.family {
            Family::SmolLM3 => !(il + 1).is_multiple_of(SMOLLM3_NOPE_PERIOD),
            Family::Exaone4 if self.n_swa > 0 => self.is_swa_layer(il),
            Family::Cohere2 => self.is_swa_layer(il),
            _ => true,
        }
    }

    /// The rope of layer `il`.
    pub fn rope_of_layer(&self, il: usize) -> RopeParams {
        match self.is_swa_layer(il) {
            true => self.rope_swa,
            false => self.rope,
        }
    }

    /// Whether the q and k projections are rms-normed whole, before the
    /// heads split (`attn_q_norm`, `attn_k_norm` of their full widths).
    pub fn has_full_qk_norm(&self) -> bool {
        matches!(self.family, Family::Olmoe | Family::Olmo2)
    }

    /// Whether attention and the feed-forward read their input rms-normed
    /// (`attn_norm`, `ffn_norm`); OLMo 2 and EXAONE 4 norm their outputs
    /// only.
    pub fn has_pre_norms(&self) -> bool {
        !matches!(self.family, Family::Olmo2 | Family::Exaone4)
    }

    /// The layer weight whose backend the layer's products run on: its
    /// first norm.
    pub fn layer_home_weight(&self) -> &'static str {
        match self.has_pre_norms() {
            true => "attn_norm",
            false => "post_attention_norm",
        }
    }

    /// Whether queries and keys are rms-normed per head before rope
    /// (`attn_q_norm`, `attn_k_norm`).
    pub fn has_qk_norm(&self) -> bool {
        matches!(
            self.family,
            Family::Gemma3
                | Family::Qwen3
                | Family::Qwen3Moe
                | Family::Exaone4
                | Family::HunyuanDense
        )
    }

    /// Whether the norms are layer norms (`(x - mean) / sd * w`, Cohere)
    /// rather than RMS norms.
    pub fn layer_norms(&self) -> bool {
        matches!(
            self.family,
            Family::Cohere2 | Family::Starcoder2 | Family::StableLm
        )
    }

    /// Whether each norm adds a bias after its weight (`{name}.bias`,
    /// StarCoder2 and StableLM).
    pub fn norm_biases(&self) -> bool {
        matches!(self.family, Family::Starcoder2 | Family::StableLm)
    }

    /// Whether the attention output and feed-forward projections have
    /// biases that llama.cpp requires (StarCoder2).
    pub fn projection_biases(&self) -> bool {
        self.family == Family::Starcoder2
    }

    /// Whether the feed-forward is gated, `down(act(gate(x)) * up(x))`,
    /// rather than `down(act(up(x)))` (StarCoder2, Arcee).
    pub fn gated_ffn(&self) -> bool {
        !matches!(self.family, Family::Starcoder2 | Family::Arcee)
    }

    /// Whether attention and the feed-forward read the same normed input
    /// and both add to the residual stream (Cohere), rather than the
    /// feed-forward reading the stream after attention's add.
    pub fn parallel_blocks(&self) -> bool {
        self.family == Family::Cohere2
    }

    /// Whether the per-head q/k norms apply to the roped queries and keys
    /// (Hunyuan) rather than before the rope.
    pub fn qk_norm_after_rope(&self) -> bool {
        self.family == Family::HunyuanDense
    }

    /// Whether the attention and feed-forward outputs are rms-normed before
    /// their residual add (`post_attention_norm`, `post_ffw_norm`).
    pub fn has_post_norms(&self) -> bool {
        matches!(
            self.family,
            Family::Gemma3 | Family::Gemma2 | Family::Olmo2 | Family::Glm4 | Family::Exaone4
        )
    }

    /// The feed-forward's gate activation.
    pub fn activation(&self) -> Activation {
        match self.family {
            Family::Gemma3 | Family::Gemma2 | Family::Gemma | Family::Starcoder2 => {
                Activation::GeluTanh
            }
            Family::Arcee => Activation::ReluSquared,
            _ => Activation::Silu,
        }
    }

    /// What the token embeddings are multiplied by, if anything.
    pub fn embd_scale(&self) -> Option<f32> {
        match self.family {
            Family::Gemma3 | Family::Gemma2 | Family::Gemma => Some((self.n_embd as f32).sqrt()),
            _ => self.scales.embedding,
        }
    }

    /// Width of all query heads together (`head_dim * n_head`).
    pub fn n_embd_q(&self) -> usize {
        self.head_dim * self.n_head
    }

    /// Width of the keys (and values) of one token (`head_dim * n_head_kv`).
    pub fn n_embd_kv(&self) -> usize {
        self.head_dim * self.n_head_kv
    }
}

#[cfg(test)]
mod tests;
