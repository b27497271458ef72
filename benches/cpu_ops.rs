//! CPU backend throughput of the ops that dominate inference: mul_mat per
//! weight type, on the fast path (q8 activations) and the reference, as
//! one column (token generation: GB/s of weights read) and as 64 columns
//! (a prompt: multiply-adds per second).
//!
//! `cargo bench --bench cpu_ops` (set `WGINFER_THREADS` to pin the thread
//! count, `WGINFER_BENCH_TYPES=q4_0,q4_K` to pick weight types).

use std::time::Instant;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::{Backend, TensorIo};
use wginfer::graph::Graph;
use wginfer::{DType, Result};

fn bench_mul_mat(cpu: &CpuBackend, dtype: DType, k: usize, m: usize, n: usize) -> Result<()> {
    let mut g = Graph::new();
    let w = g.input("w", dtype, &[k, m])?;
    let x = g.input("x", DType::F32, &[k, n])?;
    let y = g.mul_mat(w, x)?;
    g.set_output(y)?;
    cpu.allocate_graph(&mut g)?;
    let values: Vec<f32> = (0..k * m)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    cpu.write_f32(&g, w, &values)?;
    let xs: Vec<f32> = (0..k * n)
        .map(|i| ((i * 31) % 200) as f32 / 100.0 - 1.0)
        .collect();
    cpu.write_f32(&g, x, &xs)?;
    let order = g.compute_order();
    cpu.compute(&g, &order)?; // warm-up
    let reps = if n == 1 { 20 } else { 5 };
    let start = Instant::now();
    for _ in 0..reps {
        cpu.compute(&g, &order)?;
    }
    let secs = start.elapsed().as_secs_f64() / reps as f64;
    let path = if cpu.quantized_dots() {
        "fast"
    } else {
        "reference"
    };
    let shape = format!("{k}x{m}x{n}");
    let rate = if n == 1 {
        let bytes = dtype.row_bytes(k)? * m;
        format!("{:>7.2} GB/s", bytes as f64 / secs / 1e9)
    } else {
        format!("{:>7.2} GMAC/s", (k * m * n) as f64 / secs / 1e9)
    };
    println!(
        "mul_mat {:>5} {shape:<16} {path:<9} {:>10.1} us {rate}",
        dtype.name(),
        secs * 1e6
    );
    Ok(())
}

fn main() -> Result<()> {
    let threads = std::env::var("WGINFER_THREADS")
        .ok()
        .and_then(|t| t.parse().ok());
    let types = std::env::var("WGINFER_BENCH_TYPES").ok();
    let picked = |t: &DType| {
        types.as_ref().is_none_or(|list| {
            list.split(',')
                .any(|name| name.eq_ignore_ascii_case(t.name()))
        })
    };
    let cpu = || threads.map_or_else(CpuBackend::new, CpuBackend::with_threads);
    let (reference, fast) = (cpu(), cpu().with_quantized_dots(true));
    println!("cpu backend, {} threads", fast.threads());
    for dtype in DType::ALL
        .into_iter()
        .filter(|t| *t != DType::I32)
        .filter(picked)
    {
        // SmolLM2-135M's ffn_down shape and a 7B-class square matrix, one
        // column; 1024x1536, 64 columns.
        for backend in [&fast, &reference] {
            bench_mul_mat(backend, dtype, 1536, 576, 1)?;
            bench_mul_mat(backend, dtype, 4096, 4096, 1)?;
        }
        bench_mul_mat(&fast, dtype, 1024, 1536, 64)?;
    }
    Ok(())
}
