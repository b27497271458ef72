//! flash_attn_ext cases (llama.cpp's FLASH_ATTN_EXT without ALiBi, softcap
//! or sinks): single-token decode and prompt shapes, GQA ratios 1, 3, 4 and
//! 8, key counts that are not multiples of the kernel's 128-key tile, f16
//! and f32 K/V, with and without a causal mask, prompts of query counts
//! between the tiled kernel's tiles, and V read through a
//! transposed view as the model's V cache stores it. Decode shapes with
//! more than one tile of keys split them over workgroups on a GPU; the
//! padded ones mask the keys past a position, as the model's cache padding
//! does, so whole splits see nothing.

use crate::parity::{Case, CaseBuilder, NMSE_MUL_MAT};
use crate::{DType, Result};

/// Every case's shape, in order.
fn shapes() -> Vec<Attention> {
    let mut shapes = Vec::new();
    // Keys visible to the last query (the rest are padding) when masked.
    for (d, n_head, n_head_kv, n_kv, n_q, visible) in [
        (64, 9, 3, 256, 1, 256),
        (64, 4, 4, 77, 1, 77),
        (128, 32, 8, 300, 1, 300),
        (64, 8, 1, 129, 3, 129),
        (128, 4, 1, 64, 32, 64),
        (256, 4, 1, 200, 2, 200),
        (64, 9, 3, 2048, 1, 700),
        (128, 32, 8, 1024, 2, 1000),
        // Prompts (the tiled kernel on a GPU): query and key counts past
        // and between its tiles, head sizes below its largest, and key
        // tiles no query sees.
        (64, 6, 2, 100, 37, 100),
        (128, 8, 8, 300, 70, 300),
        (80, 4, 1, 45, 9, 45),
        (64, 4, 4, 256, 20, 90),
        // A decode step early in a padded cache: one split, a tile partly
        // seen and one no query sees.
        (64, 9, 3, 256, 1, 70),
    ] {
        for kv_type in [DType::F16, DType::F32] {
            for (masked, v_transposed) in [(true, true), (false, false)] {
                let shape = Attention {
                    d,
                    n_head,
                    n_head_kv,
                    n_kv,
                    n_q,
                    visible: masked.then_some(visible),
                    kv_type,
                    v_transposed,
                };
                shapes.push(shape);
            }
        }
    }
    shapes
}

pub fn cases() -> Result<Vec<Case>> {
    let seeds = 2300..;
    shapes()
        .into_iter()
        .zip(seeds)
        .map(|(s, seed)| case(s, seed))
        .collect()
}

/// Every fifth case (decode and prompt shapes, GQA 1 to 8, f16 and f32
/// K/V, masked or not) beside the unfused attention it replaces on the
/// same inputs: K^T Q as mul_mat, soft_max with the mask and scale, V times
/// the weights as mul_mat, permuted to flash attention's [d, heads,
/// queries].
pub fn unfused_pairs() -> Result<Vec<(Case, Case)>> {
    let seeds = 2300..;
    shapes()
        .into_iter()
        .zip(seeds)
        .step_by(5)
        .map(|(s, seed)| Ok((build(s, seed, false)?, build(s, seed, true)?)))
        .collect()
}

/// Decode steps of the 135M and 8B shapes over long caches, as the model
/// runs them (f16 K, V through a transposed view, a mask), for
/// `backend_ops --mode perf` (keys split over workgroups or not); only
/// those whose name is `wanted` are built.
pub fn perf_cases(wanted: &dyn Fn(&str) -> bool) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (d, n_head, n_head_kv) in [(64, 9, 3), (128, 32, 8)] {
        for n_kv in [512, 2048, 8192, 32768] {
            let shape = Attention {
                d,
                n_head,
                n_head_kv,
                n_kv,
                n_q: 1,
                visible: Some(n_kv),
                kv_type: DType::F16,
                v_transposed: true,
            };
            if wanted(&shape.name()) {
                cases.push(case(shape, 2400 + n_kv as u64)?);
            }
        }
    }
    Ok(cases)
}

#[derive(Clone, Copy)]
struct Attention {
    d: usize,
    n_head: usize,
    n_head_kv: usize,
    n_kv: usize,
    n_q: usize,
    /// With a causal mask: the keys the last query sees.
    visible: Option<usize>,
    kv_type: DType,
    v_transposed: bool,
}

impl Attention {
    fn op(&self, unfused: bool) -> &'static str {
        if unfused {
            "attention_unfused"
        } else {
            "flash_attn_ext"
        }
    }

    /// The case's name, llama.cpp's (the unfused pair's too, under its own
    /// op).
    fn name(&self) -> String {
        let padded = match self.visible {
            Some(visible) if visible < self.n_kv => format!(",visible={visible}"),
            _ => String::new(),
        };
        format!(
            "FLASH_ATTN_EXT(hsk={},nh={},nr={},kv={},nb={},mask={},type_KV={},v_transposed={}{padded})",
            self.d,
            self.n_head,
            self.n_head / self.n_head_kv,
            self.n_kv,
            self.n_q,
            u8::from(self.visible.is_some()),
            self.kv_type,
            u8::from(self.v_transposed)
        )
    }
}

fn case(s: Attention, seed: u64) -> Result<Case> {
    build(s, seed, false)
}

/// The case of `s`: flash attention, or (`unfused`) the same attention of
/// the same inputs as mul_mat, soft_max and mul_mat.
fn build(s: Attention, seed: u64, unfused: bool) -> Result<Case> {
    let Attention {
        d,
        n_head,
        n_head_kv,
        n_kv,
        n_q,
        visible,
        kv_type,
        v_transposed,
    } = s;
    let mut b = CaseBuilder::new(seed);
    let q = b.uniform(DType::F32, &[d, n_q, n_head], -1.0, 1.0)?;
    let k = b.uniform(kv_type, &[d, n_kv, n_head_kv], -1.0, 1.0)?;
    let v = if v_transposed {
        // Stored [n_kv, d, heads]; read as [d, n_kv, heads].
        let stored = b.uniform(kv_type, &[n_kv, d, n_head_kv], -1.0, 1.0)?;
        b.g.permute(stored, [1, 0, 2, 3])?
    } else {
        b.uniform(kv_type, &[d, n_kv, n_head_kv], -1.0, 1.0)?
    };
    let mask = match visible {
        Some(visible) => {
            // Query i sees the keys up to visible - n_q + i (causal).
            let id = b.g.input("mask", DType::F32, &[n_kv, n_q])?;
            let values = (0..n_q)
                .flat_map(|i| {
                    (0..n_kv).map(move |j| {
                        if j + n_q <= visible + i {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                })
                .collect();
            b.push_f32(id, values);
            Some(id)
        }
        None => None,
    };
    let scale = 1.0 / (d as f32).sqrt();
    let out = if unfused {
        let kq = b.g.mul_mat(k, q)?;
        let weights = b.g.soft_max(kq, mask, scale)?;
        // V as rows of keys: [n_kv, d, heads].
        let v_rows = b.g.permute(v, [1, 0, 2, 3])?;
        let kqv = b.g.mul_mat(v_rows, weights)?;
        let heads_first = b.g.permute(kqv, [0, 2, 1, 3])?;
        b.g.cont(heads_first)?
    } else {
        b.g.flash_attn(q, k, v, mask, scale)?
    };
    Ok(b.case(s.op(unfused), s.name(), out, NMSE_MUL_MAT))
}
