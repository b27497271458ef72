//! The graph of one batch of tokens, node for node like llama.cpp's
//! `build_llama` (and, for Gemma 3, `build_gemma3_iswa`: the family's
//! variations are switched by [`ModelConfig`]): weights and KV cache are
//! bound inputs; token ids, positions, the attention mask and the cache rows
//! the batch fills are inputs written each step.
//!
//! A graph depends only on its [`Shape`]: attention reads the cache up to a
//! multiple of [`KV_PAD`] positions (the mask hides those past the batch),
//! and the batch's K and V go to the cache with `set_rows` at the positions
//! given as inputs. So every decode step of a [`KV_PAD`]-long stretch runs
//! the same graph, and its schedule and recorded dispatches are reused.

mod experts;
mod projection;
mod weight_names;

use projection::{products, project, split_rows};
pub use weight_names::{expected_weights, joined_weights, optional_weights};

use super::config::{Activation, ModelConfig};
use super::kv_cache::KvCache;
use super::weights::Weights;
use crate::backend::BufferHandle;
use crate::graph::{Graph, TensorData, TensorId};
use crate::{DType, Error, Result};

/// What one evaluation computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Tokens in the batch.
    pub n_tokens: usize,
    /// Positions already in the cache; the batch sits at `n_past..n_past + n_tokens`.
    pub n_past: usize,
    /// Logits of every position (else of the last one only).
    pub all_logits: bool,
}

/// Cache positions that attention reads are padded to a multiple of this
/// (as llama.cpp pads `n_kv`), so a decode graph keeps its shape for this
/// many tokens.
pub const KV_PAD: usize = 256;

/// Whether attention runs as one flash-attention op (llama.cpp's `-fa`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlashAttn {
    /// Where it is faster: decode steps on a GPU ([`FlashAttn::Decode`]
    /// when every layer runs on a hardware GPU, else [`FlashAttn::Off`];
    /// software renderers such as lavapipe gain nothing from it). On an
    /// H200 it decodes 3-6% faster than the scores product, soft_max and
    /// values product it replaces; prompts run them still, as they run on
    /// cooperative matrices where the tiled flash-attention kernel does
    /// not (on an H100 the 1B shape's pp512 is 23,756 tok/s through them,
    /// 21,989 through it). On the CPU it saves nothing.
    #[default]
    Auto,
    /// Always.
    On,
    /// For one-token batches (decode steps) only.
    Decode,
    /// Never: scores product, masked soft_max, values product.
    Off,
}

impl FlashAttn {
    /// Parses `on`, `off`, `decode` or `auto`.
    pub fn parse(s: &str) -> Result<FlashAttn> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(FlashAttn::Auto),
            "on" | "1" => Ok(FlashAttn::On),
            "decode" => Ok(FlashAttn::Decode),
            "off" | "0" => Ok(FlashAttn::Off),
            other => Err(Error::invalid(format!(
                "flash attention '{other}': expected on, off, decode or auto"
            ))),
        }
    }

    /// `Auto` made concrete for a model whose layers all run on hardware
    /// GPUs or not; the other settings stay.
    pub fn resolve(self, on_gpus: bool) -> FlashAttn {
        match self {
            FlashAttn::Auto if on_gpus => FlashAttn::Decode,
            FlashAttn::Auto => FlashAttn::Off,
            other => other,
        }
    }

    /// Whether a batch of `n_tokens` runs with flash attention (`Auto`
    /// unresolved: never).
    pub fn used_for(self, n_tokens: usize) -> bool {
        match self {
            FlashAttn::Auto | FlashAttn::Off => false,
            FlashAttn::Decode => n_tokens == 1,
            FlashAttn::On => n_tokens > 0,
        }
    }
}

/// Where a step's token comes from, and whether its pick stays on the
/// device for the next step (pipelined decoding: the host submits step
/// N+1 before it has read step N's token).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Chain {
    /// Token ids written by the host; the host reads the logits.
    #[default]
    Off,
    /// Token ids written by the host; the last position's pick is also
    /// written to the device token.
    Start(Pick),
    /// One token, the device token (the previous step's pick), which this
    /// step's pick then replaces.
    Continue(Pick),
}

/// How a chained step picks its token on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pick {
    /// The largest logit (greedy).
    Greedy,
    /// The sampler: the `k` largest logits, then top-p, min-p, temperature
    /// and a draw with the settings written to [`StepGraph::sampler_settings`].
    TopK(usize),
}

