//! soft_max with scale and optional broadcast mask.

use super::{parallel_fill, Src};
use crate::{Error, Result};

/// Softmax over each row of `a * scale + mask`, rows split over up to
/// `threads` workers.
pub fn soft_max(a: Src, mask: Option<Src>, scale: f32, threads: usize) -> Result<Vec<f32>> {
    let [n0, n1, n2, _] = a.ne();
    let mask_width = match &mask {
        Some(m) if m.ne()[0] < n0 || m.ne()[1] < n1 => {
            return Err(Error::shape(format!(
                "soft_max of {:?} with a {:?} mask",
                a.ne(),
                m.ne()
            )))
        }
        Some(m) => m.ne()[0],
        None => 0,
    };
    let mut out = vec![0.0f32; a.layout.n_elements()];
    if n0 == 0 {
        return Ok(out);
    }
    parallel_fill(&mut out, n0, threads, |first, part| {
        // The mask's rows are read whole (they may be padded past n0).
        let mut mask_row = vec![0.0f32; mask_width];
        for (r, row) in part.chunks_exact_mut(n0).enumerate() {
            let flat = first + r;
            let (i1, i2, i3) = (flat % n1, flat / n1 % n2, flat / n1 / n2);
            a.row_f32(i1, i2, i3, row)?;
            for v in row.iter_mut() {
                *v *= scale;
            }
            if let Some(m) = &mask {
                let nm = m.ne();
                m.row_f32(i1, i2 % nm[2], i3 % nm[3], &mut mask_row)?;
                for (v, mv) in row.iter_mut().zip(&mask_row) {
                    *v += mv;
                }
            }
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f64;
            for v in row.iter_mut() {
                *v = (*v - max).exp();
                sum += *v as f64;
            }
            let inv = (1.0 / sum) as f32;
            for v in row.iter_mut() {
                *v *= inv;
            }
        }
        Ok(())
    })?;
    Ok(out)
}
