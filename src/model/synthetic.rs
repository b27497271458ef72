//! Llama-shaped GGUF files with random weights, written with the crate's own
//! GGUF writer: benchmarks of a model's shape on machines the real file
//! cannot reach, and tests that need a model without downloading one (also
//! of the llama-like families: Llama 3's rope factors, Qwen 2's biases,
//! Qwen 3's q/k norms, SmolLM3's layers without rope, Phi-3's fused
//! projections and LongRoPE, Mistral 3's YaRN).
//!
//! Weights are random blocks with small scales (the values are meaningless,
//! the work per token is the real model's); the vocabulary is one token per
//! id with no merges.

use std::io::{self, Write};
use std::path::Path;

mod arch;

use crate::gguf::GgufWriter;
use crate::rng::Rng;
use crate::{DType, Error, Result};
pub use arch::SyntheticArch;
use arch::ARCHES;

/// Experts per layer and per token of the synthetic mixtures of experts
/// but the `30b-a3b` shape's.
const SYNTHETIC_EXPERTS: (usize, usize) = (8, 2);

/// The shape and types of a synthetic llama model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticLlama {
    /// Architecture (what it adds to llama's tensors).
    pub arch: SyntheticArch,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention).
    pub n_head_kv: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Training context length.
    pub n_ctx_train: usize,
    /// Type of the layer matrices.
    pub weight_type: DType,
    /// Type of the token embedding (tied to the output).
    pub embd_type: DType,
    /// Experts per layer and per token, for the mixture-of-experts
    /// architectures.
    pub experts: (usize, usize),
}

impl SyntheticLlama {
    /// SmolLM2-135M, the default model: 30 layers, 576 wide, 1536 ff, 9/3
    /// heads, Q4_1 layers, a Q8_0 embedding tied to the output.
    pub fn smollm2_135m() -> SyntheticLlama {
        SyntheticLlama {
            arch: SyntheticArch::Llama,
            n_layer: 30,
            n_embd: 576,
            n_ff: 1536,
            n_head: 9,
            n_head_kv: 3,
            n_vocab: 49152,
            n_ctx_train: 8192,
            weight_type: DType::Q4_1,
            embd_type: DType::Q8_0,
            experts: SYNTHETIC_EXPERTS,
        }
    }

    /// A 1B-class shape (TinyLlama's): 22 layers, 2048 wide, 5632 ff, 32/4 heads, Q4_0.
    pub fn llama_1b() -> SyntheticLlama {
        SyntheticLlama {
            arch: SyntheticArch::Llama,
            n_layer: 22,
            n_embd: 2048,
            n_ff: 5632,
            n_head: 32,
            n_head_kv: 4,
            n_vocab: 32000,
            n_ctx_train: 2048,
            weight_type: DType::Q4_0,
            embd_type: DType::Q8_0,
            experts: SYNTHETIC_EXPERTS,
        }
    }

    /// An 8B-class shape (Llama 3's): 32 layers, 4096 wide, 14336 ff, 32/8 heads, Q4_0.
    pub fn llama_8b() -> SyntheticLlama {
        SyntheticLlama {
            arch: SyntheticArch::Llama,
            n_layer: 32,
            n_embd: 4096,
            n_ff: 14336,
            n_head: 32,
            n_head_kv: 8,
            n_vocab: 128256,
            n_ctx_train: 8192,
            weight_type: DType::Q4_0,
            embd_type: DType::Q8_0,
            experts: SYNTHETIC_EXPERTS,
        }
    }

    /// A model small enough to evaluate anywhere in milliseconds: 4 layers
    /// (SmolLM3's fourth has no rope), 64 wide, 128 ff, 4/2 heads of 16, a
    /// 300-token vocabulary, all f32 (so that engines agree to rounding: no
    /// quantized products).
    pub fn tiny() -> SyntheticLlama {
        SyntheticLlama {
            arch: SyntheticArch::Llama,
            n_layer: 4,
            n_embd: 64,
            n_ff: 128,
            n_head: 4,
            n_head_kv: 2,
            n_vocab: 300,
            n_ctx_train: 256,
            weight_type: DType::F32,
            embd_type: DType::F32,
            experts: SYNTHETIC_EXPERTS,
        }
    }