/// What a graph is built for: batches of one shape share one graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Tokens in the batch.
    pub n_tokens: usize,
    /// Cache positions attention reads (the first `n_kv`).
    pub n_kv: usize,
    /// Logits of every position (else of the last one only).
    pub all_logits: bool,
    /// Attention as one [`crate::graph::Op::FlashAttn`].
    pub flash_attn: bool,
    /// Where the token comes from; the greedy pick left on the device.
    pub chain: Chain,
}

impl Batch {
    /// The shape of this batch's graph in a cache of `n_ctx` positions, or
    /// an error when the batch does not fit.
    pub fn shape(&self, n_ctx: usize, flash_attn: FlashAttn) -> Result<Shape> {
        let end = self
            .n_past
            .checked_add(self.n_tokens)
            .filter(|&end| self.n_tokens > 0 && end <= n_ctx)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "a batch of {} tokens after {} does not fit the {n_ctx}-position context",
                    self.n_tokens, self.n_past
                ))
            })?;
        Ok(Shape {
            n_tokens: self.n_tokens,
            n_kv: end.div_ceil(KV_PAD).saturating_mul(KV_PAD).min(n_ctx),
            all_logits: self.all_logits,
            flash_attn: flash_attn.used_for(self.n_tokens),
            chain: Chain::Off,
        })
    }
}

/// A built graph and the tensors the caller reads or writes.
#[derive(Debug)]
pub struct StepGraph {
    /// The nodes, in computation order.
    pub graph: Graph,
    /// The shape it was built for.
    pub shape: Shape,
    /// i32 token ids `[n_tokens]`.
    pub tokens: TensorId,
    /// i32 positions `[n_tokens]`, also the K cache rows the batch fills.
    pub positions: TensorId,
    /// f32 `[n_kv, n_tokens]`: 0 where a token may attend to a cache
    /// position, -inf where not (later positions, padding).
    pub kq_mask: TensorId,
    /// The mask of sliding-window layers, which also hides positions
    /// `n_swa` or more before the token; `None` without such layers.
    pub kq_mask_swa: Option<TensorId>,
    /// i32 `[n_embd_kv * n_tokens]`: where each value of the batch's V goes
    /// in the transposed V cache, viewed as one long row of single values.
    pub v_rows: TensorId,
    /// f32 `[1, 1, n_tokens]`: each token's attention temperature, which
    /// multiplies its queries; `None` for models without one.
    pub attn_temperature: Option<TensorId>,
    /// f32 logits `[n_vocab, n_tokens]` or `[n_vocab, 1]`.
    pub logits: TensorId,
    /// f32 `[4]`, a sampled chained step's temperature, top-p, ln min-p and
    /// uniform draw ([`crate::graph::Op::SampleTopK`]).
    pub sampler_settings: Option<TensorId>,
}

/// The i32 token a chained step leaves on the device (see [`Chain`]),
/// as a graph input bound to `device_token`.
fn device_token_input(g: &mut Graph, device_token: Option<&BufferHandle>) -> Result<TensorId> {
    let buffer =
        device_token.ok_or_else(|| Error::invalid("a chained step needs a device token buffer"))?;
    let t = g.input("device_token", DType::I32, &[1])?;
    g.bind(
        t,
        TensorData {
            buffer: buffer.clone(),
            offset: 0,
        },
    )?;
    Ok(t)
}

/// The values of a step graph's inputs for one batch.
#[derive(Clone, Debug, PartialEq)]
pub struct StepInputs {
    /// Token ids.
    pub tokens: Vec<i32>,
    /// Positions `n_past..n_past + n_tokens`.
    pub positions: Vec<i32>,
    /// The causal mask over the graph's `n_kv` positions.
    pub kq_mask: Vec<f32>,
    /// The sliding-window mask, when the model has a window.
    pub kq_mask_swa: Option<Vec<f32>>,
    /// V cache rows, channel after channel for each token.
    pub v_rows: Vec<i32>,
    /// Each token's attention temperature, when the model has one.
    pub attn_temperature: Option<Vec<f32>>,
}

