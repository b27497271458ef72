//! Reading hyperparameters from metadata, family by family.

use super::rope::DEFAULT_FREQ_BASE;
use super::*;
use crate::gguf::{Array, GgufWriter, Value};
use crate::DType;

fn meta(extra: &[(&str, Value)], drop: &str) -> Gguf {
    meta_of("llama", extra, drop)
}

/// A file of architecture `arch`: the `llama.` keys below renamed.
fn meta_of(arch: &str, extra: &[(&str, Value)], drop: &str) -> Gguf {
    let mut w = GgufWriter::new();
    let base: Vec<(&str, Value)> = vec![
        ("general.architecture", arch.into()),
        ("llama.block_count", Value::U32(2)),
        ("llama.embedding_length", Value::U32(64)),
        ("llama.feed_forward_length", Value::U32(128)),
        ("llama.attention.head_count", Value::U32(4)),
        ("llama.attention.head_count_kv", Value::U32(2)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.context_length", Value::U32(256)),
        ("tokenizer.ggml.tokens", vec!["a", "b", "c"].into()),
    ];
    // An extra key replaces the base key of its name.
    let base = base
        .into_iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k));
    for (k, v) in base.chain(extra.iter().cloned()) {
        if k != drop {
            w.add(k.replacen("llama.", &format!("{arch}."), 1), v);
        }
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    Gguf::parse(&bytes).unwrap()
}

#[test]
fn reads_hyperparameters_with_defaults() {
    let c = ModelConfig::from_gguf(&meta(&[], "")).unwrap();
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
fn supported_architectures_are_the_family_names() {
    let names: Vec<&str> = FAMILIES.iter().map(|&(name, _)| name).collect();
    assert_eq!(names, SUPPORTED_ARCHITECTURES);
}

#[test]
fn gemma3_has_its_window_rope_bases_and_variations() {
    let c = ModelConfig::from_gguf(&meta_of(
        "gemma3",
        &[
            ("llama.attention.sliding_window", Value::U32(512)),
            ("llama.rope.freq_base", Value::F32(1e6)),
            ("llama.block_count", Value::U32(12)),
        ],
        "",
    ))
    .unwrap();
    assert_eq!((c.family, c.n_swa), (Family::Gemma3, 512));
    let swa: Vec<bool> = (0..12).map(|il| c.is_swa_layer(il)).collect();
    let global = [5, 11];
    for (il, &s) in swa.iter().enumerate() {
        assert_eq!(s, !global.contains(&il), "layer {il}");
    }
    assert_eq!(c.rope_of_layer(0).freq_base, 1e4);
    assert_eq!(c.rope_of_layer(5).freq_base, 1e6);
    assert_eq!(c.rope.mode, RopeMode::Neox);
    assert_eq!(c.embd_scale(), Some(8.0));
    assert!(c.has_qk_norm() && c.has_post_norms());
    assert_eq!(c.activation(), Activation::GeluTanh);

    let llama = ModelConfig::from_gguf(&meta(&[], "")).unwrap();
    assert_eq!((llama.family, llama.n_swa), (Family::Llama, 0));
    assert!(!llama.is_swa_layer(0) && llama.embd_scale().is_none());
    assert_eq!(llama.rope.mode, RopeMode::Normal);
}

/// A llama-shaped file of architecture `arch` (head size 16) with one
/// tensor, `rope_freqs.weight` of `dtype` and `n` values.
fn with_rope_factors(arch: &str, dtype: DType, n: usize) -> Result<ModelConfig> {
    with_tensor(arch, ROPE_FACTORS, dtype, n)
}

/// A file of architecture `arch` with one tensor, `name` of `n` `dtype`s.
fn with_tensor(arch: &str, name: &str, dtype: DType, n: usize) -> Result<ModelConfig> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", arch);
    for (k, v) in [
        ("block_count", 2u32),
        ("embedding_length", 64),
        ("feed_forward_length", 128),
        ("attention.head_count", 4),
        ("context_length", 256),
    ] {
        w.add(format!("{arch}.{k}"), v);
    }
    w.add(format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-5f32)
        .add("tokenizer.ggml.tokens", vec!["a", "b"]);
    w.add_tensor(name, dtype, &[n], vec![0u8; dtype.row_bytes(n)?])?;
    let mut bytes = Vec::new();
    w.write_to(&mut bytes)?;
    ModelConfig::from_gguf(&Gguf::parse(&bytes)?)
}