    /// A Qwen3-30B-A3B-like mixture of experts (`qwen3moe`): 48 layers,
    /// 2048 wide, 16/4 heads of 128, 128 experts of 768 with 8 used per
    /// token, Q4_K layers: about 30B weights, 3B of them per token.
    pub fn moe_30b_a3b() -> SyntheticLlama {
        SyntheticLlama {
            arch: SyntheticArch::Qwen3Moe,
            n_layer: 48,
            n_embd: 2048,
            n_ff: 1536,
            n_head: 16,
            n_head_kv: 4,
            n_vocab: 151_936,
            n_ctx_train: 32_768,
            weight_type: DType::Q4K,
            embd_type: DType::Q8_0,
            experts: (128, 8),
        }
    }

    /// [`SyntheticLlama::tiny`] with rows of 256 values and two layers, so
    /// that its products may hold 256-value blocks (K-quants, iq4_xs).
    pub fn tiny_k() -> SyntheticLlama {
        SyntheticLlama {
            n_layer: 2,
            n_embd: 256,
            n_ff: 512,
            ..SyntheticLlama::tiny()
        }
    }

    /// The preset called `smollm2-135m`, `1b`, `8b`, `30b-a3b`, `tiny` or `tiny-k`, optionally
    /// written as another architecture after an `@` (`llama3`, `qwen2`,
    /// `qwen3`, `smollm3`, `phi3`, `mistral3`, `granite`, `gemma2`, `mixtral`,
    /// `qwen3moe`, `granitemoe`, `olmoe`, `qwen2moe`, `olmo2`, `olmo3`, `glm4`, `exaone4`, `exaone4-swa`, `hunyuan-dense`, `cohere2`, `starcoder2`, `stablelm`, `minicpm`, `arcee`, `qwen2vl`) and with its layers' weight type after a colon
    /// (`8b:q4_K`, `tiny@qwen2`, `1b@llama3:q4_K`).
    pub fn preset(name: &str) -> Result<SyntheticLlama> {
        let (shape, weights) = match name.split_once(':') {
            Some((shape, t)) => (shape, Some(t)),
            None => (name, None),
        };
        let (shape, arch) = match shape.split_once('@') {
            Some((shape, arch)) => (shape, Some(arch)),
            None => (shape, None),
        };
        let mut spec = match shape {
            "smollm2-135m" | "135m" => SyntheticLlama::smollm2_135m(),
            "1b" => SyntheticLlama::llama_1b(),
            "8b" => SyntheticLlama::llama_8b(),
            "tiny" => SyntheticLlama::tiny(),
            "tiny-k" => SyntheticLlama::tiny_k(),
            "30b-a3b" => SyntheticLlama::moe_30b_a3b(),
            other => {
                return Err(Error::invalid(format!(
                "synthetic model '{other}': expected smollm2-135m, 1b, 8b, 30b-a3b, tiny or tiny-k"
            )))
            }
        };
        if let Some(name) = arch {
            spec.arch = ARCHES
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|&(_, a, _)| a)
                .ok_or_else(|| {
                    let names: Vec<_> = ARCHES.iter().map(|(n, _, _)| *n).collect();
                    Error::invalid(format!(
                        "synthetic architecture '{name}': expected one of {}",
                        names.join(", ")
                    ))
                })?;
        }
        if spec.arch == SyntheticArch::Olmoe {
            spec.n_head_kv = spec.n_head;
        }
        if spec.arch == SyntheticArch::Exaone4Swa {
            // The one depth llama.cpp gives EXAONE 4 a window at.
            spec.n_layer = 64;
        }
        if let Some(t) = weights {
            spec.weight_type = DType::from_name(t)
                .filter(|d| *d != DType::I32)
                .ok_or_else(|| {
                    let known: Vec<_> = DType::ALL
                        .iter()
                        .filter(|d| **d != DType::I32)
                        .map(|d| d.name())
                        .collect();
                    Error::invalid(format!(
                        "synthetic weight type '{t}': expected one of {}",
                        known.join(", ")
                    ))
                })?;
        }
        Ok(spec)
    }

    /// Writes the model to `path`, tensor by tensor (nothing large is held in memory).
    pub fn write(&self, path: impl AsRef<Path>, seed: u64) -> Result<()> {
        let head_dim = self.n_embd / self.n_head.max(1);
        if self.n_head == 0 || head_dim * self.n_head != self.n_embd || !head_dim.is_multiple_of(2)
        {
            return Err(Error::invalid(format!(
                "{} heads do not split an embedding of {} into even head sizes",
                self.n_head, self.n_embd
            )));
        }
        let mut w = GgufWriter::new();
        let arch = ARCHES
            .iter()
            .find(|(_, a, _)| *a == self.arch)
            .map_or("llama", |&(_, _, name)| name);
        let key = |k: &str| format!("{arch}.{k}");
        // GLM-4 ropes half of each head, as its files say.
        let rope_dims = match self.arch {
            SyntheticArch::Glm4 | SyntheticArch::Cohere2 | SyntheticArch::StableLm => head_dim / 2,
            _ => head_dim,
        };
        w.add("general.architecture", arch)
            .add("general.name", "wginfer synthetic llama")
            .add(key("block_count"), self.n_layer as u32)
            .add(key("context_length"), self.n_ctx_train as u32)
            .add(key("embedding_length"), self.n_embd as u32)
            .add(key("feed_forward_length"), self.n_ff as u32)
            .add(key("attention.head_count"), self.n_head as u32)
            .add(key("attention.head_count_kv"), self.n_head_kv as u32)
            .add(key("rope.dimension_count"), rope_dims as u32)
            .add(key("rope.freq_base"), 10000.0f32)
            .add(key("attention.layer_norm_rms_epsilon"), 1e-5f32);
        let (n_expert, n_used) = self.experts;
        let n_ff_expert = match self.arch {
            SyntheticArch::Mixtral | SyntheticArch::GraniteMoe | SyntheticArch::Olmoe => {
                Some(self.n_ff)
            }
            SyntheticArch::Qwen3Moe | SyntheticArch::Qwen2Moe => Some(self.n_ff / 2),
            _ => None,
        };
        if let Some(width) = n_ff_expert {
            w.add(key("expert_count"), n_expert as u32)
                .add(key("expert_used_count"), n_used as u32);
            if matches!(self.arch, SyntheticArch::Qwen3Moe | SyntheticArch::Qwen2Moe) {
                w.add(key("expert_feed_forward_length"), width as u32);
            }
            if matches!(
                self.arch,
                SyntheticArch::GraniteMoe | SyntheticArch::Qwen2Moe
            ) {
                w.add(
                    key("expert_shared_feed_forward_length"),
                    (self.n_ff / 2) as u32,
                );
            }
        }
        self.arch
            .add_metadata(&mut w, key, self.n_layer, self.n_ctx_train);
        // The 256 byte-level tokens first, so any text tokenizes (a byte a
        // token: there are no merges), then placeholders.
        let tokens: Vec<String> = (0..self.n_vocab)
            .map(|i| match u8::try_from(i) {
                Ok(b) => crate::tokenizer::byte_to_char(b).to_string(),
                Err(_) => format!("<t{i}>"),
            })
            .collect();
        w.add("tokenizer.ggml.model", "gpt2")
            .add("tokenizer.ggml.pre", "default")
            .add("tokenizer.ggml.tokens", tokens)
            .add("tokenizer.ggml.merges", Vec::<String>::new())
            .add("tokenizer.ggml.bos_token_id", 0u32)
            .add("tokenizer.ggml.eos_token_id", 1u32)
            .add("tokenizer.ggml.add_bos_token", false);

        let (e, ff, kv) = (self.n_embd, self.n_ff, head_dim * self.n_head_kv);
        // Each tensor's own generator, seeded in the order they are written.
        let seed = std::cell::Cell::new(seed);
        let next_rng = || {
            seed.set(seed.get().wrapping_add(1));
            Rng::new(seed.get())
        };
        let matrix = |w: &mut GgufWriter, name: String, dtype: DType, ne: [usize; 2]| {
            let rng = next_rng();
            w.add_tensor_with(name, dtype, &ne, random_blocks(dtype, ne, rng))
                .map(|_| ())
        };
        matrix(
            &mut w,
            "token_embd.weight".into(),
            self.embd_type,
            [e, self.n_vocab],
        )?;
        let ones = |n: usize| -> Vec<u8> { (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect() };
        let f32_bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let values = |n: usize, lo: f32, hi: f32| f32_bytes(&next_rng().vec(n, lo, hi));
        w.add_tensor("output_norm.weight", DType::F32, &[e], ones(e))?;
        if matches!(
            self.arch,
            SyntheticArch::Starcoder2 | SyntheticArch::StableLm
        ) {
            w.add_tensor("output_norm.bias", DType::F32, &[e], values(e, -0.5, 0.5))?;
        }
        if matches!(
            self.arch,
            SyntheticArch::Olmoe
                | SyntheticArch::Qwen2Moe
                | SyntheticArch::Olmo2
                | SyntheticArch::Olmo3
                | SyntheticArch::StableLm
        ) {
            matrix(
                &mut w,
                "output.weight".into(),
                self.embd_type,
                [e, self.n_vocab],
            )?;
        }
        // Slower rotations for the low frequencies, as Llama 3.1's and
        // LongRoPE's factors (1 for the fastest pairs up to `top` for the
        // slowest).
        let n_pairs = head_dim / 2;
        let factors = |top: f32| -> Vec<u8> {
            let f: Vec<f32> = (0..n_pairs)
                .map(|i| 1.0 + (top - 1.0) * i as f32 / n_pairs as f32)
                .collect();
            f32_bytes(&f)
        };
        match self.arch {
            SyntheticArch::Llama3 | SyntheticArch::Mistral3 | SyntheticArch::Arcee => {
                w.add_tensor("rope_freqs.weight", DType::F32, &[n_pairs], factors(8.0))?;
            }
            SyntheticArch::Phi3 => {
                // Short factors apply up to the training context.
                w.add_tensor(
                    "rope_factors_short.weight",
                    DType::F32,
                    &[n_pairs],
                    factors(2.0),
                )?;
                w.add_tensor(
                    "rope_factors_long.weight",
                    DType::F32,
                    &[n_pairs],
                    factors(16.0),
                )?;
            }
            _ => {}
        }
        for il in 0..self.n_layer {
            let name = |s: &str| format!("blk.{il}.{s}.weight");
            let t = self.weight_type;
            let post_norms_only = matches!(
                self.arch,
                SyntheticArch::Olmo2
                    | SyntheticArch::Olmo3
                    | SyntheticArch::Exaone4
                    | SyntheticArch::Exaone4Swa
            );
            if !post_norms_only {
                w.add_tensor(name("attn_norm"), DType::F32, &[e], ones(e))?;
            }
            if !post_norms_only && self.arch != SyntheticArch::Cohere2 {
                w.add_tensor(name("ffn_norm"), DType::F32, &[e], ones(e))?;
            }
            if self.arch == SyntheticArch::Phi3 {
                matrix(&mut w, name("attn_qkv"), t, [e, e + 2 * kv])?;
            } else {
                matrix(&mut w, name("attn_q"), t, [e, e])?;
                matrix(&mut w, name("attn_k"), t, [e, kv])?;
                matrix(&mut w, name("attn_v"), t, [e, kv])?;
            }
            matrix(&mut w, name("attn_output"), t, [e, e])?;
            if let Some(x) = n_ff_expert {
                matrix(&mut w, name("ffn_gate_inp"), DType::F32, [e, n_expert])?;
                // Each stack written as the one matrix of all its experts' rows.
                let mut stack = |s: &str, [k, m]: [usize; 2]| {
                    let rng = next_rng();
                    let blocks = random_blocks(t, [k, m * n_expert], rng);
                    w.add_tensor_with(name(s), t, &[k, m, n_expert], blocks)
                        .map(|_| ())
                };
                stack("ffn_gate_exps", [e, x])?;
                stack("ffn_up_exps", [e, x])?;
                stack("ffn_down_exps", [x, e])?;
                if self.arch == SyntheticArch::Qwen2Moe {
                    w.add_tensor(
                        name("ffn_gate_inp_shexp"),
                        DType::F32,
                        &[e],
                        values(e, -0.5, 0.5),
                    )?;
                }
                if matches!(
                    self.arch,
                    SyntheticArch::GraniteMoe | SyntheticArch::Qwen2Moe
                ) {
                    matrix(&mut w, name("ffn_gate_shexp"), t, [e, ff / 2])?;
                    matrix(&mut w, name("ffn_up_shexp"), t, [e, ff / 2])?;
                    matrix(&mut w, name("ffn_down_shexp"), t, [ff / 2, e])?;
                }
            } else if self.arch == SyntheticArch::Arcee {
                matrix(&mut w, name("ffn_up"), t, [e, ff])?;
                matrix(&mut w, name("ffn_down"), t, [ff, e])?;
            } else if self.arch == SyntheticArch::Starcoder2 {
                matrix(&mut w, name("ffn_up"), t, [e, ff])?;
                matrix(&mut w, name("ffn_down"), t, [ff, e])?;
                let bias = |s: &str| format!("blk.{il}.{s}.bias");
                for (m, n) in [
                    ("attn_q", e),
                    ("attn_k", kv),
                    ("attn_v", kv),
                    ("attn_output", e),
                    ("attn_norm", e),
                    ("ffn_norm", e),
                    ("ffn_up", ff),
                    ("ffn_down", e),
                ] {
                    w.add_tensor(bias(m), DType::F32, &[n], values(n, -0.5, 0.5))?;
                }
            } else if matches!(self.arch, SyntheticArch::Phi3 | SyntheticArch::Glm4) {
                matrix(&mut w, name("ffn_up"), t, [e, 2 * ff])?;
                matrix(&mut w, name("ffn_down"), t, [ff, e])?;
            } else {
                matrix(&mut w, name("ffn_gate"), t, [e, ff])?;
                matrix(&mut w, name("ffn_up"), t, [e, ff])?;
                matrix(&mut w, name("ffn_down"), t, [ff, e])?;
            }
            let bias = |s: &str| format!("blk.{il}.{s}.bias");
            match self.arch {
                SyntheticArch::Qwen2
                | SyntheticArch::Qwen2Vl
                | SyntheticArch::Qwen2Moe
                | SyntheticArch::Glm4 => {
                    for (m, n) in [("attn_q", e), ("attn_k", kv), ("attn_v", kv)] {
                        w.add_tensor(bias(m), DType::F32, &[n], values(n, -0.5, 0.5))?;
                    }
                }
                SyntheticArch::StableLm => {
                    for (m, n) in [
                        ("attn_q", e),
                        ("attn_k", kv),
                        ("attn_v", kv),
                        ("attn_norm", e),
                        ("ffn_norm", e),
                    ] {
                        w.add_tensor(bias(m), DType::F32, &[n], values(n, -0.5, 0.5))?;
                    }
                }
                SyntheticArch::Qwen3
                | SyntheticArch::Qwen3Moe
                | SyntheticArch::Exaone4
                | SyntheticArch::Exaone4Swa
                | SyntheticArch::HunyuanDense => {
                    for m in ["attn_q_norm", "attn_k_norm"] {
                        w.add_tensor(name(m), DType::F32, &[head_dim], values(head_dim, 0.5, 1.5))?;
                    }
                }
                SyntheticArch::Olmoe => {
                    w.add_tensor(name("attn_q_norm"), DType::F32, &[e], values(e, 0.5, 1.5))?;
                    w.add_tensor(name("attn_k_norm"), DType::F32, &[kv], values(kv, 0.5, 1.5))?;
                }
                SyntheticArch::Olmo2 | SyntheticArch::Olmo3 => {
                    w.add_tensor(name("attn_q_norm"), DType::F32, &[e], values(e, 0.5, 1.5))?;
                    w.add_tensor(name("attn_k_norm"), DType::F32, &[kv], values(kv, 0.5, 1.5))?;
                    for m in ["post_attention_norm", "post_ffw_norm"] {
                        w.add_tensor(name(m), DType::F32, &[e], values(e, 0.5, 1.5))?;
                    }
                }
                SyntheticArch::Gemma2
                | SyntheticArch::Llama
                | SyntheticArch::Llama3
                | SyntheticArch::SmolLM3
                | SyntheticArch::Phi3
                | SyntheticArch::Mistral3
                | SyntheticArch::Granite
                | SyntheticArch::Gemma
                | SyntheticArch::Ernie45
                | SyntheticArch::Exaone
                | SyntheticArch::Mixtral
                | SyntheticArch::GraniteMoe
                | SyntheticArch::Cohere2
                | SyntheticArch::Starcoder2
                | SyntheticArch::MiniCpm
                | SyntheticArch::Arcee => {}
            }
            let post_norms = matches!(
                self.arch,
                SyntheticArch::Gemma2
                    | SyntheticArch::Glm4
                    | SyntheticArch::Exaone4
                    | SyntheticArch::Exaone4Swa
            );
            if post_norms {
                for m in ["post_attention_norm", "post_ffw_norm"] {
                    w.add_tensor(name(m), DType::F32, &[e], values(e, 0.5, 1.5))?;
                }
            }
        }
        w.write_file(path)
    }
}