impl StepInputs {
    /// The inputs of `batch` (its tokens `tokens`) for a graph of `shape`
    /// over a cache of `n_ctx` positions of model `c`. An error when the
    /// tokens do not fit the graph's `n_kv` positions of the cache, or a
    /// cache index does not fit i32.
    pub fn new(
        batch: Batch,
        tokens: &[u32],
        shape: Shape,
        n_ctx: usize,
        c: &ModelConfig,
    ) -> Result<StepInputs> {
        let (n_embd_kv, n_swa) = (c.n_embd_kv(), c.n_swa);
        let end = batch
            .n_past
            .checked_add(tokens.len())
            .filter(|&end| !tokens.is_empty() && end <= shape.n_kv && shape.n_kv <= n_ctx)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{} tokens after {} do not fit a graph over {} of {n_ctx} cache positions",
                    tokens.len(),
                    batch.n_past,
                    shape.n_kv
                ))
            })?;
        let index = |i: Option<usize>| {
            i.and_then(|i| i32::try_from(i).ok()).ok_or_else(|| {
                Error::invalid(format!(
                    "a cache of {n_ctx} positions x {n_embd_kv} values is past i32 indices"
                ))
            })
        };
        let positions = (batch.n_past..end)
            .map(|p| index(Some(p)))
            .collect::<Result<Vec<i32>>>()?;
        // Row of token at `pos`: 0 for cache positions `first..=pos`
        // (`pos < end <= n_kv`, checked above).
        let mask = |window: usize| {
            let mut mask = vec![f32::NEG_INFINITY; shape.n_kv * tokens.len()];
            for (row, pos) in mask.chunks_exact_mut(shape.n_kv).zip(batch.n_past..end) {
                if let Some(seen) = row.get_mut((pos + 1).saturating_sub(window)..=pos) {
                    seen.fill(0.0);
                }
            }
            mask
        };
        let kq_mask = mask(usize::MAX);
        let kq_mask_swa = (n_swa > 0).then(|| mask(n_swa));
        let v_rows = (batch.n_past..end)
            .flat_map(|pos| {
                (0..n_embd_kv).map(move |c| c.checked_mul(n_ctx).and_then(|r| r.checked_add(pos)))
            })
            .map(index)
            .collect::<Result<Vec<i32>>>()?;
        let attn_temperature = (batch.n_past..end)
            .map(|pos| c.attn_temperature(pos))
            .collect();
        Ok(StepInputs {
            tokens: tokens.iter().map(|&t| t as i32).collect(),
            positions,
            kq_mask,
            kq_mask_swa,
            v_rows,
            attn_temperature,
        })
    }
}