#[test]
fn rope_factors_are_read_for_llama_only_and_checked() {
    let c = with_rope_factors("llama", DType::F32, 8).unwrap();
    assert_eq!(c.rope_factors, RopeFactors::Freqs);
    let has = |n: &str| n == ROPE_FACTORS;
    assert_eq!(c.rope_factors_tensor(has, 1 << 20), Some(ROPE_FACTORS));
    let plain = ModelConfig::from_gguf(&meta(&[], "")).unwrap();
    assert_eq!(plain.rope_factors, RopeFactors::None);
    for (arch, dtype, n, says) in [
        ("llama", DType::F32, 16, "f32 [8] expected"),
        ("llama", DType::F16, 8, "f32 [8] expected"),
        (
            "qwen2",
            DType::F32,
            8,
            "not supported for this architecture",
        ),
    ] {
        let e = with_rope_factors(arch, dtype, n).unwrap_err().to_string();
        assert!(e.contains(says), "{arch} {dtype} {n}: {e}");
    }
}

#[test]
fn smollm3_skips_rope_on_every_fourth_layer() {
    let c = ModelConfig::from_gguf(&meta_of("smollm3", &[], "")).unwrap();
    let ropes: Vec<bool> = (0..8).map(|il| c.ropes_layer(il)).collect();
    assert_eq!(ropes, [true, true, true, false, true, true, true, false]);
    assert_eq!((c.family, c.rope.mode), (Family::SmolLM3, RopeMode::Normal));
    let llama = ModelConfig::from_gguf(&meta(&[], "")).unwrap();
    assert!((0..8).all(|il| llama.ropes_layer(il)));
}

#[test]
fn phi3_takes_short_factors_within_the_training_context() {
    let mut c = ModelConfig::from_gguf(&meta_of("phi3", &[], "")).unwrap();
    assert!(c.fused_qkv && c.fused_gate_up() && c.rope.mode == RopeMode::Neox);
    assert_eq!(c.rope_factors, RopeFactors::None);
    c.rope_factors = RopeFactors::LongShort;
    let both = |_: &str| true;
    assert_eq!(c.rope_factors_tensor(both, 256), Some(ROPE_FACTORS_SHORT));
    assert_eq!(c.rope_factors_tensor(both, 257), Some(ROPE_FACTORS_LONG));
    let short_only = |n: &str| n == ROPE_FACTORS_SHORT;
    assert_eq!(c.rope_factors_tensor(short_only, 257), None);
}

#[test]
fn mistral3_scales_yarn_and_limits_the_context_to_the_original_one() {
    let yarn = [
        ("llama.rope.scaling.type", "yarn".into()),
        ("llama.rope.scaling.factor", Value::F32(4.0)),
        ("llama.rope.scaling.original_context_length", Value::U32(64)),
    ];
    let with = |extra: &[(&str, Value)]| {
        let all: Vec<(&str, Value)> = yarn.iter().cloned().chain(extra.iter().cloned()).collect();
        ModelConfig::from_gguf(&meta_of("mistral3", &all, "")).unwrap()
    };
    let plain = with(&[]);
    assert_eq!((plain.rope.attn_factor, plain.attn_temp_scale), (1.0, 0.0));
    assert_eq!(plain.attn_temperature(1 << 20), None);
    let c = with(&[
        ("llama.rope.scaling.yarn_log_multiplier", Value::F32(0.5)),
        ("llama.attention.temperature_scale", Value::F32(0.1)),
    ]);
    let want = 1.0 / (1.0 + 0.05 * 4.0f32.ln());
    assert!(
        (c.rope.attn_factor - want).abs() < 1e-6,
        "{}",
        c.rope.attn_factor
    );
    // 1 within the original 64 positions, then steps every 64.
    assert_eq!(c.attn_temperature(0), Some(1.0));
    assert_eq!(c.attn_temperature(63), Some(1.0));
    assert_eq!(c.attn_temperature(64), Some(1.0 + 0.1 * 2.0f32.ln()));
    assert_eq!(c.attn_temperature(191), Some(1.0 + 0.1 * 3.0f32.ln()));
}