/// Byte offsets of a block's f16 scales.
fn scale_offsets(dtype: DType) -> &'static [usize] {
    match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 | DType::IQ4NL | DType::IQ4XS => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K => &[0, 2],
        DType::Q6K => &[208],
        DType::Q2K => &[80, 82],
        DType::Q3K => &[108],
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => &[],
    }
}

/// The root mean square of the values of random `dtype` blocks whose f16
/// scale fields are all 1. Every block type's values are linear in those
/// fields together, so scaling them all by `s` scales this by `s`.
fn unit_scale_rms(dtype: DType) -> f32 {
    const BLOCKS: usize = 64;
    let mut rng = Rng::new(7);
    let mut bytes = vec![0u8; BLOCKS * dtype.block_bytes()];
    for word in bytes.chunks_mut(8) {
        word.copy_from_slice(&rng.next_u64().to_le_bytes()[..word.len()]);
    }
    for block in bytes.chunks_exact_mut(dtype.block_bytes()) {
        for &at in scale_offsets(dtype) {
            block[at..at + 2].copy_from_slice(&half::f16::ONE.to_le_bytes());
        }
    }
    let mut values = vec![0.0f32; BLOCKS * dtype.block_elems()];
    if crate::quant::dequantize_row(dtype, &bytes, &mut values).is_err() {
        return 1.0;
    }
    let mean_square = values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32;
    mean_square.sqrt().max(f32::MIN_POSITIVE)
}