/// Builds the graph of batches of `shape`; a chained shape reads and
/// writes its token in `device_token` (4 bytes or more).
pub fn build(
    c: &ModelConfig,
    w: &Weights,
    kv: &KvCache,
    shape: Shape,
    device_token: Option<&BufferHandle>,
) -> Result<StepGraph> {
    let Shape {
        n_tokens: n,
        n_kv,
        all_logits,
        flash_attn,
        chain,
    } = shape;
    if n == 0 || n > n_kv || n_kv > kv.n_ctx() {
        return Err(Error::invalid(format!(
            "a graph of {n} tokens over {n_kv} of {} cache positions",
            kv.n_ctx()
        )));
    }
    let continues = matches!(chain, Chain::Continue(_));
    if chain != Chain::Off && all_logits || continues && n != 1 {
        return Err(Error::invalid(format!(
            "a chained graph ({chain:?}) of {n} tokens with all logits: {all_logits}"
        )));
    }
    let (hd, n_head, n_head_kv) = (c.head_dim, c.n_head, c.n_head_kv);
    let n_embd_kv = c.n_embd_kv();
    let n_ctx = kv.n_ctx();
    let es = kv.dtype().block_bytes();

    let mut g = Graph::new();
    let tokens = match chain {
        Chain::Continue(_) => device_token_input(&mut g, device_token)?,
        Chain::Off | Chain::Start(_) => g.input("inp_tokens", DType::I32, &[n])?,
    };
    let positions = g.input("inp_pos", DType::I32, &[n])?;
    let kq_mask = g.input("KQ_mask", DType::F32, &[n_kv, n])?;
    let kq_mask_swa = match c.n_swa {
        0 => None,
        _ => Some(g.input("KQ_mask_swa", DType::F32, &[n_kv, n])?),
    };
    let v_rows = g.input("inp_v_rows", DType::I32, &[n_embd_kv * n])?;
    let attn_temperature = match c.attn_temperature(0) {
        Some(_) => Some(g.input("inp_attn_scale", DType::F32, &[1, 1, n])?),
        None => None,
    };
    let tok_embd = w.input(&mut g, "token_embd.weight")?;
    let mut inp_l = g.get_rows(tok_embd, tokens)?;
    g.set_name(inp_l, "inp_embd")?;
    if let Some(s) = c.embd_scale() {
        inp_l = g.scale(inp_l, s)?;
    }
    let kq_scale = c.kq_scale;
    let rope_factors = match c.rope_factors_tensor(|n| w.has(n), n_ctx) {
        Some(name) => Some(w.input(&mut g, name)?),
        None => None,
    };
    // `x / rms(x) * w` (or a layer norm's `(x - mean) / sd * w`) with the
    // weight `blk.{il}.{name}`.
    let normed = |g: &mut Graph, x: TensorId| match c.layer_norms() {
        true => g.norm(x, c.norm_eps),
        false => g.rms_norm(x, c.norm_eps),
    };
    let weighted = |g: &mut Graph, normed: TensorId, name: &str| -> Result<TensorId> {
        let weight = w.input(g, &format!("{name}.weight"))?;
        let out = g.mul(normed, weight)?;
        match c.norm_biases() {
            true => {
                let bias = w.input(g, &format!("{name}.bias"))?;
                g.add(out, bias)
            }
            false => Ok(out),
        }
    };
    let norm = |g: &mut Graph, x: TensorId, il: usize, name: &str| -> Result<TensorId> {
        let normed = normed(g, x)?;
        weighted(g, normed, &format!("blk.{il}.{name}"))
    };

    for il in 0..c.n_layer {
        let cache = kv.layer(&mut g, il)?;
        let inp_sa = inp_l;

        // Attention: (norm,) projections, (q/k norms,) rope.
        let attn_in = match c.has_pre_norms() {
            true => norm(&mut g, inp_l, il, "attn_norm")?,
            false => inp_l,
        };
        let home = w.home(&format!("blk.{il}.{}.weight", c.layer_home_weight()))?;
        let [q, k, v] = match c.fused_qkv {
            true => {
                let [qkv] = project(&mut g, w, il, ["attn_qkv"], attn_in, home)?;
                split_rows(&mut g, qkv, [c.n_embd_q(), n_embd_kv, n_embd_kv])?
            }
            false => project(&mut g, w, il, ["attn_q", "attn_k", "attn_v"], attn_in, home)?,
        };
        let (q, k) = match c.has_full_qk_norm() {
            true => (
                norm(&mut g, q, il, "attn_q_norm")?,
                norm(&mut g, k, il, "attn_k_norm")?,
            ),
            false => (q, k),
        };
        // Heads of each token; the products may be views of a joined one.
        let heads = |g: &mut Graph, t: TensorId, n_heads: usize| {
            let row = g.layout(t).nb[1];
            g.view(
                t,
                &[hd, n_heads, n],
                &[hd * DType::F32.block_bytes(), row],
                0,
            )
        };
        let mut q = heads(&mut g, q, n_head)?;
        let mut k = heads(&mut g, k, n_head_kv)?;
        let qk_norm = c.has_qk_norm();
        if qk_norm && !c.qk_norm_after_rope() {
            q = norm(&mut g, q, il, "attn_q_norm")?;
            k = norm(&mut g, k, il, "attn_k_norm")?;
        }
        let rope = c.rope_of_layer(il);
        // q in place, so q, K and V stay side by side in the projection's
        // result for the dispatch that ropes q and k and stores K and V.
        let (q, k) = match c.ropes_layer(il) {
            true => (
                g.rope_ext_inplace(q, positions, rope_factors, rope)?,
                g.rope_ext(k, positions, rope_factors, rope)?,
            ),
            false => (q, k),
        };
        let (q, k) = match qk_norm && c.qk_norm_after_rope() {
            true => (
                norm(&mut g, q, il, "attn_q_norm")?,
                norm(&mut g, k, il, "attn_k_norm")?,
            ),
            false => (q, k),
        };
        let q = match attn_temperature {
            Some(t) => g.mul(q, t)?,
            None => q,
        };
        let mask = match kq_mask_swa {
            Some(swa) if c.is_swa_layer(il) => swa,
            _ => kq_mask,
        };
        g.set_name(q, format!("Qcur-{il}"))?;
        g.set_name(k, format!("Kcur-{il}"))?;
        g.set_name(v, format!("Vcur-{il}"))?;

        // Store this batch's K and V at its positions (V transposed: one
        // value per row of the flattened cache); built before the attention
        // views so the stores run first.
        g.set_rows(cache.k, k, positions)?;
        let v_cache = g.reshape(cache.v, &[1, n_ctx * n_embd_kv])?;
        g.set_rows(v_cache, v, v_rows)?;

        // kq = K^T q per head, masked and normalised; kqv = V kq; the heads
        // side by side. Flash attention does all of it in one op.
        let q = g.permute(q, [0, 2, 1, 3])?;
        let k_all = g.view(
            cache.k,
            &[hd, n_kv, n_head_kv],
            &[es * n_embd_kv, es * hd],
            0,
        )?;
        let v_all = g.view(
            cache.v,
            &[n_kv, hd, n_head_kv],
            &[es * n_ctx, es * n_ctx * hd],
            0,
        )?;
        let merged = if flash_attn {
            let v_rows = g.permute(v_all, [1, 0, 2, 3])?;
            g.flash_attn(q, k_all, v_rows, Some(mask), kq_scale)?
        } else {
            let kq = g.mul_mat(k_all, q)?;
            let kq = match c.attn_softcap {
                Some(cap) => {
                    let kq = soft_cap(&mut g, kq, cap, kq_scale)?;
                    g.soft_max(kq, Some(mask), 1.0)?
                }
                None => g.soft_max(kq, Some(mask), kq_scale)?,
            };
            g.set_name(kq, format!("kq_soft_max-{il}"))?;
            let kqv = g.mul_mat(v_all, kq)?;
            g.set_name(kqv, format!("kqv-{il}"))?;
            if n == 1 {
                // [hd, 1, heads] holds its values in the merged order
                // already: the copy would be a dispatch that moves nothing.
                kqv
            } else {
                let merged = g.permute(kqv, [0, 2, 1, 3])?;
                g.cont(merged)?
            }
        };
        g.set_name(merged, format!("kqv_out-{il}"))?;
        let merged = g.reshape(merged, &[c.n_embd_q(), n])?;
        let [mut attn_out] = project(&mut g, w, il, ["attn_output"], merged, home)?;
        if c.has_post_norms() {
            attn_out = norm(&mut g, attn_out, il, "post_attention_norm")?;
        }
        if let Some(r) = c.scales.residual {
            attn_out = g.scale(attn_out, r)?;
        }
        let ffn_inp = g.add(attn_out, inp_sa)?;
        g.set_name(ffn_inp, format!("ffn_inp-{il}"))?;

        // Feed-forward: (norm,) act(gate) * up, down (, post norm); beside
        // attention, on its input, in Cohere's parallel blocks.
        let cur = match (c.parallel_blocks(), c.has_pre_norms()) {
            (true, _) => attn_in,
            (false, true) => norm(&mut g, ffn_inp, il, "ffn_norm")?,
            (false, false) => ffn_inp,
        };
        let mut down = match &c.experts {
            Some(e) if e.n_ff_shared > 0 => {
                let routed = experts::moe_ffn(&mut g, w, e, il, cur)?;
                let names = ["ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"];
                let mut shared = feed_forward(&mut g, c, w, il, names, cur, home)?;
                if e.shared_gate {
                    shared = experts::gate_shared(&mut g, w, il, cur, shared)?;
                }
                g.add(routed, shared)?
            }
            Some(e) => experts::moe_ffn(&mut g, w, e, il, cur)?,
            None => {
                let names = ["ffn_gate", "ffn_up", "ffn_down"];
                feed_forward(&mut g, c, w, il, names, cur, home)?
            }
        };
        if c.has_post_norms() {
            down = norm(&mut g, down, il, "post_ffw_norm")?;
        }
        if let Some(r) = c.scales.residual {
            down = g.scale(down, r)?;
        }
        inp_l = g.add(down, ffn_inp)?;
        g.set_name(inp_l, format!("l_out-{il}"))?;
    }

    // Only the last position's logits are needed to sample: drop the rest
    // before the (large) output projection.
    let mut cur = inp_l;
    if !all_logits && n > 1 {
        let row = g.layout(inp_l).nb[1];
        cur = g.view(inp_l, &[c.n_embd, 1], &[row], row * (n - 1))?;
    }
    let norm = normed(&mut g, cur)?;
    let cur = weighted(&mut g, norm, "output_norm")?;
    let mut logits = if c.tied_output {
        g.mul_mat(tok_embd, cur)?
    } else {
        let home = w.home("output_norm.weight")?;
        products(&mut g, w, &["output.weight".to_string()], cur, home)?[0]
    };
    if let Some(l) = c.scales.logit {
        logits = g.scale(logits, l)?;
    }
    if let Some(cap) = c.final_softcap {
        logits = soft_cap(&mut g, logits, cap, 1.0)?;
    }
    g.set_name(logits, "result_output")?;
    g.set_output(logits)?;
    let sampler_settings = match chain {
        Chain::Off => None,
        Chain::Start(pick) => {
            let next = device_token_input(&mut g, device_token)?;
            pick_into(&mut g, pick, logits, next)?
        }
        Chain::Continue(pick) => pick_into(&mut g, pick, logits, tokens)?,
    };
    Ok(StepGraph {
        graph: g,
        shape,
        tokens,
        positions,
        kq_mask,
        kq_mask_swa,
        v_rows,
        attn_temperature,
        logits,
        sampler_settings,
    })
}

