//! Rotary position embedding, normal and neox pairing, with YaRN.

use super::{parallel_fill, Src};
use crate::graph::{RopeMode, RopeParams};
use crate::{Error, Result};

/// cos and sin of the rotation for the pair starting at even index `i0`,
/// for angle `theta_extrap` (position times the pair's base frequency).
fn yarn_cos_sin(p: &RopeParams, corr: [f32; 2], theta_extrap: f32, i0: usize) -> (f32, f32) {
    let theta_interp = p.freq_scale * theta_extrap;
    let mut theta = theta_interp;
    if p.ext_factor != 0.0 {
        let y = ((i0 / 2) as f32 - corr[0]) / (corr[1] - corr[0]).max(0.001);
        let ramp_mix = (1.0 - y.clamp(0.0, 1.0)) * p.ext_factor;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
    }
    let mscale = p.yarn_mscale();
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// Rotates the first `n_dims` values of each row of `a` `[d, heads, tokens, B3]`
/// by angles `pos[token] * freq_base^(-i0 / n_dims) / factors[i0 / 2]`
/// (factors of 1 where none are given); the rest pass through. Tokens are
/// split over up to `threads` workers; a token's rotations are computed
/// once for all its heads.
pub fn rope(
    a: Src,
    pos: Src,
    factors: Option<Src>,
    p: &RopeParams,
    threads: usize,
) -> Result<Vec<f32>> {
    let [n0, n1, n2, _] = a.ne();
    if pos.ne()[0] < n2 {
        return Err(Error::shape(format!(
            "rope of {n2} tokens has {} positions",
            pos.ne()[0]
        )));
    }
    let mut out = vec![0.0f32; a.layout.n_elements()];
    if n0 == 0 || n1 == 0 {
        return Ok(out);
    }
    let factors: Vec<f32> = match factors {
        Some(f) => (0..p.n_dims / 2).map(|i| f.f32_at([i, 0, 0, 0])).collect(),
        None => vec![1.0; p.n_dims / 2],
    };
    let corr = p.yarn_corr_dims();
    let half = p.n_dims / 2;
    parallel_fill(&mut out, n0 * n1, threads, |first, part| {
        let mut rotations = Vec::with_capacity(p.n_dims.div_ceil(2));
        let mut row = vec![0.0f32; n0];
        for (t, token) in part.chunks_exact_mut(n0 * n1).enumerate() {
            let (i2, i3) = ((first + t) % n2, (first + t) / n2);
            let position = pos.i32_at([i2, 0, 0, 0]) as f32;
            rotations.clear();
            rotations.extend((0..p.n_dims).step_by(2).map(|i0| {
                let theta =
                    position * p.freq_base.powf(-(i0 as f32) / p.n_dims as f32) / factors[i0 / 2];
                (i0, yarn_cos_sin(p, corr, theta, i0))
            }));
            for (i1, rotated) in token.chunks_exact_mut(n0).enumerate() {
                a.row_f32(i1, i2, i3, &mut row)?;
                rotated.copy_from_slice(&row);
                for &(i0, (cos, sin)) in &rotations {
                    let (j0, j1) = match p.mode {
                        RopeMode::Normal => (i0, i0 + 1),
                        RopeMode::Neox => (i0 / 2, i0 / 2 + half),
                    };
                    let (x0, x1) = (row[j0], row[j1]);
                    rotated[j0] = x0 * cos - x1 * sin;
                    rotated[j1] = x0 * sin + x1 * cos;
                }
            }
        }
        Ok(())
    })?;
    Ok(out)
}
