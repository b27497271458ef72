//! One builder per op: the graph test-backend-ops builds for a case string
//! (shapes in ggml order, views, permutations, value ranges and limits).

use super::parse::CaseString;
use super::Skip;
use crate::graph::{RopeMode, RopeParams, TensorId};
use crate::parity::{Case, CaseBuilder, NMSE_DEFAULT, NMSE_MUL_MAT, NMSE_SOFT_MAX};
use crate::DType;

type Built = Result<Case, Skip>;

/// The case for `s`, seeded with `seed`.
pub fn build(s: &CaseString, seed: u64) -> Built {
    let b = CaseBuilder::new(seed);
    match s.op {
        "ADD" => bin_bcast(s, b, "add"),
        "MUL" => bin_bcast(s, b, "mul"),
        "SCALE" => scale(s, b),
        "SILU" => unary(s, b, "silu"),
        "RELU" => unary(s, b, "relu"),
        "GELU" => unary(s, b, "gelu"),
        "SOFT_MAX" => soft_max(s, b),
        "NORM" => norm(s, b, "norm"),
        "RMS_NORM" => norm(s, b, "rms_norm"),
        "DIAG_MASK_INF" => diag_mask_inf(s, b),
        "MUL_MAT" => mul_mat(s, b),
        "GET_ROWS" => get_rows(s, b),
        "ROPE" => rope(s, b),
        "CPY" => cpy(s, b),
        "CONT" => cont(s, b),
        op => Err(Skip::Unsupported(format!("op {op}"))),
    }
}

/// The case, named by its case string. A strided result (a copy into a
/// permuted destination, an in-place rope of a window) is compared through
/// a contiguous copy of it, which is exact: tensors are read whole.
fn finish(
    s: &CaseString,
    mut b: CaseBuilder,
    op: &'static str,
    out: TensorId,
    limit: f64,
) -> Built {
    let out = if b.g.layout(out).is_contiguous() {
        out
    } else {
        b.g.cont(out)?
    };
    Ok(b.case(op, s.text.to_string(), out, limit))
}

/// ggml_permute's order as printed (`[0,0,0,0]` is "no permutation").
fn permutation(s: &CaseString, key: &str) -> Result<Option<[usize; 4]>, Skip> {
    let p = s.dims::<4>(key)?;
    Ok((p != [0; 4]).then_some(p))
}

/// ADD and MUL: `a` `[ne * nr]` with `b` `[ne]` repeated over it; `b` stored
/// permuted (`perm1`), or both as overlapping views of one tensor
/// (`src_overlap`).
fn bin_bcast(s: &CaseString, mut b: CaseBuilder, op: &'static str) -> Built {
    let t = s.dtype("type")?;
    let tb = match s.maybe("type_b") {
        Some(_) => s.dtype("type_b")?,
        None => t,
    };
    let (ne, nr) = (s.dims::<4>("ne")?, s.dims::<4>("nr")?);
    if s.num::<usize>("nf")? != 1 {
        return Err(Skip::Unsupported("chains of fused adds".into()));
    }
    let (lo, hi) = if op == "mul" { (0.9, 1.1) } else { (-1.0, 1.0) };
    let (x, y) = if s.flag("src_overlap")? {
        // Both operands are windows of one tensor, a third of dim 3 apart.
        let a = b.uniform(t, &ne, lo, hi)?;
        let (q, nb) = (ne[3] / 3, b.g.layout(a).nb);
        let shape = [ne[0], ne[1], ne[2], 2 * q];
        let x = b.g.view(a, &shape, &nb[1..], 0)?;
        let y = b.g.view(a, &shape, &nb[1..], q * nb[3])?;
        (x, y)
    } else {
        let big: Vec<usize> = (0..4).map(|i| ne[i] * nr[i]).collect();
        let x = b.uniform(t, &big, lo, hi)?;
        let y = if s.flag("perm1")? {
            let stored = b.uniform(tb, &[ne[1], ne[2], ne[0], ne[3]], lo, hi)?;
            b.g.permute(stored, [1, 2, 0, 3])?
        } else {
            b.uniform(tb, &ne, lo, hi)?
        };
        (x, y)
    };
    let out = if op == "mul" {
        b.g.mul(x, y)?
    } else {
        b.g.add(x, y)?
    };
    finish(s, b, op, out, NMSE_DEFAULT)
}

fn scale(s: &CaseString, mut b: CaseBuilder) -> Built {
    let t = s.dtype("type")?;
    if s.num::<f32>("bias")? != 0.0 {
        return Err(Skip::Unsupported("scale with a bias".into()));
    }
    s.off("inplace", "in-place scale")?;
    let a = b.uniform(t, &s.dims::<4>("ne")?, -1.0, 1.0)?;
    let out = b.g.scale(a, s.num("scale")?)?;
    finish(s, b, "scale", out, NMSE_DEFAULT)
}

