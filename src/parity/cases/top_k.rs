//! The device sampler's cases: top-k over chunks of a vocabulary-sized row
//! (ties, NaN, both zeros, infinities, a last chunk shorter than k), the
//! merge of chunks' pairs, a router's rows of experts, and draws through the whole chain for settings
//! and uniform draws that pick near the front, the middle and the end.

use crate::parity::{Case, CaseBuilder};
use crate::{DType, Result};

/// Indices are exact or the token differs.
const EXACT: f64 = 0.0;

#[derive(Clone, Copy, PartialEq)]
enum Values {
    Uniform,
    /// Eight distinct values, so every chunk holds ties.
    Ties,
    /// NaN, +0/-0 and infinities among the values.
    Special,
}

fn row(b: &mut CaseBuilder, n: usize, values: Values) -> Result<crate::graph::TensorId> {
    let a = b.uniform(DType::F32, &[n, 1], -4.0, 4.0)?;
    match values {
        Values::Uniform => {}
        Values::Ties => {
            let v = (0..n).map(|_| b.rng.below(8) as f32 * 0.5).collect();
            b.push_f32(a, v);
        }
        Values::Special => {
            let special = [f32::NAN, 0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, 4.0];
            let v = (0..n)
                .map(|i| match b.rng.below(4) {
                    0 => special[i % special.len()],
                    _ => b.rng.below(3) as f32 - 1.0,
                })
                .collect();
            b.push_f32(a, v);
        }
    }
    Ok(a)
}

fn top_k(
    cases: &mut Vec<Case>,
    n: usize,
    k: usize,
    chunk: usize,
    values: Values,
    merged: bool,
) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 2100);
    let a = row(&mut b, n, values)?;
    let mut out = b.g.top_k(a, k, chunk, false)?;
    if merged {
        out = b.g.top_k(out, k, chunk, true)?;
    }
    let v = match values {
        Values::Uniform => "",
        Values::Ties => ",ties",
        Values::Special => ",special",
    };
    let m = if merged { ",merged" } else { "" };
    let name = format!("TOP_K(type=f32,ne=[{n},1,1,1],k={k},chunk={chunk}{v}{m})");
    cases.push(b.case("top_k", name, out, EXACT));
    Ok(())
}

/// A mixture-of-experts router's choice: the `k` best of each row of
/// `[n_expert, tokens]`, indices within the row.
fn router(cases: &mut Vec<Case>, n_expert: usize, tokens: usize, k: usize) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 2300);
    let a = b.uniform(DType::F32, &[n_expert, tokens], -4.0, 4.0)?;
    let out = b.g.top_k(a, k, n_expert, false)?;
    let name = format!("TOP_K(type=f32,ne=[{n_expert},{tokens},1,1],k={k},rows)");
    cases.push(b.case("top_k", name, out, EXACT));
    Ok(())
}

/// The whole device sampler on a row of `n` logits: settings are
/// temperature, top-p, min-p and the uniform draw.
fn sample(cases: &mut Vec<Case>, n: usize, k: usize, settings: [f32; 4]) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 2200);
    let logits = b.uniform(DType::F32, &[n, 1], -2.0, 2.0)?;
    let s = b.uniform(DType::F32, &[4], 0.0, 1.0)?;
    let [temp, top_p, min_p, r] = settings;
    let ln_min_p = if min_p > 0.0 {
        min_p.ln()
    } else {
        f32::NEG_INFINITY
    };
    b.push_f32(s, vec![temp, top_p, ln_min_p, r]);
    let dst = b.indices(&[1], 1)?;
    let out = b.g.sample_into(logits, k, s, dst)?;
    let name = format!(
        "SAMPLE_TOP_K(type=f32,ne=[{n},1,1,1],k={k},temp={temp},top_p={top_p},min_p={min_p},r={r})"
    );
    cases.push(b.case("sample_top_k", name, out, EXACT));
    Ok(())
}

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    top_k(&mut cases, 49152, 40, 4096, Values::Uniform, false)?;
    top_k(&mut cases, 49152, 40, 4096, Values::Uniform, true)?;
    top_k(&mut cases, 4100, 40, 4096, Values::Uniform, true)?;
    top_k(&mut cases, 3000, 64, 1024, Values::Ties, true)?;
    top_k(&mut cases, 1000, 8, 256, Values::Special, true)?;
    top_k(&mut cases, 5, 3, 4096, Values::Uniform, false)?;
    router(&mut cases, 8, 7, 2)?;
    router(&mut cases, 128, 33, 8)?;
    for settings in [
        [0.8, 0.95, 0.05, 0.5],
        [0.8, 0.95, 0.05, 0.0],
        [0.8, 0.95, 0.05, 0.999],
        [1.5, 1.0, 0.0, 0.3],
        [0.1, 0.5, 0.2, 0.7],
    ] {
        sample(&mut cases, 49152, 40, settings)?;
    }
    sample(&mut cases, 262144, 64, [0.8, 0.95, 0.05, 0.25])?;
    sample(&mut cases, 7, 1, [0.8, 0.95, 0.05, 0.25])?;
    Ok(cases)
}