/// `down(act(gate(x)) * up(x))` of layer `il`'s weights `[gate, up,
/// down]`; Phi-3's and GLM-4's gate and up are the halves of one `ffn_up`,
/// and StarCoder2's and Arcee's `down(act(up(x)))` have no gate.
fn feed_forward(
    g: &mut Graph,
    c: &ModelConfig,
    w: &Weights,
    il: usize,
    [gate, up, down]: [&str; 3],
    x: TensorId,
    home: usize,
) -> Result<TensorId> {
    let act = |g: &mut Graph, x: TensorId| match c.activation() {
        Activation::Silu => g.silu(x),
        Activation::GeluTanh => g.gelu(x),
        Activation::ReluSquared => {
            let r = g.relu(x)?;
            g.mul(r, r)
        }
    };
    if !c.gated_ffn() {
        let [up] = project(g, w, il, [up], x, home)?;
        let up = act(g, up)?;
        let [down] = project(g, w, il, [down], up, home)?;
        return Ok(down);
    }
    let [gate, up] = match c.fused_gate_up() {
        true => {
            let [gate_up] = project(g, w, il, ["ffn_up"], x, home)?;
            split_rows(g, gate_up, [c.n_ff, c.n_ff])?
        }
        false => project(g, w, il, [gate, up], x, home)?,
    };
    let gate = act(g, gate)?;
    let act = g.mul(gate, up)?;
    let [down] = project(g, w, il, [down], act, home)?;
    Ok(down)
}