#[test]
fn gemma2_reads_its_window_and_soft_caps() {
    let caps = [
        ("llama.attn_logit_softcapping", Value::F32(50.0)),
        ("llama.final_logit_softcapping", Value::F32(30.0)),
    ];
    let three_layers = [caps.as_slice(), &[("llama.block_count", Value::U32(3))]].concat();
    let c = ModelConfig::from_gguf(&meta_of("gemma2", &three_layers, "")).unwrap();
    assert_eq!(c.family, Family::Gemma2);
    assert_eq!((c.attn_softcap, c.final_softcap), (Some(50.0), Some(30.0)));
    // A window of 4,096 on every other layer, with the same rope.
    assert_eq!(c.n_swa, 4096);
    assert!(c.is_swa_layer(0) && !c.is_swa_layer(1) && c.is_swa_layer(2));
    assert_eq!(c.rope_of_layer(0), c.rope_of_layer(1));
    assert!(c.has_post_norms() && !c.has_qk_norm());
    assert_eq!(c.embd_scale(), Some(8.0));
    // Other families do not soft-cap their logits.
    let e = ModelConfig::from_gguf(&meta_of("llama", &caps, "")).unwrap_err();
    assert!(e.to_string().contains("soft-capping"), "{e}");
}

#[test]
fn gemma_is_gemma2_without_windows_post_norms_or_caps() {
    let window = [("llama.attention.sliding_window", Value::U32(8))];
    let c = ModelConfig::from_gguf(&meta_of("gemma", &window, "")).unwrap();
    assert_eq!(c.family, Family::Gemma);
    assert_eq!(c.n_swa, 0);
    assert_eq!((c.attn_softcap, c.final_softcap), (None, None));
    assert!(!c.has_post_norms() && !c.has_qk_norm());
    assert_eq!(c.activation(), Activation::GeluTanh);
    assert_eq!(c.embd_scale(), Some(8.0));
    assert_eq!(c.rope.mode, RopeMode::Neox);
    assert!(c.tied_output);
}

#[test]
fn granite_reads_its_scales() {
    let scales = [
        ("llama.logit_scale", Value::F32(8.0)),
        ("llama.residual_scale", Value::F32(0.22)),
        ("llama.embedding_scale", Value::F32(12.0)),
        ("llama.attention.scale", Value::F32(0.0078125)),
    ];
    let c = ModelConfig::from_gguf(&meta_of("granite", &scales, "")).unwrap();
    assert_eq!(c.family, Family::Granite);
    assert_eq!(
        c.scales,
        BranchScales {
            embedding: Some(12.0),
            residual: Some(0.22),
            logit: Some(1.0 / 8.0)
        }
    );
    assert_eq!((c.embd_scale(), c.kq_scale), (Some(12.0), 0.0078125));
    // Only the logit scale is required; a zero factor is none.
    let e = ModelConfig::from_gguf(&meta_of("granite", &scales, "llama.logit_scale"));
    assert!(e.unwrap_err().to_string().contains("logit_scale"));
    let zero = [
        ("llama.logit_scale", Value::F32(2.0)),
        ("llama.residual_scale", Value::F32(0.0)),
    ];
    let c = ModelConfig::from_gguf(&meta_of("granite", &zero, "")).unwrap();
    assert_eq!((c.scales.residual, c.scales.embedding), (None, None));
    assert_eq!(c.kq_scale, 0.25);
    let off = [
        ("llama.logit_scale", Value::F32(2.0)),
        ("llama.rope.scaling.finetuned", Value::Bool(false)),
    ];
    let e = ModelConfig::from_gguf(&meta_of("granite", &off, "")).unwrap_err();
    assert!(e.to_string().contains("without rope"), "{e}");
}

#[test]
fn longrope_scaling_is_read_like_linear() {
    let c = ModelConfig::from_gguf(&meta_of(
        "phi3",
        &[("llama.rope.scaling.type", "longrope".into())],
        "",
    ))
    .unwrap();
    assert_eq!((c.rope.freq_scale, c.rope.ext_factor), (1.0, 0.0));
}

#[test]
fn qwen_families_are_llama_with_neox_rope() {
    for (arch, family, qk_norm) in [
        ("qwen2", Family::Qwen2, false),
        ("qwen3", Family::Qwen3, true),
    ] {
        let c = ModelConfig::from_gguf(&meta_of(arch, &[], "")).unwrap();
        assert_eq!((c.family, c.rope.mode), (family, RopeMode::Neox));
        assert_eq!(c.has_qk_norm(), qk_norm);
        assert!(!c.has_post_norms() && c.embd_scale().is_none());
        assert_eq!((c.activation(), c.n_swa), (Activation::Silu, 0));
    }
}