/// A view of every dim of `ne` inside a tensor `grow` times as large.
fn window(
    b: &mut CaseBuilder,
    t: DType,
    ne: [usize; 4],
    grow: [usize; 4],
    range: (f32, f32),
) -> Result<TensorId, Skip> {
    let big: Vec<usize> = (0..4).map(|i| ne[i] * grow[i]).collect();
    let parent = b.uniform(t, &big, range.0, range.1)?;
    let nb = b.g.layout(parent).nb;
    Ok(b.g.view(parent, &ne, &nb[1..], 0)?)
}

fn unary(s: &CaseString, mut b: CaseBuilder, op: &'static str) -> Built {
    let t = s.dtype("type")?;
    let ne = s.dims::<4>("ne_a")?;
    // A wide range on purpose, to catch overflow.
    let range = (-150.0, 150.0);
    let a = if s.flag("v")? {
        window(&mut b, t, ne, [3, 2, 5, 4], range)?
    } else {
        b.uniform(t, &ne, range.0, range.1)?
    };
    let out = match op {
        "silu" => b.g.silu(a)?,
        "relu" => b.g.relu(a)?,
        _ => b.g.gelu(a)?,
    };
    finish(s, b, op, out, NMSE_DEFAULT)
}

/// soft_max_ext: `a` `[ne0, ne1, ne2 * nr23[0], ne3 * nr23[1]]`, a mask of
/// `ne` broadcast over dims 2 and 3.
fn soft_max(s: &CaseString, mut b: CaseBuilder) -> Built {
    let ne = s.dims::<4>("ne")?;
    let nr23 = s.dims::<2>("nr23")?;
    s.off("sinks", "attention sinks")?;
    s.off("inplace", "in-place soft_max")?;
    if s.num::<f32>("max_bias")? != 0.0 {
        return Err(Skip::Unsupported("ALiBi (max_bias)".into()));
    }
    let a = b.uniform(
        DType::F32,
        &[ne[0], ne[1], ne[2] * nr23[0], ne[3] * nr23[1]],
        -1.0,
        1.0,
    )?;
    let mask = if s.flag("mask")? {
        Some(b.uniform(s.dtype("m_prec")?, &ne, -1.0, 1.0)?)
    } else {
        None
    };
    let out = b.g.soft_max(a, mask, s.num("scale")?)?;
    finish(s, b, "soft_max", out, NMSE_SOFT_MAX)
}

/// norm and rms_norm over rows of `ne`, rows strided (`noncontig_rows`) or
/// a window of every dim halved (`v`).
fn norm(s: &CaseString, mut b: CaseBuilder, op: &'static str) -> Built {
    let ne = s.dims::<4>("ne")?;
    s.off("inplace", "in-place rms_norm")?;
    let range = if op == "rms_norm" {
        (-10.0, 10.0)
    } else {
        (-1.0, 1.0)
    };
    let mut a = if s.maybe("noncontig_rows") == Some("1") {
        let stored = b.uniform(DType::F32, &[ne[1], ne[0], ne[2], ne[3]], range.0, range.1)?;
        b.g.permute(stored, [1, 0, 2, 3])?
    } else {
        b.uniform(DType::F32, &ne, range.0, range.1)?
    };
    if s.flag("v")? {
        let nb = b.g.layout(a).nb;
        a = b.g.view(a, &ne.map(|n| n / 2), &nb[1..], 0)?;
    }
    let eps = s.num("eps")?;
    let out = if op == "rms_norm" {
        b.g.rms_norm(a, eps)?
    } else {
        b.g.norm(a, eps)?
    };
    finish(s, b, op, out, NMSE_DEFAULT)
}

fn diag_mask_inf(s: &CaseString, mut b: CaseBuilder) -> Built {
    let a = b.uniform(DType::F32, &s.dims::<4>("ne")?, -1.0, 1.0)?;
    let out = b.g.diag_mask_inf(a, s.num("n_past")?)?;
    finish(s, b, "diag_mask_inf", out, NMSE_DEFAULT)
}

