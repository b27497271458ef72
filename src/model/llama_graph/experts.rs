//! The mixture-of-experts feed-forward (llama.cpp's `build_moe_ffn` with a
//! softmax gate): the router's logits pick each token's best experts, whose
//! SwiGLU outputs are summed, weighted by their probabilities: renormalized,
//! the softmax of the chosen logits (the chosen probabilities over their
//! sum); else the chosen entries of the softmax over every expert.

use crate::graph::{Graph, TensorId};
use crate::model::config::Experts;
use crate::model::weights::Weights;
use crate::{DType, Result};

/// Layer `il`'s experts applied to `x` `[n_embd, n]`; gives `[n_embd, n]`.
pub(super) fn moe_ffn(
    g: &mut Graph,
    w: &Weights,
    e: &Experts,
    il: usize,
    x: TensorId,
) -> Result<TensorId> {
    let [n_embd, n, ..] = g.layout(x).ne;
    let weight = |g: &mut Graph, s: &str| w.input(g, &format!("blk.{il}.{s}.weight"));
    let router = weight(g, "ffn_gate_inp")?;
    let logits = g.mul_mat(router, x)?;
    g.set_name(logits, format!("ffn_moe_logits-{il}"))?;
    // Without renormalization the weights are the probabilities over every
    // expert: the same experts are best by either.
    let scores = match e.norm_weights {
        true => logits,
        false => g.soft_max(logits, None, 1.0)?,
    };
    // Each token's best experts, as (score, index) pairs [2, n_used, n].
    let best = g.top_k(scores, e.n_used, e.n_expert, false)?;
    let pair = 2 * DType::F32.block_bytes();
    let field =
        |g: &mut Graph, at: usize| g.view(best, &[1, e.n_used, n], &[pair, pair * e.n_used], at);
    let logit = field(g, 0)?;
    let index = field(g, DType::F32.block_bytes())?;
    let ids = g.cast(index, DType::I32)?;
    let ids = g.reshape(ids, &[e.n_used, n])?;
    g.set_name(ids, format!("ffn_moe_topk-{il}"))?;
    let chosen = g.cont(logit)?;
    let weights = match e.norm_weights {
        true => {
            let chosen = g.reshape(chosen, &[e.n_used, n])?;
            let weights = g.soft_max(chosen, None, 1.0)?;
            g.reshape(weights, &[1, e.n_used, n])?
        }
        false => chosen,
    };
    g.set_name(weights, format!("ffn_moe_weights-{il}"))?;

    let x = g.reshape(x, &[n_embd, 1, n])?;
    let gate_exps = weight(g, "ffn_gate_exps")?;
    let up_exps = weight(g, "ffn_up_exps")?;
    let down_exps = weight(g, "ffn_down_exps")?;
    let gate = g.mul_mat_id(gate_exps, x, ids)?;
    let up = g.mul_mat_id(up_exps, x, ids)?;
    let gate = g.silu(gate)?;
    let act = g.mul(gate, up)?;
    let down = g.mul_mat_id(down_exps, act, ids)?;
    let weighted = g.mul(down, weights)?;
    g.set_name(weighted, format!("ffn_moe_weighted-{il}"))?;
    // The sum over each token's experts.
    let row = g.layout(weighted).nb[1];
    let slot = |g: &mut Graph, s: usize| g.view(weighted, &[n_embd, n], &[row * e.n_used], row * s);
    let mut out = slot(g, 0)?;
    for s in 1..e.n_used {
        let next = slot(g, s)?;
        out = g.add(out, next)?;
    }
    if e.n_used == 1 {
        out = g.cont(out)?;
    }
    Ok(out)
}

/// Qwen 2 MoE's shared expert output `shared` `[n_embd, n]` scaled per token
/// by the sigmoid of `ffn_gate_inp_shexp` times the layer's input `x`:
/// with sigmoid(t) = (1 + tanh(t / 2)) / 2, `(shared + shared * tanh(t / 2)) / 2`.
pub(super) fn gate_shared(
    g: &mut Graph,
    w: &Weights,
    il: usize,
    x: TensorId,
    shared: TensorId,
) -> Result<TensorId> {
    let gate = w.input(g, &format!("blk.{il}.ffn_gate_inp_shexp.weight"))?;
    let logit = g.mul_mat(gate, x)?;
    g.set_name(logit, format!("ffn_shexp_gate_inp-{il}"))?;
    let half = g.scale(logit, 0.5)?;
    let tanh = g.tanh(half)?;
    let tilted = g.mul(shared, tanh)?;
    let sum = g.add(shared, tilted)?;
    g.scale(sum, 0.5)
}