/// ERNIE 4.5: llama's graph; an attention output bias, which llama.cpp
/// never adds, is an error rather than a different model.
#[test]
fn ernie4_5_is_llama_and_refuses_an_output_bias() {
    let c = ModelConfig::from_gguf(&meta_of("ernie4_5", &[], "")).unwrap();
    assert_eq!((c.family, c.rope.mode), (Family::Ernie45, RopeMode::Normal));
    assert!(!c.has_qk_norm() && !c.has_post_norms() && c.embd_scale().is_none());
    let e = with_tensor("ernie4_5", "blk.0.attn_output.bias", DType::F32, 64).unwrap_err();
    assert!(e.to_string().contains("attn_output.bias"), "{e}");
}

/// EXAONE: llama's graph with neox rope, and llama's rope factors.
#[test]
fn exaone_is_llama_with_neox_rope_and_its_factors() {
    let c = ModelConfig::from_gguf(&meta_of("exaone", &[], "")).unwrap();
    assert_eq!((c.family, c.rope.mode), (Family::Exaone, RopeMode::Neox));
    assert!(!c.has_qk_norm() && !c.has_post_norms() && c.embd_scale().is_none());
    let c = with_rope_factors("exaone", DType::F32, 8).unwrap();
    assert_eq!(c.rope_factors, RopeFactors::Freqs);
}