/// `a` `[k, m, bs0, bs1]` times `b` `[k, n, bs0 * nr0, bs1 * nr1]`: both
/// stored permuted (`per`), as windows of longer rows (`k_v`), `a`'s
/// batches spaced further apart (`m_v`, `pad` bytes), or both windows of
/// one tensor (`src_overlap`).
fn mul_mat(s: &CaseString, mut b: CaseBuilder) -> Built {
    let (ta, tb) = (s.dtype("type_a")?, s.dtype("type_b")?);
    let (m, n, k): (usize, usize, usize) = (s.num("m")?, s.num("n")?, s.num("k")?);
    let (bs, nr) = (s.dims::<2>("bs")?, s.dims::<2>("nr")?);
    let per = s.dims::<4>("per")?;
    let (k_v, m_v, pad): (usize, usize, usize) = (s.num("k_v")?, s.num("m_v")?, s.num("pad")?);
    if s.num::<usize>("o")? != 1 {
        return Err(Skip::Unsupported("sums of several products".into()));
    }
    let la = [k, m, bs[0], bs[1]];
    let lb = [k, n, bs[0] * nr[0], bs[1] * nr[1]];
    let (x, y) = if per != [0, 1, 2, 3] {
        // Stored with the dims in `per`'s order, permuted back.
        let mut stored = |t, l: [usize; 4]| -> Result<TensorId, Skip> {
            let phys = per.map(|p| l[p]);
            let id = b.uniform(t, &phys, -1.0, 1.0)?;
            Ok(b.g.permute(id, per)?)
        };
        (stored(ta, la)?, stored(tb, lb)?)
    } else if s.flag("src_overlap")? {
        if ta != tb {
            return Err(Skip::Malformed("src_overlap with two types".into()));
        }
        let base = b.uniform(ta, &[2 * k, m.max(n), lb[2], lb[3]], -1.0, 1.0)?;
        let nb = b.g.layout(base).nb;
        let offset = k / ta.block_elems() * ta.block_bytes();
        (
            b.g.view(base, &la, &nb[1..], 0)?,
            b.g.view(base, &lb, &nb[1..], offset)?,
        )
    } else {
        let kp = if k_v > 0 { k_v } else { k };
        let mp = if m_v > 0 {
            m_v + usize::from(pad != 0)
        } else {
            m
        };
        let mut x = b.uniform(ta, &[kp, mp, bs[0], bs[1]], -1.0, 1.0)?;
        let mut y = b.uniform(tb, &[kp, lb[1], lb[2], lb[3]], -1.0, 1.0)?;
        if k_v > 0 {
            let (na, nb) = (b.g.layout(x).nb, b.g.layout(y).nb);
            x = b.g.view(x, &la, &na[1..], 0)?;
            y = b.g.view(y, &lb, &nb[1..], 0)?;
        }
        if m_v > 0 {
            let nb = b.g.layout(x).nb;
            x = b.g.view(x, &la, &[nb[1], m_v * nb[1] + pad, nb[3]], 0)?;
        }
        (x, y)
    };
    let out = b.g.mul_mat(x, y)?;
    finish(s, b, "mul_mat", out, NMSE_MUL_MAT)
}

/// Rows `[r, be1, be2]` of a table `[n, m, be1, be2]`; the table a window
/// of a larger one (`vs0`, `offset_cols`), the indices a strided window
/// (`v`: elements 1..=r/2 of each index row).
fn get_rows(s: &CaseString, mut b: CaseBuilder) -> Built {
    let t = s.dtype("type")?;
    let [n, m, r, be1, be2]: [usize; 5] = [
        s.num("n")?,
        s.num("m")?,
        s.num("r")?,
        s.num("be1")?,
        s.num("be2")?,
    ];
    let table = if s.flag("vs0")? {
        let cols: usize = s.num("offset_cols")?;
        let padded = b.uniform(t, &[n + cols, m + 3, be1, be2], -1.0, 1.0)?;
        let nb = b.g.layout(padded).nb;
        if !cols.is_multiple_of(t.block_elems()) {
            return Err(Skip::Malformed("offset inside a block".into()));
        }
        let offset = cols / t.block_elems() * nb[0] + 3 * nb[1];
        b.g.view(padded, &[n, m, be1, be2], &nb[1..], offset)?
    } else {
        b.uniform(t, &[n, m, be1, be2], -1.0, 1.0)?
    };
    let idx = if s.flag("v")? {
        let all = b.indices(&[r + 1, be1, be2], m)?;
        let nb = b.g.layout(all).nb;
        b.g.view(all, &[r / 2, be1, be2], &nb[1..3], 4)?
    } else {
        b.indices(&[r, be1, be2], m)?
    };
    let out = b.g.get_rows(table, idx)?;
    finish(s, b, "get_rows", out, NMSE_DEFAULT)
}