/// A producer of a random `dtype` matrix of `ne` elements whose values
/// have a variance of about `1 / ne[0]`, so that a product of unit-sized
/// inputs is unit-sized and every layer leaves a mark on the logits: float
/// matrices uniform values; quantized ones random bytes with their f16
/// scales drawn around the scale that gives that variance (random codes
/// at a fixed scale gave some types, iq4 and q3_K among them, weights ten
/// times larger than others, and models so sensitive that a q8 rounding
/// of their activations moved the logits by 0.8).
fn random_blocks(
    dtype: DType,
    ne: [usize; 2],
    mut rng: Rng,
) -> impl FnMut(&mut dyn Write) -> io::Result<()> {
    let n = ne[0] * ne[1];
    let a = (3.0 / ne[0].max(1) as f32).sqrt();
    let scale = if dtype.is_quantized() {
        1.0 / ((ne[0].max(1) as f32).sqrt() * unit_scale_rms(dtype))
    } else {
        0.0
    };
    move |out: &mut dyn Write| {
        let (elems, bytes) = (dtype.block_elems(), dtype.block_bytes());
        let mut block = vec![0u8; bytes];
        let mut chunk = Vec::with_capacity(1 << 20);
        for _ in 0..n / elems {
            match dtype {
                DType::F32 => block.copy_from_slice(&rng.uniform(-a, a).to_le_bytes()),
                DType::F16 => {
                    block.copy_from_slice(&half::f16::from_f32(rng.uniform(-a, a)).to_le_bytes())
                }
                DType::BF16 => {
                    block.copy_from_slice(&half::bf16::from_f32(rng.uniform(-a, a)).to_le_bytes())
                }
                _ => {
                    for word in block.chunks_mut(8) {
                        let r = rng.next_u64().to_le_bytes();
                        word.copy_from_slice(&r[..word.len()]);
                    }
                    for &at in scale_offsets(dtype) {
                        let v = half::f16::from_f32(scale * rng.uniform(0.5, 1.5));
                        block[at..at + 2].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            chunk.extend_from_slice(&block);
            if chunk.len() >= 1 << 20 {
                out.write_all(&chunk)?;
                chunk.clear();
            }
        }
        out.write_all(&chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufFile;
    use crate::model::ModelConfig;

    #[test]
    fn a_small_synthetic_model_reads_back_with_finite_weights() {
        let spec = SyntheticLlama {
            arch: Default::default(),
            n_layer: 2,
            n_embd: 256,
            n_ff: 512,
            n_head: 4,
            n_head_kv: 2,
            n_vocab: 40,
            n_ctx_train: 128,
            weight_type: DType::Q6K,
            embd_type: DType::Q8_0,
            experts: SYNTHETIC_EXPERTS,
        };
        let q4k = SyntheticLlama::preset("1b:q4_K").unwrap();
        assert_eq!(q4k.weight_type, DType::Q4K);
        assert_eq!(
            SyntheticLlama::preset("1b:q3_K").unwrap().weight_type,
            DType::Q3K
        );
        assert!(SyntheticLlama::preset("1b:q8_K").is_err());
        assert!(SyntheticLlama::preset("1b:i32").is_err());
        let path = std::env::temp_dir().join(format!("wginfer-synth-{}.gguf", std::process::id()));
        spec.write(&path, 1).unwrap();
        let file = GgufFile::open(&path).unwrap();
        let c = ModelConfig::from_gguf(&file).unwrap();
        assert_eq!(
            (c.n_layer, c.n_embd, c.n_vocab, c.head_dim),
            (2, 256, 40, 64)
        );
        for info in file.tensors() {
            let dtype = info.dtype().unwrap();
            let n: usize = info.ne.iter().product();
            let mut values = vec![0.0; n];
            crate::quant::dequantize_row(dtype, file.tensor_data(info), &mut values).unwrap();
            assert!(
                values.iter().all(|v| v.is_finite() && v.abs() < 100.0),
                "{}",
                info.name
            );
        }
        drop(file);
        let _ = std::fs::remove_file(path);
    }
}
