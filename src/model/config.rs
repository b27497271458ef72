//! Hyperparameters of a llama-family model, read from GGUF metadata.

use crate::gguf::Gguf;
use crate::graph::{RopeMode, RopeParams};
use crate::{Error, Result};

/// Architectures whose graph is exactly llama.cpp's `llama` graph.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["llama"];

/// Default rope base when the file has none (llama.cpp's).
const DEFAULT_FREQ_BASE: f32 = 10_000.0;

/// Everything the llama graph needs to know about a model, all from the file.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
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
    /// RMS norm epsilon (`{arch}.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Context length the model was trained with (`{arch}.context_length`).
    pub n_ctx_train: usize,
    /// Vocabulary size: the number of tokenizer tokens.
    pub n_vocab: usize,
    /// Rotary embedding (dims, base, linear/YaRN scaling).
    pub rope: RopeParams,
    /// Whether the output projection reuses `token_embd.weight` (no `output.weight`).
    pub tied_output: bool,
}

impl LlamaConfig {
    /// Reads the hyperparameters; an error names the missing or malformed key,
    /// or the architecture when it is not one of [`SUPPORTED_ARCHITECTURES`].
    pub fn from_gguf(g: &Gguf) -> Result<LlamaConfig> {
        let arch = g.architecture()?.to_string();
        if !SUPPORTED_ARCHITECTURES.contains(&arch.as_str()) {
            return Err(Error::invalid(format!(
                "architecture '{arch}' is not supported (supported: {})",
                SUPPORTED_ARCHITECTURES.join(", ")
            )));
        }
        let key = |s: &str| format!("{arch}.{s}");
        let n_layer = g.get_usize(&key("block_count"))?;
        let n_embd = g.get_usize(&key("embedding_length"))?;
        let n_ff = g.get_usize(&key("feed_forward_length"))?;
        let n_head = g.get_usize(&key("attention.head_count"))?;
        let n_head_kv = g
            .opt_usize(&key("attention.head_count_kv"))?
            .unwrap_or(n_head);
        let rms_eps = g.get_f32(&key("attention.layer_norm_rms_epsilon"))?;
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
        let rope = rope_params(g, &arch, head_dim, n_ctx_train)?;
        if g.tensor("rope_freqs.weight").is_some() {
            return Err(Error::invalid(format!(
                "{arch}: per-dimension rope frequency factors (rope_freqs.weight) are not supported"
            )));
        }
        Ok(LlamaConfig {
            arch,
            n_layer,
            n_embd,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            rms_eps,
            n_ctx_train,
            n_vocab,
            rope,
            tied_output: g.tensor("output.weight").is_none(),
        })
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

/// Rope dims, base and scaling as llama.cpp reads them (`rope.scaling.*`,
/// with the older `rope.scale_linear`); YaRN's ramp is on only for `yarn`.
fn rope_params(g: &Gguf, arch: &str, head_dim: usize, n_ctx_train: usize) -> Result<RopeParams> {
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
    let mut p = RopeParams::new(RopeMode::Normal, n_dims, freq_base);
    p.n_ctx_orig = g
        .opt_usize(&key("rope.scaling.original_context_length"))?
        .unwrap_or(n_ctx_train);
    match kind.as_str() {
        "none" => {}
        "linear" | "yarn" => {
            if factor != 0.0 {
                p.freq_scale = 1.0 / factor;
            }
        }
        other => {
            return Err(Error::invalid(format!(
                "{arch}: rope scaling '{other}' is not supported (none, linear, yarn are)"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{GgufWriter, Value};

    fn meta(extra: &[(&str, Value)], drop: &str) -> Gguf {
        let mut w = GgufWriter::new();
        let base: Vec<(&str, Value)> = vec![
            ("general.architecture", "llama".into()),
            ("llama.block_count", Value::U32(2)),
            ("llama.embedding_length", Value::U32(64)),
            ("llama.feed_forward_length", Value::U32(128)),
            ("llama.attention.head_count", Value::U32(4)),
            ("llama.attention.head_count_kv", Value::U32(2)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            ("llama.context_length", Value::U32(256)),
            ("tokenizer.ggml.tokens", vec!["a", "b", "c"].into()),
        ];
        for (k, v) in base.into_iter().chain(extra.iter().cloned()) {
            if k != drop {
                w.add(k, v);
            }
        }
        let mut bytes = Vec::new();
        w.write_to(&mut bytes).unwrap();
        Gguf::parse(&bytes).unwrap()
    }

    #[test]
    fn reads_hyperparameters_with_defaults() {
        let c = LlamaConfig::from_gguf(&meta(&[], "")).unwrap();
        assert_eq!((c.n_layer, c.n_embd, c.n_ff), (2, 64, 128));
        assert_eq!((c.n_head, c.n_head_kv, c.head_dim), (4, 2, 16));
        assert_eq!((c.n_embd_q(), c.n_embd_kv(), c.n_vocab), (64, 32, 3));
        assert_eq!(c.rope.n_dims, 16);
        assert_eq!(c.rope.freq_base, DEFAULT_FREQ_BASE);
        assert_eq!((c.rope.freq_scale, c.rope.ext_factor), (1.0, 0.0));
        assert_eq!(c.rope.n_ctx_orig, 256);
        assert!(c.tied_output);
    }

    #[test]
    fn reads_yarn_scaling() {
        let c = LlamaConfig::from_gguf(&meta(
            &[
                ("llama.rope.scaling.type", "yarn".into()),
                ("llama.rope.scaling.factor", Value::F32(4.0)),
                ("llama.rope.scaling.original_context_length", Value::U32(64)),
                ("llama.rope.freq_base", Value::F32(5e5)),
            ],
            "",
        ))
        .unwrap();
        assert_eq!((c.rope.freq_scale, c.rope.ext_factor), (0.25, 1.0));
        assert_eq!((c.rope.n_ctx_orig, c.rope.freq_base), (64, 5e5));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = LlamaConfig::from_gguf(&meta(&[], "llama.block_count")).unwrap_err();
        assert!(
            e.to_string().contains("'llama.block_count' is missing"),
            "{e}"
        );
        let e = LlamaConfig::from_gguf(&meta(&[("general.architecture", "gpt2".into())], ""))
            .unwrap_err();
        assert!(e.to_string().contains("architecture 'gpt2'"), "{e}");
        let e =
            LlamaConfig::from_gguf(&meta(&[("llama.rope.scaling.type", "longrope".into())], ""))
                .unwrap_err();
        assert!(e.to_string().contains("longrope"), "{e}");
        let e = LlamaConfig::from_gguf(&meta(
            &[("llama.attention.head_count_kv", Value::U32(3))],
            "",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("not a multiple"), "{e}");
    }
}
