//! The llama graph for one batch of tokens, node for node like llama.cpp's
//! `build_llama` with the non-flash attention path: weights and KV cache are
//! bound inputs, token ids and positions are i32 inputs written each step.

use super::config::LlamaConfig;
use super::kv_cache::KvCache;
use super::weights::Weights;
use crate::graph::{Graph, TensorId};
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

/// A built graph and the tensors the caller reads or writes.
#[derive(Debug)]
pub struct StepGraph {
    /// The nodes, in computation order.
    pub graph: Graph,
    /// i32 token ids `[n_tokens]`.
    pub tokens: TensorId,
    /// i32 positions `[n_tokens]`.
    pub positions: TensorId,
    /// f32 logits `[n_vocab, n_tokens]` or `[n_vocab, 1]`.
    pub logits: TensorId,
}

/// Every weight the graph reads, with the shape the hyperparameters imply.
pub fn expected_weights(c: &LlamaConfig) -> Vec<(String, Vec<usize>)> {
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
        out.extend([
            blk("attn_norm", vec![e]),
            blk("attn_q", vec![e, q]),
            blk("attn_k", vec![e, kv]),
            blk("attn_v", vec![e, kv]),
            blk("attn_output", vec![q, e]),
            blk("ffn_norm", vec![e]),
            blk("ffn_gate", vec![e, ff]),
            blk("ffn_up", vec![e, ff]),
            blk("ffn_down", vec![ff, e]),
        ]);
    }
    out
}

/// The products `W x` of layer `il`'s weights `names` (e.g. `attn_q`) with
/// `x`; see [`products`].
fn project<const N: usize>(
    g: &mut Graph,
    w: &Weights,
    il: usize,
    names: [&str; N],
    x: TensorId,
    home: usize,
) -> Result<[TensorId; N]> {
    let names = names.map(|n| format!("blk.{il}.{n}.weight"));
    let out = products(g, w, &names, x, home)?;
    out.try_into()
        .map_err(|_| Error::invalid("a projection lost a product"))
}

/// `W x` for every weight in `names`, all reading `x`. A weight cut by rows
/// (row split mode) is multiplied part by part where each part lives, and
/// the partial products are copied into one tensor on `home`, the backend of
/// the unsplit weights around them. Products away from `home` are built
/// first, so each device runs one split per group and the gathers follow
/// the `home` products.
fn products(
    g: &mut Graph,
    w: &Weights,
    names: &[String],
    x: TensorId,
    home: usize,
) -> Result<Vec<TensorId>> {
    // (backend, name index, weight part, first row), away from home first,
    // grouped by device.
    let mut parts = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let ids = w.parts(g, name)?;
        for (id, part) in ids.into_iter().zip(&w.get(name)?.parts) {
            parts.push((w.part_backend(part)?, k, id, part.rows.start));
        }
    }
    parts.sort_by_key(|&(b, k, _, _)| (b == home, b, k));
    let mut products: Vec<Vec<(TensorId, usize)>> = vec![Vec::new(); names.len()];
    for (_, k, id, row0) in parts {
        products[k].push((g.mul_mat(id, x)?, row0));
    }
    let mut out = Vec::with_capacity(names.len());
    for (name, mut pieces) in names.iter().zip(products) {
        if let [(whole, _)] = pieces[..] {
            out.push(whole);
            continue;
        }
        pieces.sort_by_key(|p| p.1);
        let (n_rows, n_cols) = (w.get(name)?.layout.ne[1], g.layout(x).ne[1]);
        let full = g.empty(&format!("{name}*x"), DType::F32, &[n_rows, n_cols])?;
        let row_stride = g.layout(full).nb[1];
        let f32_bytes = DType::F32.block_bytes();
        for (piece, row0) in pieces {
            let rows = g.layout(piece).ne[0];
            let dst = g.view(full, &[rows, n_cols], &[row_stride], row0 * f32_bytes)?;
            g.cpy(piece, dst)?;
        }
        out.push(full);
    }
    Ok(out)
}