/// OLMo 2: norms after attention and the feed-forward only, whole q/k
/// norms, neox rope. OLMo 3 (a window): three sliding layers of every four
/// unless the file lists them, roped without YaRN.
#[test]
fn olmo2_norms_outputs_not_inputs() {
    let c = ModelConfig::from_gguf(&meta_of("olmo2", &[], "")).unwrap();
    assert_eq!(c.rope.mode, RopeMode::Neox);
    assert!(c.has_post_norms() && c.has_full_qk_norm() && !c.has_pre_norms());
    assert_eq!(c.layer_home_weight(), "post_attention_norm");
    assert!(c.n_swa == 0 && !c.is_swa_layer(0));
    let olmo3 = |extra: &[(&str, Value)]| {
        let mut keys = vec![
            ("llama.block_count", Value::U32(8)),
            ("llama.attention.sliding_window", Value::U32(4096)),
            ("llama.rope.scaling.type", "yarn".into()),
            ("llama.rope.scaling.factor", Value::F32(8.0)),
        ];
        keys.extend(extra.iter().cloned());
        ModelConfig::from_gguf(&meta_of("olmo2", &keys, ""))
    };
    let c = olmo3(&[]).unwrap();
    let sliding: Vec<bool> = (0..8).map(|il| c.is_swa_layer(il)).collect();
    assert_eq!(c.n_swa, 4096);
    assert_eq!(sliding, [true, true, true, false, true, true, true, false]);
    assert!(c.rope.ext_factor > 0.0 && c.rope.freq_scale == 0.125);
    let swa = c.rope_of_layer(0);
    assert_eq!(
        (swa.freq_scale, swa.ext_factor, swa.attn_factor),
        (1.0, 0.0, 1.0)
    );
    assert_eq!(
        (swa.freq_base, c.rope_of_layer(3)),
        (c.rope.freq_base, c.rope)
    );
    // The file's list, or period, wins.
    let listed = [true, false, false, true, true, false, false, false];
    let c = olmo3(&[(
        "llama.attention.sliding_window_pattern",
        Value::Array(Array::Bool(listed.to_vec())),
    )])
    .unwrap();
    assert_eq!(
        (0..8).map(|il| c.is_swa_layer(il)).collect::<Vec<_>>(),
        listed
    );
    let c = olmo3(&[("llama.attention.sliding_window_pattern", Value::U32(2))]).unwrap();
    assert!(c.is_swa_layer(0) && !c.is_swa_layer(1) && c.is_swa_layer(6));
    let short = Value::Array(Array::Bool(vec![true; 3]));
    let e = olmo3(&[("llama.attention.sliding_window_pattern", short)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sliding_window_pattern") && e.contains("8 layers"),
        "{e}"
    );
}

#[test]
fn reads_mixtures_of_experts() {
    let experts = |arch: &str, extra: &[(&str, Value)]| {
        ModelConfig::from_gguf(&meta_of(arch, extra, "")).map(|c| c.experts)
    };
    let counts = [
        ("llama.expert_count", Value::U32(8)),
        ("llama.expert_used_count", Value::U32(2)),
    ];
    // Mixtral: llama with experts of the feed-forward's width.
    let want = |n_ff| {
        Some(Experts {
            n_expert: 8,
            n_used: 2,
            n_ff,
            n_ff_shared: 0,
            norm_weights: true,
            shared_gate: false,
        })
    };
    assert_eq!(experts("llama", &counts).unwrap(), want(128));
    assert_eq!(experts("llama", &[]).unwrap(), None);
    // Qwen 3 MoE: its own width, else the feed-forward's over the used.
    let mut qwen = counts.to_vec();
    assert_eq!(experts("qwen3moe", &qwen).unwrap(), want(64));
    qwen.push(("llama.expert_feed_forward_length", Value::U32(48)));
    let c = ModelConfig::from_gguf(&meta_of("qwen3moe", &qwen, "")).unwrap();
    assert_eq!((c.experts, c.rope.mode), (want(48), RopeMode::Neox));
    assert!(c.has_qk_norm());
    // Granite MoE: the feed-forward's width, and a shared expert's.
    let mut granite = counts.to_vec();
    granite.push(("llama.logit_scale", Value::F32(2.0)));
    granite.push(("llama.expert_shared_feed_forward_length", Value::U32(32)));
    let shared = experts("granitemoe", &granite)
        .unwrap()
        .map(|x| (x.n_ff, x.n_ff_shared));
    assert_eq!(shared, Some((128, 32)));
    // OLMoE: the feed-forward's width, weights not renormalized, neox rope
    // and whole-projection q/k norms.
    let c = ModelConfig::from_gguf(&meta_of("olmoe", &counts, "")).unwrap();
    let olmoe = Experts {
        norm_weights: false,
        ..want(128).unwrap()
    };
    assert_eq!((c.experts, c.rope.mode), (Some(olmoe), RopeMode::Neox));
    assert!(c.has_full_qk_norm() && !c.has_qk_norm());
    assert!(experts("olmoe", &[]).is_err());
    // Qwen 2 MoE: Qwen 3 MoE's widths, a gated shared expert as wide as
    // the feed-forward unless the file says, weights not renormalized.
    let c = ModelConfig::from_gguf(&meta_of("qwen2moe", &counts, "")).unwrap();
    let qwen2 = Experts {
        n_ff_shared: 128,
        norm_weights: false,
        shared_gate: true,
        ..want(64).unwrap()
    };
    assert_eq!((c.experts, c.rope.mode), (Some(qwen2), RopeMode::Neox));
    // Errors: experts where no graph has them, none where they are needed,
    // more used than top-k picks.
    let e = experts("gemma3", &counts).unwrap_err().to_string();
    assert!(
        e.contains("llama, qwen3moe, granitemoe, olmoe and qwen2moe"),
        "{e}"
    );
    assert!(experts("qwen3moe", &[]).is_err());
    for used in [0, 5] {
        let bad = [
            counts[0].clone(),
            ("llama.expert_used_count", Value::U32(used)),
        ];
        let e = experts("llama", &bad).unwrap_err().to_string();
        assert!(e.contains("experts used"), "{e}");
    }
}

#[test]
fn reads_yarn_scaling() {
    let c = ModelConfig::from_gguf(&meta(
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
    let e = ModelConfig::from_gguf(&meta(&[], "llama.block_count")).unwrap_err();
    assert!(
        e.to_string().contains("'llama.block_count' is missing"),
        "{e}"
    );
    let e =
        ModelConfig::from_gguf(&meta(&[("general.architecture", "gpt2".into())], "")).unwrap_err();
    assert!(e.to_string().contains("architecture 'gpt2'"), "{e}");
    let e = ModelConfig::from_gguf(&meta(&[("llama.rope.scaling.type", "dynamic".into())], ""))
        .unwrap_err();
    assert!(e.to_string().contains("'dynamic' is not supported"), "{e}");
    let e = ModelConfig::from_gguf(&meta(
        &[("llama.attention.head_count_kv", Value::U32(3))],
        "",
    ))
    .unwrap_err();
    assert!(e.to_string().contains("not a multiple"), "{e}");
}

/// A key length from the file whose product with the head count
/// overflows is an error here, not an overflow later in `n_embd_q`.
#[test]
fn huge_key_length_is_an_error() {
    let huge = Value::U64(1 << 62);
    let e = ModelConfig::from_gguf(&meta(
        &[
            ("llama.attention.key_length", huge.clone()),
            ("llama.attention.value_length", huge),
        ],
        "",
    ))
    .unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");
}

#[test]
fn glm4_norms_both_sides_and_ropes_part_of_each_head() {
    let dims = [("llama.rope.dimension_count", Value::U32(8))];
    let c = ModelConfig::from_gguf(&meta_of("glm4", &dims, "")).unwrap();
    assert_eq!(
        (c.family, c.rope.mode, c.rope.n_dims),
        (Family::Glm4, RopeMode::Normal, 8)
    );
    assert!(c.has_pre_norms() && c.has_post_norms() && c.fused_gate_up());
    // q/k/v are one matrix only where the file has one.
    assert!(!c.fused_qkv && !c.has_qk_norm());
}

#[test]
fn nextn_layers_are_not_evaluated() {
    let nextn = |n: u32| {
        [
            ("llama.block_count", Value::U32(3)),
            ("llama.nextn_predict_layers", Value::U32(n)),
        ]
    };
    let c = ModelConfig::from_gguf(&meta_of("glm4", &nextn(1), "")).unwrap();
    assert_eq!(c.n_layer, 2);
    let err = ModelConfig::from_gguf(&meta_of("glm4", &nextn(3), "")).unwrap_err();
    assert!(err.to_string().contains("nextn_predict_layers"), "{err}");
}

#[test]
fn multi_section_rope_is_an_error() {
    let sections = |v: Vec<i32>| [("llama.rope.dimension_sections", Value::Array(Array::I32(v)))];
    let err =
        ModelConfig::from_gguf(&meta_of("glm4", &sections(vec![8, 12, 12, 0]), "")).unwrap_err();
    assert!(err.to_string().contains("multi-section rope"), "{err}");
    assert!(ModelConfig::from_gguf(&meta_of("glm4", &sections(vec![0; 4]), "")).is_ok());
    // Qwen2-VL's text positions turn all three sections alike: neox rope.
    let c = ModelConfig::from_gguf(&meta_of("qwen2vl", &sections(vec![2, 3, 3, 0]), "")).unwrap();
    assert_eq!((c.family, c.rope.mode), (Family::Qwen2, RopeMode::Neox));
    let err =
        ModelConfig::from_gguf(&meta_of("qwen2vl", &sections(vec![2, 3, 2, 1]), "")).unwrap_err();
    assert!(err.to_string().contains("multi-section rope"), "{err}");
}

/// Whether each of the first four layers attends through the window, and
/// whether it ropes.
fn windows_and_ropes(c: &ModelConfig) -> Vec<(bool, bool)> {
    (0..4)
        .map(|il| (c.is_swa_layer(il), c.ropes_layer(il)))
        .collect()
}

const THREE_SLIDING_ROPED_OF_FOUR: [(bool, bool); 4] =
    [(true, true), (true, true), (true, true), (false, false)];

#[test]
fn exaone4_has_a_window_at_64_layers_only() {
    let layers = |n: u32| [("llama.block_count", Value::U32(n))];
    let c = ModelConfig::from_gguf(&meta_of("exaone4", &layers(30), "")).unwrap();
    assert_eq!(
        (c.family, c.rope.mode, c.n_swa),
        (Family::Exaone4, RopeMode::Neox, 0)
    );
    assert!(!c.has_pre_norms() && c.has_post_norms() && c.has_qk_norm());
    assert!((0..30).all(|il| c.ropes_layer(il)));
    let c = ModelConfig::from_gguf(&meta_of("exaone4", &layers(64), "")).unwrap();
    assert_eq!(c.n_swa, 4096);
    // Three sliding, roped layers of every four; the fourth global, unroped.
    assert_eq!(windows_and_ropes(&c), THREE_SLIDING_ROPED_OF_FOUR);
}

#[test]
fn hunyuan_dense_norms_roped_heads_and_reads_one_expert_as_none() {
    let one = [("llama.expert_count", Value::U32(1))];
    let c = ModelConfig::from_gguf(&meta_of("hunyuan-dense", &one, "")).unwrap();
    assert_eq!(
        (c.family, c.rope.mode),
        (Family::HunyuanDense, RopeMode::Neox)
    );
    assert!(c.has_qk_norm() && c.qk_norm_after_rope() && c.experts.is_none());
    let qwen3 = ModelConfig::from_gguf(&meta_of("qwen3", &[], "")).unwrap();
    assert!(qwen3.has_qk_norm() && !qwen3.qk_norm_after_rope());
}

#[test]
fn cohere2_reads_its_window_norm_epsilon_and_logit_scale() {
    let keys = [
        ("llama.attention.layer_norm_epsilon", Value::F32(1e-3)),
        ("llama.logit_scale", Value::F32(0.25)),
        ("llama.attention.sliding_window", Value::U32(16)),
        ("llama.block_count", Value::U32(4)),
    ];
    let c = ModelConfig::from_gguf(&meta_of(
        "cohere2",
        &keys,
        "llama.attention.layer_norm_rms_epsilon",
    ))
    .unwrap();
    assert_eq!(
        (c.family, c.rope.mode, c.norm_eps),
        (Family::Cohere2, RopeMode::Normal, 1e-3)
    );
    assert_eq!((c.n_swa, c.scales.logit), (16, Some(0.25)));
    assert!(c.layer_norms() && c.parallel_blocks());
    assert_eq!(windows_and_ropes(&c), THREE_SLIDING_ROPED_OF_FOUR);
    // llama.cpp requires the window.
    let no_window = [keys[0].clone(), keys[1].clone()];
    let err = ModelConfig::from_gguf(&meta_of("cohere2", &no_window, "")).unwrap_err();
    assert!(err.to_string().contains("sliding_window"), "{err}");
}

#[test]
fn starcoder2_has_biased_layer_norms_and_an_ungated_feed_forward() {
    let eps = [("llama.attention.layer_norm_epsilon", Value::F32(1e-5))];
    let c = ModelConfig::from_gguf(&meta_of(
        "starcoder2",
        &eps,
        "llama.attention.layer_norm_rms_epsilon",
    ))
    .unwrap();
    assert_eq!(
        (c.family, c.rope.mode),
        (Family::Starcoder2, RopeMode::Neox)
    );
    assert!(c.layer_norms() && c.norm_biases() && !c.gated_ffn());
    // llama.cpp requires the biases.
    let names: Vec<String> = crate::model::llama_graph::expected_weights(&c)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for want in [
        "blk.0.attn_norm.bias",
        "blk.1.ffn_up.bias",
        "output_norm.bias",
    ] {
        assert!(names.iter().any(|n| n == want), "{want}");
    }
    assert!(!names.iter().any(|n| n.contains("ffn_gate")));
}

#[test]
fn stablelm_12b_norms_and_parallel_blocks_are_errors() {
    let eps = [("llama.attention.layer_norm_epsilon", Value::F32(1e-5))];
    let drop = "llama.attention.layer_norm_rms_epsilon";
    // Metadata alone: no ffn_norm tensor reads as the 12B's parallel blocks.
    let err = ModelConfig::from_gguf(&meta_of("stablelm", &eps, drop)).unwrap_err();
    assert!(err.to_string().contains("parallel attention"), "{err}");
}

#[test]
fn minicpm_scales_default_as_llama_cpp() {
    let c = ModelConfig::from_gguf(&meta_of("minicpm", &[], "")).unwrap();
    // Two layers, 64 wide.
    let want = BranchScales {
        embedding: Some(12.0),
        residual: Some(1.4 / 2f32.sqrt()),
        logit: Some(1.0 / (256.0 / 64.0)),
    };
    assert_eq!(
        (c.family, c.rope.mode, c.scales),
        (Family::MiniCpm, RopeMode::Normal, want)
    );
    let keyed = [("llama.residual_scale", Value::F32(0.5))];
    let c = ModelConfig::from_gguf(&meta_of("minicpm", &keyed, "")).unwrap();
    assert_eq!(c.scales.residual, Some(0.5));
}

#[test]
fn arcee_has_an_ungated_squared_relu_feed_forward() {
    let c = ModelConfig::from_gguf(&meta_of("arcee", &[], "")).unwrap();
    assert_eq!((c.family, c.rope.mode), (Family::Arcee, RopeMode::Normal));
    assert_eq!(
        (c.gated_ffn(), c.activation()),
        (false, Activation::ReluSquared)
    );
}
