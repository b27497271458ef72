//! norm and rms_norm cases.

use crate::parity::{Case, CaseBuilder, NMSE_DEFAULT};
use crate::{DType, Result};

/// The cases: five row lengths, five eps values, contiguous, halved views
/// and permuted (non-contiguous) rows.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for rms in [false, true] {
        let (lo, hi) = if rms { (-10.0, 10.0) } else { (-1.0, 1.0) };
        for n in [64, 1025, 33, 132, 260] {
            for eps in [0.0f32, 1e-6, 1e-4, 0.1, 10.0] {
                for variant in 0..3 {
                    // Keep the suite small: every eps on 64, fewer elsewhere.
                    if n != 64 && eps != 1e-6 && variant != 0 {
                        continue;
                    }
                    let mut b = CaseBuilder::new(cases.len() as u64 + 700);
                    let ne = [n, 5, 4, 3];
                    let a = match variant {
                        0 => b.uniform(DType::F32, &ne, lo, hi)?,
                        1 => {
                            let big = b.uniform(DType::F32, &[2 * n, 10, 8, 6], lo, hi)?;
                            let nb = b.g.layout(big).nb;
                            b.g.view(big, &ne, &nb[1..], 0)?
                        }
                        _ => {
                            let stored = b.uniform(DType::F32, &[5, n, 4, 3], lo, hi)?;
                            b.g.permute(stored, [1, 0, 2, 3])?
                        }
                    };
                    let out = if rms {
                        b.g.rms_norm(a, eps)?
                    } else {
                        b.g.norm(a, eps)?
                    };
                    let op = if rms { "rms_norm" } else { "norm" };
                    let name = format!(
                        "{}(type=f32,ne={ne:?},eps={eps},v={variant})",
                        op.to_uppercase()
                    );
                    cases.push(b.case(op, name, out, NMSE_DEFAULT));
                }
            }
        }
    }
    Ok(cases)
}
