//! CPU backend throughput of the ops that dominate token generation:
//! matrix-vector products per weight type, reported as GB/s of weights read.
//!
//! `cargo bench --bench cpu_ops` (set `WGINFER_THREADS` to pin the thread count).

use std::time::Instant;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::{Backend, TensorIo};
use wginfer::graph::Graph;
use wginfer::{DType, Result};

fn bench_matvec(cpu: &CpuBackend, dtype: DType, k: usize, m: usize) -> Result<()> {
    let mut g = Graph::new();
    let w = g.input("w", dtype, &[k, m])?;
    let x = g.input("x", DType::F32, &[k])?;
    let y = g.mul_mat(w, x)?;
    g.set_output(y)?;
    cpu.allocate_graph(&mut g)?;
    let values: Vec<f32> = (0..k * m)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    cpu.write_f32(&g, w, &values)?;
    cpu.write_f32(&g, x, &vec![0.5; k])?;
    let order = g.compute_order();
    cpu.compute(&g, &order)?; // warm-up
    let reps = 20;
    let start = Instant::now();
    for _ in 0..reps {
        cpu.compute(&g, &order)?;
    }
    let secs = start.elapsed().as_secs_f64() / reps as f64;
    let bytes = dtype.row_bytes(k)? * m;
    println!(
        "mul_mat {:>5} {k:>5}x{m:<5} {:>9.1} us {:>7.2} GB/s",
        dtype.name(),
        secs * 1e6,
        bytes as f64 / secs / 1e9
    );
    Ok(())
}

fn main() -> Result<()> {
    let threads = std::env::var("WGINFER_THREADS")
        .ok()
        .and_then(|t| t.parse().ok());
    let cpu = threads.map_or_else(CpuBackend::new, CpuBackend::with_threads);
    println!("cpu backend, {} threads", cpu.threads());
    for dtype in DType::ALL.into_iter().filter(|t| *t != DType::I32) {
        // SmolLM2-135M's ffn_down shape, and a 7B-class square matrix.
        bench_matvec(&cpu, dtype, 1536, 576)?;
        bench_matvec(&cpu, dtype, 4096, 4096)?;
    }
    Ok(())
}
