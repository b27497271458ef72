//! The architectures a synthetic model can be written as.

use crate::gguf::GgufWriter;

/// Which architecture a synthetic model is written as: what it adds to
/// llama's tensors and metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyntheticArch {
    /// `llama`.
    #[default]
    Llama,
    /// `llama` with `rope_freqs.weight` (Llama 3.1's long-context factors).
    Llama3,
    /// `qwen2`: neox rope, biases on the q/k/v projections.
    Qwen2,
    /// `qwen3`: neox rope, per-head q/k norms.
    Qwen3,
    /// `smollm3`: no rope on every fourth layer.
    SmolLM3,
    /// `phi3`: one q/k/v and one gate/up matrix, neox rope, LongRoPE's
    /// short and long factors with a magnitude scale.
    Phi3,
    /// `mistral3`: YaRN over a 32nd of the training context with a
    /// log multiplier, attention temperature scaling, rope factors.
    Mistral3,
    /// `granite`: embedding, attention, residual and logit scales.
    Granite,
    /// `gemma2`: post-norms, an 8-position window on every other layer,
    /// soft caps of the attention scores and logits low enough to bite.
    Gemma2,
    /// `gemma`: GELU gating and scaled embeddings tied to the output.
    Gemma,
    /// `ernie4_5`: llama's layout under ERNIE 4.5's name.
    Ernie45,
    /// `exaone`: llama's layout with neox rope.
    Exaone,
    /// `llama` with a mixture of experts (Mixtral's layout): 8 experts of
    /// the feed-forward's width, 2 used per token.
    Mixtral,
    /// `qwen3moe`: Qwen 3 with 8 experts of half the feed-forward's width
    /// (`expert_feed_forward_length`), 2 used per token.
    Qwen3Moe,
    /// `granitemoe`: Granite's scales with 8 experts of the feed-forward's
    /// width, 2 used per token, and a shared expert of half that width.
    GraniteMoe,
    /// `olmoe`: 8 experts of the feed-forward's width, 2 used per token,
    /// weights not renormalized, whole-projection q/k norms, neox rope, as
    /// many key/value heads as query heads (OLMoE's k norm spans
    /// `n_embd`) and an output matrix of its own.
    Olmoe,
    /// `qwen2moe`: Qwen 2's biases with 8 experts of half the
    /// feed-forward's width, 2 used per token, weights not renormalized, a
    /// sigmoid-gated shared expert of half that width and an output matrix
    /// of its own.
    Qwen2Moe,
    /// `olmo2`: norms after attention and the feed-forward instead of
    /// before, whole-projection q/k norms, neox rope and an output matrix
    /// of its own.
    Olmo2,
    /// `olmo2` with OLMo 3's window: 8 positions on the layers the file
    /// lists (every other one), YaRN on the others.
    Olmo3,
    /// `glm4`: norms before and after attention and the feed-forward,
    /// q/k/v biases, one gate/up matrix, normal rope over half of each
    /// head.
    Glm4,
    /// `exaone4`: norms after attention and the feed-forward only,
    /// per-head q/k norms, neox rope.
    Exaone4,
    /// `exaone4` with 64 layers, the shape llama.cpp gives a window: 8
    /// positions on three layers of four (the default pattern), the
    /// fourth without rope.
    Exaone4Swa,
    /// `hunyuan-dense`: neox rope, per-head q/k norms after it, and the
    /// one "expert" its dense files list.
    HunyuanDense,
    /// `cohere2`: layer norms, attention and the feed-forward side by
    /// side, an 8-position window on three layers of four (the fourth
    /// unroped), normal rope over half of each head, logits times 0.5.
    Cohere2,
    /// `starcoder2`: layer norms with biases, biases on every projection,
    /// a GELU feed-forward without a gate, neox rope.
    Starcoder2,
    /// `stablelm`: layer norms with biases, q/k/v biases, neox rope over
    /// half of each head, an output matrix of its own.
    StableLm,
    /// `minicpm`: Granite's scales at MiniCPM's defaults (no keys).
    MiniCpm,
    /// `arcee`: an ungated `relu(up(x))^2` feed-forward and Llama 3's rope
    /// factors.
    Arcee,
    /// `qwen2vl`: Qwen 2 with Qwen2-VL's rope sections (text positions).
    Qwen2Vl,
}

