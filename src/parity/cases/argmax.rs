//! argmax cases (llama.cpp's ARGMAX): rows shorter and longer than a
//! workgroup, a vocabulary-sized row, rows full of ties (the lowest index
//! must win on every device), a strided input, and the result written into
//! an existing tensor as greedy decoding on the device does.

use crate::parity::{Case, CaseBuilder};
use crate::{DType, Result};

/// An exact result: indices either match or the token differs.
const EXACT: f64 = 0.0;

#[derive(Clone, Copy, PartialEq)]
enum Values {
    Uniform,
    /// Four distinct values only, so most rows hold their maximum many times.
    Ties,
    /// Every other column of a twice-as-wide tensor.
    Strided,
    /// Written into an i32 input rather than a new tensor.
    Into,
}

fn argmax(cases: &mut Vec<Case>, ne: [usize; 2], values: Values) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 1900);
    let a = match values {
        Values::Strided => {
            let big = b.uniform(DType::F32, &[ne[0] * 2, ne[1]], -1.0, 1.0)?;
            let nb = b.g.layout(big).nb;
            b.g.view(big, &ne, &[nb[1]], 0)?
        }
        _ => b.uniform(DType::F32, &ne, -1.0, 1.0)?,
    };
    if values == Values::Ties {
        let v: Vec<f32> = (0..ne[0] * ne[1]).map(|_| b.rng.below(4) as f32).collect();
        b.push_f32(a, v);
    }
    let out = match values {
        Values::Into => {
            let dst = b.indices(&[ne[1]], 1)?;
            b.g.argmax_into(a, dst)?
        }
        _ => b.g.argmax(a)?,
    };
    let v = match values {
        Values::Uniform => "",
        Values::Ties => ",ties",
        Values::Strided => ",v=1",
        Values::Into => ",into",
    };
    let name = format!("ARGMAX(type=f32,ne=[{},{},1,1]{v})", ne[0], ne[1]);
    cases.push(b.case("argmax", name, out, EXACT));
    Ok(())
}

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for ne in [[32, 10], [1, 4], [1000, 7], [49152, 1]] {
        argmax(&mut cases, ne, Values::Uniform)?;
    }
    argmax(&mut cases, [300, 8], Values::Ties)?;
    argmax(&mut cases, [257, 5], Values::Strided)?;
    argmax(&mut cases, [2000, 1], Values::Into)?;
    Ok(cases)
}