/// `cap * tanh(x * scale / cap)`: Gemma 2's soft cap of `x * scale`.
fn soft_cap(g: &mut Graph, x: TensorId, cap: f32, scale: f32) -> Result<TensorId> {
    let x = g.scale(x, scale / cap)?;
    let x = g.tanh(x)?;
    g.scale(x, cap)
}

/// Writes the pick from `logits` into `dst`; returns the sampler's
/// settings input, if it has one.
fn pick_into(
    g: &mut Graph,
    pick: Pick,
    logits: TensorId,
    dst: TensorId,
) -> Result<Option<TensorId>> {
    match pick {
        Pick::Greedy => {
            g.argmax_into(logits, dst)?;
            Ok(None)
        }
        Pick::TopK(k) => {
            let settings = g.input("sampler_settings", DType::F32, &[4])?;
            g.sample_into(logits, k, settings, dst)?;
            Ok(Some(settings))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FlashAttn;

    #[test]
    fn auto_flash_attention_is_for_decode_steps_on_gpus() {
        let gpu = FlashAttn::Auto.resolve(true);
        assert_eq!(gpu, FlashAttn::Decode);
        assert!(gpu.used_for(1) && !gpu.used_for(2) && !gpu.used_for(512));
        assert_eq!(FlashAttn::Auto.resolve(false), FlashAttn::Off);
        assert_eq!(FlashAttn::On.resolve(false), FlashAttn::On);
        assert!(FlashAttn::On.used_for(512) && !FlashAttn::Off.used_for(1));
        assert_eq!(FlashAttn::parse(" Decode ").ok(), Some(FlashAttn::Decode));
        assert!(FlashAttn::parse("sometimes").is_err());
    }
}