/// Builds the graph of `batch`.
pub fn build(c: &LlamaConfig, w: &Weights, kv: &KvCache, batch: Batch) -> Result<StepGraph> {
    let Batch {
        n_tokens: n,
        n_past,
        all_logits,
    } = batch;
    let n_kv = n_past
        .checked_add(n)
        .filter(|&end| n > 0 && end <= kv.n_ctx())
        .ok_or_else(|| {
            Error::invalid(format!(
                "a batch of {n} tokens after {n_past} does not fit the {}-position context",
                kv.n_ctx()
            ))
        })?;
    let (hd, n_head, n_head_kv) = (c.head_dim, c.n_head, c.n_head_kv);
    let n_embd_kv = c.n_embd_kv();
    let n_ctx = kv.n_ctx();
    let es = kv.dtype().block_bytes();

    let mut g = Graph::new();
    let tokens = g.input("inp_tokens", DType::I32, &[n])?;
    let positions = g.input("inp_pos", DType::I32, &[n])?;
    let tok_embd = w.input(&mut g, "token_embd.weight")?;
    let mut inp_l = g.get_rows(tok_embd, tokens)?;
    g.set_name(inp_l, "inp_embd")?;
    let kq_scale = 1.0 / (hd as f32).sqrt();

    for il in 0..c.n_layer {
        let wt = |g: &mut Graph, s: &str| w.input(g, &format!("blk.{il}.{s}.weight"));
        let cache = kv.layer(&mut g, il)?;
        let inp_sa = inp_l;

        // Attention: norm, projections, rope.
        let norm = g.rms_norm(inp_l, c.rms_eps)?;
        let attn_norm = wt(&mut g, "attn_norm")?;
        let cur = g.mul(norm, attn_norm)?;
        let home = w.home(&format!("blk.{il}.attn_norm.weight"))?;
        let [q, k, v] = project(&mut g, w, il, ["attn_q", "attn_k", "attn_v"], cur, home)?;
        let q = g.reshape(q, &[hd, n_head, n])?;
        let k = g.reshape(k, &[hd, n_head_kv, n])?;
        let q = g.rope(q, positions, c.rope)?;
        let k = g.rope(k, positions, c.rope)?;
        g.set_name(q, format!("Qcur-{il}"))?;
        g.set_name(k, format!("Kcur-{il}"))?;
        g.set_name(v, format!("Vcur-{il}"))?;

        // Store this batch's K and V at n_past (V transposed); built before
        // the attention views so the copies run first.
        let k_dst = g.view(cache.k, &[n * n_embd_kv], &[], es * n_embd_kv * n_past)?;
        g.cpy(k, k_dst)?;
        let v_t = g.transpose(v)?;
        let v_dst = g.view(cache.v, &[n, n_embd_kv], &[es * n_ctx], es * n_past)?;
        g.cpy(v_t, v_dst)?;

        // kq = K^T q per head, masked and normalised; kqv = V kq.
        let q = g.permute(q, [0, 2, 1, 3])?;
        let k_all = g.view(
            cache.k,
            &[hd, n_kv, n_head_kv],
            &[es * n_embd_kv, es * hd],
            0,
        )?;
        let kq = g.mul_mat(k_all, q)?;
        let kq = g.diag_mask_inf(kq, n_past)?;
        let kq = g.soft_max(kq, None, kq_scale)?;
        g.set_name(kq, format!("kq_soft_max-{il}"))?;
        let v_all = g.view(
            cache.v,
            &[n_kv, hd, n_head_kv],
            &[es * n_ctx, es * n_ctx * hd],
            0,
        )?;
        let kqv = g.mul_mat(v_all, kq)?;
        g.set_name(kqv, format!("kqv-{il}"))?;
        let merged = g.permute(kqv, [0, 2, 1, 3])?;
        let merged = g.cont(merged)?;
        let merged = g.reshape(merged, &[c.n_embd_q(), n])?;
        let [attn_out] = project(&mut g, w, il, ["attn_output"], merged, home)?;
        let ffn_inp = g.add(attn_out, inp_sa)?;
        g.set_name(ffn_inp, format!("ffn_inp-{il}"))?;

        // Feed-forward: norm, silu(gate) * up, down.
        let norm = g.rms_norm(ffn_inp, c.rms_eps)?;
        let ffn_norm = wt(&mut g, "ffn_norm")?;
        let cur = g.mul(norm, ffn_norm)?;
        let [gate, up] = project(&mut g, w, il, ["ffn_gate", "ffn_up"], cur, home)?;
        let gate = g.silu(gate)?;
        let cur = g.mul(gate, up)?;
        let [down] = project(&mut g, w, il, ["ffn_down"], cur, home)?;
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
    let norm = g.rms_norm(cur, c.rms_eps)?;
    let out_norm = w.input(&mut g, "output_norm.weight")?;
    let cur = g.mul(norm, out_norm)?;
    let logits = if c.tied_output {
        g.mul_mat(tok_embd, cur)?
    } else {
        let home = w.home("output_norm.weight")?;
        products(&mut g, w, &["output.weight".to_string()], cur, home)?[0]
    };
    g.set_name(logits, "result_output")?;
    g.set_output(logits)?;
    Ok(StepGraph {
        graph: g,
        tokens,
        positions,
        logits,
    })
}
