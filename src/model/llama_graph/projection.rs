//! The graph's products with a layer's weight matrices: joined where the
//! weights are stored back to back, cut by rows where a weight is split
//! over devices, with the file's biases added.

use crate::graph::{Graph, TensorId};
use crate::model::weights::Weights;
use crate::{DType, Error, Result};

/// The products `W x (+ b)` of layer `il`'s weights `names` (e.g.
/// `attn_q`) with `x`, plus each weight's bias where the file has one: one
/// product of the weights joined into one matrix when they are stored so,
/// each product a view of its rows of the result (rows `[m, n]`, strided by
/// the joined row); else one product each (see [`products`]).
pub(super) fn project<const N: usize>(
    g: &mut Graph,
    w: &Weights,
    il: usize,
    names: [&str; N],
    x: TensorId,
    home: usize,
) -> Result<[TensorId; N]> {
    let full = names.map(|n| format!("blk.{il}.{n}.weight"));
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    let biases = names.map(|n| format!("blk.{il}.{n}.bias"));
    let bias_refs: Vec<&str> = biases.iter().map(String::as_str).collect();
    let joined = match N {
        1 => None,
        _ => w.joined_input(g, &refs)?,
    };
    let mut biased = false;
    let mut out = match joined {
        None => products(g, w, &full, x, home)?,
        Some(joined) => {
            let mut all = g.mul_mat(joined, x)?;
            // The biases in one add where they too are stored together,
            // so q, k and v stay views of one tensor.
            if biases.iter().all(|b| w.has(b)) {
                if let Some(b) = w.joined_input(g, &bias_refs)? {
                    all = g.add(all, b)?;
                    biased = true;
                }
            }
            let mut rows = [0; N];
            for (r, name) in rows.iter_mut().zip(&full) {
                *r = w.get(name)?.layout.ne[1];
            }
            split_rows(g, all, rows)?.to_vec()
        }
    };
    if !biased {
        for (o, bias) in out.iter_mut().zip(&biases) {
            if w.has(bias) {
                let b = w.input(g, bias)?;
                *o = g.add(*o, b)?;
            }
        }
    }
    out.try_into()
        .map_err(|_| Error::invalid("a projection lost a product"))
}

/// `all` (`[m, n]`, a product whose output rows are stacked matrices')
/// cut into views of consecutive output rows: `[rows[i], n]` each, strided
/// by `all`'s row (q, k and v of a joined or fused projection).
pub(super) fn split_rows<const N: usize>(
    g: &mut Graph,
    all: TensorId,
    rows: [usize; N],
) -> Result<[TensorId; N]> {
    let [_, n, _, _] = g.layout(all).ne;
    let row = g.layout(all).nb[1];
    let f32_bytes = DType::F32.block_bytes();
    let mut first = 0;
    let mut out = [all; N];
    for (o, m) in out.iter_mut().zip(rows) {
        *o = g.view(all, &[m, n], &[row], first * f32_bytes)?;
        first += m;
    }
    Ok(out)
}

/// `W x` for every weight in `names`, all reading `x`. A weight cut by rows
/// (row split mode) is multiplied part by part where each part lives, and
/// the partial products are copied into one tensor on `home`, the backend of
/// the unsplit weights around them. Products away from `home` are built
/// first, so each device runs one split per group and the gathers follow
/// the `home` products.
pub(super) fn products(
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
