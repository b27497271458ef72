//! soft_max cases: row lengths around the workgroup size, masks of f32 and
//! f16 broadcast over dims 2 and 3 (nr23), two scales, plus a padded mask
//! with a causal -inf pattern and a strided input.

use crate::parity::{Case, CaseBuilder, Fill, NMSE_SOFT_MAX};
use crate::{DType, Result};

/// How the mask of a case is made.
#[derive(Clone, Copy, PartialEq)]
enum Mask {
    None,
    Random(DType),
    /// -inf above the diagonal (`i0 > i1 + 2`), over 3 rows more than the
    /// logits have, as llama pads its KQ mask.
    Causal(DType),
}

fn soft_max(
    cases: &mut Vec<Case>,
    ne: [usize; 4],
    mask: Mask,
    nr23: [usize; 2],
    scale: f32,
    strided: bool,
) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 800);
    let na = [ne[0], ne[1], ne[2] * nr23[0], ne[3] * nr23[1]];
    let a = if strided {
        let big = b.uniform(DType::F32, &[na[0] * 2, na[1] * 2, na[2], na[3]], -1.0, 1.0)?;
        let nb = b.g.layout(big).nb;
        b.g.view(big, &na, &nb[1..], 0)?
    } else {
        b.uniform(DType::F32, &na, -1.0, 1.0)?
    };
    let m = match mask {
        Mask::None => None,
        Mask::Random(t) => Some(b.uniform(t, &ne, -1.0, 1.0)?),
        Mask::Causal(t) => {
            let rows = ne[1] + 3;
            let id = b.uniform(t, &[ne[0], rows, ne[2], ne[3]], -1.0, 1.0)?;
            if let Some((_, Fill::F32(v))) = b.inputs.last_mut() {
                for (k, x) in v.iter_mut().enumerate() {
                    let (i0, i1) = (k % ne[0], k / ne[0] % rows);
                    if i0 > i1 + 2 {
                        *x = f32::NEG_INFINITY;
                    }
                }
            }
            Some(id)
        }
    };
    let out = b.g.soft_max(a, m, scale)?;
    let (has_mask, prec) = match mask {
        Mask::None => (0, DType::F32),
        Mask::Random(t) => (1, t),
        Mask::Causal(t) => (2, t),
    };
    let name = format!(
        "SOFT_MAX(type=f32,ne={ne:?},mask={has_mask},m_prec={prec},nr23={nr23:?},scale={scale},v={})",
        strided as u8
    );
    cases.push(b.case("soft_max", name, out, NMSE_SOFT_MAX));
    Ok(())
}

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let masks = [
        Mask::None,
        Mask::Random(DType::F32),
        Mask::Random(DType::F16),
    ];
    for ne in [
        [16, 16, 1, 1],
        [15, 15, 1, 1],
        [16, 1024, 1, 1],
        [1023, 15, 1, 1],
        [1024, 16, 1, 1],
        // Past the rows a 256-wide workgroup reads once (four values each).
        [1025, 3, 1, 1],
        [2500, 2, 1, 1],
        [16, 16, 1, 3],
        [16, 2, 32, 1],
    ] {
        for mask in masks {
            for scale in [0.1, 1.0] {
                soft_max(&mut cases, ne, mask, [1, 1], scale, false)?;
            }
        }
    }
    for mask in &masks[1..] {
        for (ne, nr23) in [
            ([16, 16, 1, 1], [3, 1]),
            ([16, 16, 1, 1], [2, 3]),
            ([16, 2, 32, 1], [2, 3]),
        ] {
            soft_max(&mut cases, ne, *mask, nr23, 0.1, false)?;
        }
    }
    for t in [DType::F32, DType::F16] {
        soft_max(
            &mut cases,
            [33, 7, 2, 1],
            Mask::Causal(t),
            [2, 1],
            0.125,
            false,
        )?;
    }
    soft_max(
        &mut cases,
        [300, 5, 3, 1],
        Mask::Random(DType::F16),
        [1, 1],
        1.0,
        true,
    )?;
    soft_max(&mut cases, [300, 5, 3, 1], Mask::None, [1, 1], 1.0, true)?;
    Ok(cases)
}
