//! The CPU fast path's f16 weights times f32 activations (the KV cache's
//! attention products, f16 model tensors): eight weights at a time through
//! F16C with FMA into independent sums on x86-64 with AVX2, FMA and F16C,
//! else a table conversion into eight partial sums. The conversion is
//! exact either way; only the order of the f32 sums differs from
//! [`crate::quant::dot_row`], the reference, whose per-value conversion
//! and single running sum made it the decode loop's slowest part.

use super::q8_dot::f16_to_f32;
use crate::{Error, Result};

/// Dot product of one row of f16 weights (`bytes`, little-endian, any
/// alignment) with `x`.
pub fn dot(bytes: &[u8], x: &[f32]) -> Result<f32> {
    if bytes.len() != 2 * x.len() {
        return Err(Error::shape(format!(
            "an f16 dot of {} values needs {} bytes, got {}",
            x.len(),
            2 * x.len(),
            bytes.len()
        )));
    }
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
        return Ok(unsafe { avx2::dot(bytes, x) });
    }
    Ok(portable(bytes, x))
}

#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    })
}

fn portable(bytes: &[u8], x: &[f32]) -> f32 {
    let weight = |b: &[u8]| f16_to_f32(half::f16::from_le_bytes([b[0], b[1]]));
    let mut acc = [0.0f32; 8];
    let (w8, x8) = (bytes.chunks_exact(16), x.chunks_exact(8));
    let tail: f32 = w8
        .remainder()
        .chunks_exact(2)
        .zip(x8.remainder())
        .map(|(b, v)| weight(b) * v)
        .sum();
    for (w, v) in w8.zip(x8) {
        for (i, (b, v)) in w.chunks_exact(2).zip(v).enumerate() {
            acc[i] += weight(b) * v;
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// # Safety
/// Every function here needs a CPU with AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub fn dot(bytes: &[u8], x: &[f32]) -> f32 {
        // Four sums, so four FMAs are in flight.
        let mut acc = [_mm256_setzero_ps(); 4];
        let groups = x.len() / 32;
        for g in 0..groups {
            for (j, a) in acc.iter_mut().enumerate() {
                let i = 32 * g + 8 * j;
                // SAFETY: i + 8 <= x.len() and 2 (i + 8) <= bytes.len()
                // (the caller checked bytes.len() == 2 x.len()); both
                // loads are unaligned.
                let (w, v) = unsafe {
                    (
                        _mm256_cvtph_ps(_mm_loadu_si128(bytes.as_ptr().add(2 * i).cast())),
                        _mm256_loadu_ps(x.as_ptr().add(i)),
                    )
                };
                *a = _mm256_fmadd_ps(w, v, *a);
            }
        }
        let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut lanes = [0.0f32; 8];
        // SAFETY: lanes is 8 writable f32s; the store is unaligned.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        let done = 32 * groups;
        lanes.iter().sum::<f32>() + super::portable(&bytes[2 * done..], &x[done..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dot_row;
    use crate::DType;

    #[test]
    fn matches_the_reference_dot_for_every_length() {
        for n in [0, 1, 7, 8, 31, 32, 33, 64, 100, 576] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 19) as f32 - 9.0) / 7.0).collect();
            let bytes: Vec<u8> = (0..n)
                .flat_map(|i| half::f16::from_f32((i as f32 * 0.37).sin()).to_le_bytes())
                .collect();
            let want = dot_row(DType::F16, &bytes, &x).unwrap();
            let scale = x.iter().map(|v| v.abs()).sum::<f32>().max(1.0);
            for got in [dot(&bytes, &x).unwrap(), portable(&bytes, &x)] {
                assert!((got - want).abs() <= 1e-5 * scale, "n={n}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn unaligned_rows_read_like_aligned_ones() {
        let x = vec![0.5f32; 40];
        let mut buf = [0u8; 81];
        for (i, c) in buf[1..].chunks_exact_mut(2).enumerate() {
            c.copy_from_slice(&half::f16::from_f32(i as f32).to_le_bytes());
        }
        let aligned = buf[1..].to_vec();
        assert_eq!(dot(&buf[1..], &x).unwrap(), dot(&aligned, &x).unwrap());
    }

    #[test]
    fn a_short_row_is_an_error() {
        assert!(dot(&[0u8; 3], &[1.0, 2.0]).is_err());
    }
}