/// rope_ext with test-backend-ops' fixed parameters (base 10000, no
/// original context, YaRN betas of 1) at positions `rand() % n_ctx`; the
/// input a window of a larger tensor (`v=1`) or each row's second half
/// (`v=2`).
fn rope(s: &CaseString, mut b: CaseBuilder) -> Built {
    let t = s.dtype("type")?;
    let ne = s.dims::<4>("ne_a")?;
    let mode = match s.num::<u32>("mode")? {
        0 => RopeMode::Normal,
        2 => RopeMode::Neox,
        m => return Err(Skip::Unsupported(format!("rope mode {m} (multi-section)"))),
    };
    s.off("n_offs", "a rotated window offset")?;
    let a = match s.num::<u32>("v")? {
        0 => b.uniform(t, &ne, -1.0, 1.0)?,
        1 => window(&mut b, t, ne, [2, 4, 3, 1], (-1.0, 1.0))?,
        2 => {
            let parent = b.uniform(t, &[2 * ne[0], ne[1], ne[2], ne[3]], -1.0, 1.0)?;
            let nb = b.g.layout(parent).nb;
            b.g.view(parent, &ne, &nb[1..], ne[0] * nb[0])?
        }
        v => return Err(Skip::Malformed(format!("v={v}"))),
    };
    let pos = b.indices(&[ne[2]], s.num("n_ctx")?)?;
    let p = RopeParams {
        freq_scale: s.num("fs")?,
        ext_factor: s.num("ef")?,
        attn_factor: s.num("af")?,
        beta_fast: 1.0,
        beta_slow: 1.0,
        n_ctx_orig: 0,
        ..RopeParams::new(mode, s.num("n_dims")?, 10000.0)
    };
    // Frequency factors in [0.9, 1.1], one per pair of a row.
    let ff = match s.flag("ff")? {
        true => Some(b.uniform(DType::F32, &[ne[0] / 2], 0.9, 1.1)?),
        false => None,
    };
    let out = if s.flag("inplace")? {
        b.g.rope_ext_inplace(a, pos, ff, p)?
    } else {
        b.g.rope_ext(a, pos, ff, p)?
    };
    finish(s, b, "rope", out, NMSE_DEFAULT)
}

/// cpy from a permuted or transposed source into a permuted, reshaped or
/// windowed destination: elements in logical order, converted.
fn cpy(s: &CaseString, mut b: CaseBuilder) -> Built {
    let (ts, td) = (s.dtype("type_src")?, s.dtype("type_dst")?);
    let range = (-150.0, 150.0);
    let mut src = b.uniform(ts, &s.dims::<4>("ne_src")?, range.0, range.1)?;
    if let Some(p) = permutation(s, "permute_src")? {
        src = b.g.permute(src, p)?;
    }
    if s.flag("_src_transpose")? {
        src = b.g.transpose(src)?;
    }
    let ne_dst = match s.maybe("ne_dst") {
        Some(_) => s.dims::<4>("ne_dst")?,
        None => b.g.layout(src).ne,
    };
    let dst = if s.maybe("dst_alloc").is_some() {
        // A window of a larger destination.
        let buffer = b.uniform(td, &s.dims::<4>("dst_alloc")?, range.0, range.1)?;
        let nb = b.g.layout(buffer).nb;
        b.g.view(buffer, &ne_dst, &nb[1..], 0)?
    } else if let Some(p) = permutation(s, "permute_dst")? {
        // A tensor of the source's shape, written through a permuted view.
        let buffer = b.uniform(td, &ne_dst, range.0, range.1)?;
        b.g.permute(buffer, p)?
    } else {
        b.uniform(td, &ne_dst, range.0, range.1)?
    };
    let copied = b.g.cpy(src, dst)?;
    let limit = if ts == td { 0.0 } else { 1e-6 };
    finish(s, b, "cpy", copied, limit)
}

/// cont of a transposed, permuted or sliced (`use_view_slice`: one row's
/// worth per matrix, `ne1 - 1` elements in) tensor.
fn cont(s: &CaseString, mut b: CaseBuilder) -> Built {
    let t = s.dtype("type")?;
    let ne = s.dims::<4>("ne")?;
    let src = b.uniform(t, &ne, -1.0, 1.0)?;
    let view = if s.flag("use_view_slice")? {
        let nb = b.g.layout(src).nb;
        b.g.view(
            src,
            &[ne[0], 1, ne[2], ne[3]],
            &nb[1..],
            nb[0] * (ne[1] - 1),
        )?
    } else if let Some(p) = permutation(s, "permute")? {
        b.g.permute(src, p)?
    } else {
        b.g.transpose(src)?
    };
    let out = b.g.cont(view)?;
    finish(s, b, "cont", out, NMSE_DEFAULT)
}
