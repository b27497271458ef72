//! The weights the llama graph reads, by name, with the shapes the
//! hyperparameters imply: what a file must hold, what it may hold, and
//! which weights are worth storing back to back.

use crate::model::config::ModelConfig;

/// Weights the graph reads only where the file has them (q/k/v/o biases),
/// with the shape the hyperparameters imply.
pub fn optional_weights(c: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (e, q, kv) = (c.n_embd, c.n_embd_q(), c.n_embd_kv());
    let mut out = Vec::new();
    for il in 0..c.n_layer {
        let bias = |s: &str, n: usize| (format!("blk.{il}.{s}.bias"), vec![n]);
        out.extend([
            bias("attn_q", q),
            bias("attn_k", kv),
            bias("attn_v", kv),
            bias("attn_qkv", q + 2 * kv),
            bias("attn_output", e),
        ]);
    }
    out
}

/// Every weight the graph reads, with the shape the hyperparameters imply.
pub fn expected_weights(c: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let hd = c.head_dim;
    let (e, q, kv, ff) = (c.n_embd, c.n_embd_q(), c.n_embd_kv(), c.n_ff);
    let mut out = vec![
        ("token_embd.weight".to_string(), vec![e, c.n_vocab]),
        ("output_norm.weight".to_string(), vec![e]),
    ];
    if !c.tied_output {
        out.push(("output.weight".to_string(), vec![e, c.n_vocab]));
    }
    for il in 0..c.n_layer {
        let blk = |s: &str, ne: Vec<usize>| (format!("blk.{il}.{s}.weight"), ne);
        out.push(blk("attn_output", vec![q, e]));
        if c.has_pre_norms() {
            out.push(blk("attn_norm", vec![e]));
        }
        if c.has_pre_norms() && !c.parallel_blocks() {
            out.push(blk("ffn_norm", vec![e]));
        }
        if c.fused_qkv {
            out.push(blk("attn_qkv", vec![e, q + 2 * kv]));
        } else {
            out.extend([
                blk("attn_q", vec![e, q]),
                blk("attn_k", vec![e, kv]),
                blk("attn_v", vec![e, kv]),
            ]);
        }
        match (c.experts, c.fused_gate_up()) {
            (Some(x), _) => {
                out.extend([
                    blk("ffn_gate_inp", vec![e, x.n_expert]),
                    blk("ffn_gate_exps", vec![e, x.n_ff, x.n_expert]),
                    blk("ffn_up_exps", vec![e, x.n_ff, x.n_expert]),
                    blk("ffn_down_exps", vec![x.n_ff, e, x.n_expert]),
                ]);
                let shared = x.n_ff_shared;
                if x.shared_gate {
                    out.push(blk("ffn_gate_inp_shexp", vec![e]));
                }
                if shared > 0 {
                    out.extend([
                        blk("ffn_gate_shexp", vec![e, shared]),
                        blk("ffn_up_shexp", vec![e, shared]),
                        blk("ffn_down_shexp", vec![shared, e]),
                    ]);
                }
            }
            (None, true) => {
                out.extend([blk("ffn_up", vec![e, 2 * ff]), blk("ffn_down", vec![ff, e])])
            }
            (None, false) if !c.gated_ffn() => {
                out.extend([blk("ffn_up", vec![e, ff]), blk("ffn_down", vec![ff, e])])
            }
            (None, false) => out.extend([
                blk("ffn_gate", vec![e, ff]),
                blk("ffn_up", vec![e, ff]),
                blk("ffn_down", vec![ff, e]),
            ]),
        }
        if c.has_qk_norm() {
            out.extend([blk("attn_q_norm", vec![hd]), blk("attn_k_norm", vec![hd])]);
        }
        if c.has_full_qk_norm() {
            out.extend([blk("attn_q_norm", vec![q]), blk("attn_k_norm", vec![kv])]);
        }
        if c.has_post_norms() {
            out.extend([
                blk("post_attention_norm", vec![e]),
                blk("post_ffw_norm", vec![e]),
            ]);
        }
        // The biases llama.cpp requires of StarCoder2 and StableLM.
        let bias = |s: &str, n: usize| (format!("blk.{il}.{s}.bias"), vec![n]);
        if c.norm_biases() {
            out.extend([bias("attn_norm", e), bias("ffn_norm", e)]);
        }
        if c.projection_biases() {
            out.extend([
                bias("attn_output", e),
                bias("ffn_up", ff),
                bias("ffn_down", e),
            ]);
        }
    }
    if c.norm_biases() {
        out.push(("output_norm.bias".to_string(), vec![e]));
    }
    out
}

/// Weights that one product can read as a single matrix, when stored back
/// to back ([`crate::model::weights::Weights::plan`]): each layer's q, k, v and its gate, up
/// (or its shared expert's).
pub fn joined_weights(c: &ModelConfig) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(2 * c.n_layer);
    for il in 0..c.n_layer {
        let names = |parts: &[&str], kind: &str| {
            parts
                .iter()
                .map(|p| format!("blk.{il}.{p}.{kind}"))
                .collect::<Vec<_>>()
        };
        out.push(names(&["attn_q", "attn_k", "attn_v"], "weight"));
        // Qwen 2's biases, added to the joined product at once.
        out.push(names(&["attn_q", "attn_k", "attn_v"], "bias"));
        out.push(names(&["ffn_gate", "ffn_up"], "weight"));
        out.push(names(&["ffn_gate_shexp", "ffn_up_shexp"], "weight"));
    }
    out
}
