//! rope cases: normal and neox, f32 and f16, full and partial rotation,
//! with and without YaRN and frequency factors, contiguous and strided
//! (`v=1`) inputs; positions are `rand() % 512` and factors in [0.9, 1.1]
//! as in test-backend-ops.

use crate::graph::{RopeMode, RopeParams};
use crate::parity::{Case, CaseBuilder, NMSE_DEFAULT};
use crate::{DType, Result};

/// What a case varies besides type and shape.
#[derive(Clone, Copy)]
struct Variant {
    mode: RopeMode,
    yarn: bool,
    /// A window of a larger tensor (`v=1`).
    strided: bool,
    /// Frequency factors (`ff=1`).
    factors: bool,
}

fn rope(cases: &mut Vec<Case>, t: DType, ne: [usize; 4], n_dims: usize, v: Variant) -> Result<()> {
    let Variant {
        mode,
        yarn,
        strided,
        factors,
    } = v;
    let mut b = CaseBuilder::new(cases.len() as u64 + 900);
    let a = if strided {
        // A view into a tensor larger in dims 0-2, as test-backend-ops' v=1.
        let big = b.uniform(t, &[ne[0] * 2, ne[1] * 4, ne[2] * 3, ne[3]], -1.0, 1.0)?;
        let nb = b.g.layout(big).nb;
        b.g.view(big, &ne, &nb[1..], 0)?
    } else {
        b.uniform(t, &ne, -1.0, 1.0)?
    };
    let pos = b.indices(&[ne[2]], 512)?;
    let mut p = RopeParams::new(mode, n_dims, 10000.0);
    // llama's fs = 1.4245 is a context extension, freq_scale = 1 / fs.
    let (fs, ef, af) = if yarn {
        (1.4245, 0.7465, 1.4245)
    } else {
        (1.0, 0.0, 1.0)
    };
    (p.freq_scale, p.ext_factor, p.attn_factor, p.n_ctx_orig) = (1.0 / fs, ef, af, 512);
    let ff = match factors {
        true => Some(b.uniform(DType::F32, &[ne[0] / 2], 0.9, 1.1)?),
        false => None,
    };
    let out = b.g.rope_ext(a, pos, ff, p)?;
    let m = match mode {
        RopeMode::Normal => 0,
        RopeMode::Neox => 2,
    };
    let name = format!(
        "ROPE(type={t},ne_a={ne:?},n_dims={n_dims},mode={m},n_ctx=512,fs={fs},ef={ef},af={af},ff={},v={})",
        factors as u8, strided as u8
    );
    cases.push(b.case("rope", name, out, NMSE_DEFAULT));
    Ok(())
}

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for t in [DType::F32, DType::F16] {
        for mode in [RopeMode::Normal, RopeMode::Neox] {
            for yarn in [false, true] {
                let v = Variant {
                    mode,
                    yarn,
                    strided: false,
                    factors: false,
                };
                let strided = Variant { strided: true, ..v };
                let factors = Variant { factors: true, ..v };
                for (ne, n_dims) in [
                    ([128, 32, 2, 1], 128),
                    ([64, 128, 2, 1], 64),
                    ([64, 128, 2, 1], 32),
                    ([80, 32, 2, 1], 32),
                    ([128, 12, 2, 1], 128),
                    ([16, 16, 64, 1], 16),
                ] {
                    rope(&mut cases, t, ne, n_dims, v)?;
                }
                rope(&mut cases, t, [128, 32, 2, 1], 128, strided)?;
                rope(&mut cases, t, [64, 8, 3, 2], 32, strided)?;
                rope(&mut cases, t, [128, 12, 2, 1], 128, factors)?;
                let both = Variant {
                    factors: true,
                    ..strided
                };
                rope(&mut cases, t, [64, 8, 3, 2], 32, both)?;
            }
        }
    }
    Ok(cases)
}