/// Each architecture's name in presets (after `@`) and the
/// `general.architecture` it is written as.
pub(super) const ARCHES: &[(&str, SyntheticArch, &str)] = &[
    ("llama", SyntheticArch::Llama, "llama"),
    ("llama3", SyntheticArch::Llama3, "llama"),
    ("qwen2", SyntheticArch::Qwen2, "qwen2"),
    ("qwen3", SyntheticArch::Qwen3, "qwen3"),
    ("smollm3", SyntheticArch::SmolLM3, "smollm3"),
    ("phi3", SyntheticArch::Phi3, "phi3"),
    ("mistral3", SyntheticArch::Mistral3, "mistral3"),
    ("granite", SyntheticArch::Granite, "granite"),
    ("gemma2", SyntheticArch::Gemma2, "gemma2"),
    ("gemma", SyntheticArch::Gemma, "gemma"),
    ("ernie4_5", SyntheticArch::Ernie45, "ernie4_5"),
    ("exaone", SyntheticArch::Exaone, "exaone"),
    ("mixtral", SyntheticArch::Mixtral, "llama"),
    ("qwen3moe", SyntheticArch::Qwen3Moe, "qwen3moe"),
    ("granitemoe", SyntheticArch::GraniteMoe, "granitemoe"),
    ("olmoe", SyntheticArch::Olmoe, "olmoe"),
    ("qwen2moe", SyntheticArch::Qwen2Moe, "qwen2moe"),
    ("olmo2", SyntheticArch::Olmo2, "olmo2"),
    ("olmo3", SyntheticArch::Olmo3, "olmo2"),
    ("glm4", SyntheticArch::Glm4, "glm4"),
    ("exaone4", SyntheticArch::Exaone4, "exaone4"),
    ("exaone4-swa", SyntheticArch::Exaone4Swa, "exaone4"),
    (
        "hunyuan-dense",
        SyntheticArch::HunyuanDense,
        "hunyuan-dense",
    ),
    ("cohere2", SyntheticArch::Cohere2, "cohere2"),
    ("starcoder2", SyntheticArch::Starcoder2, "starcoder2"),
    ("stablelm", SyntheticArch::StableLm, "stablelm"),
    ("minicpm", SyntheticArch::MiniCpm, "minicpm"),
    ("arcee", SyntheticArch::Arcee, "arcee"),
    ("qwen2vl", SyntheticArch::Qwen2Vl, "qwen2vl"),
];

impl SyntheticArch {
    /// The metadata this architecture adds to llama's: its windows,
    /// scales and rope scaling, set where leaving one out shows.
    pub(super) fn add_metadata(
        self,
        w: &mut GgufWriter,
        key: impl Fn(&str) -> String,
        n_layer: usize,
        n_ctx_train: usize,
    ) {
        match self {
            SyntheticArch::Phi3 => {
                w.add(key("rope.scaling.attn_factor"), 1.2f32);
            }
            SyntheticArch::Granite | SyntheticArch::GraniteMoe => {
                // Far enough from 1 (and from the default 1 / sqrt(head_dim)
                // of the attention scale) that leaving any out shows.
                w.add(key("embedding_scale"), 6.0f32)
                    .add(key("residual_scale"), 0.3f32)
                    .add(key("logit_scale"), 2.5f32)
                    .add(key("attention.scale"), 0.4f32);
            }
            SyntheticArch::Olmo3 => {
                // Every other layer through the window, as the file lists
                // them; YaRN (over a quarter of the training context) on
                // the others only.
                let sliding: Vec<bool> = (0..n_layer).map(|il| il % 2 == 0).collect();
                w.add(key("attention.sliding_window"), 8u32)
                    .add(key("attention.sliding_window_pattern"), sliding)
                    .add(key("rope.scaling.type"), "yarn")
                    .add(key("rope.scaling.factor"), 4.0f32)
                    .add(
                        key("rope.scaling.original_context_length"),
                        (n_ctx_train / 4).max(1) as u32,
                    );
            }
            SyntheticArch::Exaone4Swa => {
                w.add(key("attention.sliding_window"), 8u32);
            }
            SyntheticArch::Qwen2Vl => {
                // Sections of the 8 rotated pairs of a 16-wide head.
                w.add(key("rope.dimension_sections"), vec![2i32, 3, 3, 0]);
            }
            SyntheticArch::HunyuanDense => {
                w.add(key("expert_count"), 1u32);
            }
            SyntheticArch::Starcoder2 | SyntheticArch::StableLm => {
                w.add(key("attention.layer_norm_epsilon"), 1e-5f32);
            }
            SyntheticArch::Cohere2 => {
                w.add(key("attention.sliding_window"), 8u32)
                    .add(key("attention.layer_norm_epsilon"), 1e-5f32)
                    .add(key("logit_scale"), 0.5f32);
            }
            SyntheticArch::Gemma2 => {
                w.add(key("attention.sliding_window"), 8u32)
                    .add(key("attn_logit_softcapping"), 2.0f32)
                    .add(key("final_logit_softcapping"), 3.0f32);
            }
            SyntheticArch::Mistral3 => {
                // An original context of a 32nd of the trained one, so
                // that a short evaluation already passes it (the attention
                // temperature steps up every n_ctx_train / 32 positions).
                w.add(key("rope.scaling.type"), "yarn")
                    .add(key("rope.scaling.factor"), 32.0f32)
                    .add(
                        key("rope.scaling.original_context_length"),
                        (n_ctx_train / 32).max(1) as u32,
                    )
                    .add(key("rope.scaling.yarn_log_multiplier"), 0.5f32)
                    .add(key("attention.temperature_scale"), 0.1f32);
            }
            _ => {}
        }
    }
}
