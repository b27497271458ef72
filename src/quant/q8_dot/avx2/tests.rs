//! The AVX2 loops against the portable ones.

use super::*;
use crate::quant::{quantize_row, BlockQ5_0};
use crate::DType;

fn unpack_q4_0(w: &BlockQ4_0) -> Nibbles<'_> {
    (&w.qs, 0, [w.d, w.d])
}

fn unpack_q5_0(w: &BlockQ5_0) -> Nibbles<'_> {
    (&w.qs, u32::from_le_bytes(w.qh), [w.d, w.d])
}

fn unpack_iq4_nl(w: &BlockIQ4NL) -> Nibbles<'_> {
    (&w.qs, 0, [w.d, w.d])
}

/// Four rows of `B` (k values each) and four columns of activations.
fn tile_inputs<B: bytemuck::Pod>(dtype: DType, k: usize) -> (Vec<Vec<B>>, [Q8Row; 4]) {
    let value = |i: usize, seed: usize| ((i * 7919 + seed * 104729) % 2001) as f32 / 1000.0 - 1.0;
    let rows = (0..4)
        .map(|r| {
            let x: Vec<f32> = (0..k).map(|i| value(i, r)).collect();
            let bytes = quantize_row(dtype, &x).unwrap();
            bytemuck::pod_collect_to_vec(&bytes)
        })
        .collect();
    let cols = std::array::from_fn(|j| {
        let x: Vec<f32> = (0..k).map(|i| value(i, 10 + j) * 3.0).collect();
        let mut q = Q8Row::default();
        q.quantize(&x).unwrap();
        q
    });
    (rows, cols)
}

/// The AVX2 tile (which CPUs with AVX-512 VNNI skip) against the
/// portable loops, for plain, fifth-bit and table codes.
#[test]
fn the_avx2_tile_matches_the_portable_loops() {
    assert!(
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"),
        "the CPU fast path's x86 loops need AVX2, FMA and F16C"
    );
    fn check<B: bytemuck::Pod>(
        dtype: DType,
        tile: impl Fn(&[&[B]; 4], &[Q8Row; 4]) -> [f32; 16],
        portable: fn(&[B], &Q8Row) -> f32,
    ) {
        let (rows, cols) = tile_inputs::<B>(dtype, 128);
        let refs = [&rows[0][..], &rows[1], &rows[2], &rows[3]];
        let got = tile(&refs, &cols);
        for r in 0..4 {
            for j in 0..4 {
                let want = portable(&rows[r], &cols[j]);
                let g = got[4 * r + j];
                assert!(
                    (g - want).abs() <= 1e-4 * want.abs().max(1.0),
                    "{dtype} row {r} column {j}: {g} vs {want}"
                );
            }
        }
    }
    fn unpacked<B, const CODES: u8>(rows: [&[B]; 4], unpack: fn(&B) -> Nibbles<'_>) -> RowQuad {
        let mut quad = RowQuad::default();
        // SAFETY: the CPU has AVX2, FMA and F16C (asserted).
        unsafe { quad.unpack::<B, CODES>(rows, unpack) };
        quad
    }
    // SAFETY (each tile call): the CPU has AVX2, FMA and F16C (asserted).
    check::<BlockQ4_0>(
        DType::Q4_0,
        |rows, cols| {
            let (d, o) =
                unsafe { nibble_tile::<PLAIN>(&unpacked::<_, PLAIN>(*rows, unpack_q4_0), cols) };
            std::array::from_fn(|t| d[t] - 8.0 * o[t])
        },
        super::super::portable::q4_0,
    );
    check::<BlockQ5_0>(
        DType::Q5_0,
        |rows, cols| {
            let (d, o) =
                unsafe { nibble_tile::<FIFTH>(&unpacked::<_, FIFTH>(*rows, unpack_q5_0), cols) };
            std::array::from_fn(|t| d[t] - 16.0 * o[t])
        },
        super::super::portable::q5_0,
    );
    check::<BlockIQ4NL>(
        DType::IQ4NL,
        |rows, cols| unsafe { nibble_tile::<IQ4>(&unpacked::<_, IQ4>(*rows, unpack_iq4_nl), cols) }.0,
        super::super::portable::iq4_nl,
    );
}
