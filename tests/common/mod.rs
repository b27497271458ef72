//! Test helpers: a seeded RNG, graph runners and the NMSE metric.
#![allow(dead_code)]

#[path = "../fixtures/mod.rs"]
pub mod fixtures;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::{Backend, TensorIo};
use wginfer::graph::{Graph, TensorId};
use wginfer::Result;

#[allow(unused_imports)]
pub use wginfer::rng::Rng;

/// `Σ(a−b)² / Σb²` with `b` the reference, as llama.cpp's test-backend-ops.
pub fn nmse(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        assert!(!g.is_nan(), "NaN in result");
        if w.is_infinite() || g.is_infinite() {
            assert_eq!(g as f64, w, "infinities must match");
            continue;
        }
        err += (g as f64 - w).powi(2);
        norm += w * w;
    }
    if norm == 0.0 {
        err
    } else {
        err / norm
    }
}

/// Inputs of a test graph: f32 values per input tensor (i32 tensors get ids).
pub enum Fill {
    F32(Vec<f32>),
    I32(Vec<i32>),
}

/// Allocates `g` on `backend`, writes the inputs, computes, and reads `out` as f32.
pub fn run_on(
    backend: &dyn Backend,
    mut g: Graph,
    inputs: &[(TensorId, Fill)],
    out: TensorId,
) -> Result<Vec<f32>> {
    g.set_output(out)?;
    backend.allocate_graph(&mut g)?;
    for (id, fill) in inputs {
        match fill {
            Fill::F32(v) => backend.write_f32(&g, *id, v)?,
            Fill::I32(v) => backend.write_i32(&g, *id, v)?,
        }
    }
    backend.compute(&g, &g.compute_order())?;
    backend.read_f32(&g, out)
}

/// [`run_on`] with the CPU backend.
pub fn run_cpu(g: Graph, inputs: &[(TensorId, Fill)], out: TensorId) -> Result<Vec<f32>> {
    run_on(&CpuBackend::with_threads(2), g, inputs, out)
}

/// Row-major (ggml order) flat index of `i` in shape `ne`.
pub fn flat(ne: [usize; 4], i: [usize; 4]) -> usize {
    i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))
}

/// Every index of `ne`, dimension 0 fastest.
pub fn indices(ne: [usize; 4]) -> impl Iterator<Item = [usize; 4]> {
    (0..ne.iter().product::<usize>()).map(move |mut f| {
        let mut i = [0; 4];
        for d in 0..4 {
            i[d] = f % ne[d];
            f /= ne[d];
        }
        i
    })
}

/// Rounds through f16, for references of f16 results.
pub fn f16_round(x: f64) -> f64 {
    half::f16::from_f64(x).to_f64()
}

/// A wgpu backend on the default adapter; `None` without one (reported as
/// a skipped check, and a failure where an adapter is required).
pub fn gpu() -> Option<wginfer::backend::wgpu::WgpuBackend> {
    gpu_with(&wginfer::backend::wgpu::WgpuOptions::default())
}

/// A wgpu backend opened with `options`, as [`gpu`].
pub fn gpu_with(
    options: &wginfer::backend::wgpu::WgpuOptions,
) -> Option<wginfer::backend::wgpu::WgpuBackend> {
    use wginfer::backend::wgpu::WgpuBackend;
    match WgpuBackend::new(options) {
        Ok(b) => Some(b),
        Err(e) => {
            fixtures::no_adapter(1, e);
            None
        }
    }
}
