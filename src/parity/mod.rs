//! Op parity, the test-backend-ops of wginfer: every case builds a small
//! graph over random inputs, runs it on the CPU reference and on a backend
//! under test, and compares the outputs with llama.cpp's metric and limits.
//!
//! `tests/parity.rs` runs every case for both reduction variants;
//! `examples/backend_ops.rs` runs the same cases from the command line.

mod cases;
mod llama;

pub use crate::rng::Rng;
pub use cases::{all_cases, flash_attn_unfused_pairs, perf_cases};
pub use llama::{llama_cases, LlamaCase, Skip};

use std::time::Instant;

use crate::backend::{Backend, TensorIo};
use crate::graph::{Graph, TensorId};
use crate::{DType, Result};

/// llama.cpp's default NMSE limit.
pub const NMSE_DEFAULT: f64 = 1e-7;
/// soft_max's limit.
pub const NMSE_SOFT_MAX: f64 = 1e-6;
/// mul_mat's limit (backends may reorder or quantize the accumulation).
pub const NMSE_MUL_MAT: f64 = 5e-4;

/// Values written to an input tensor (converted or quantized to its type).
#[derive(Clone, Debug)]
pub enum Fill {
    /// Floats.
    F32(Vec<f32>),
    /// Integers (ids, positions, indices).
    I32(Vec<i32>),
}

/// One parity case.
pub struct Case {
    /// The op under test (`mul_mat`, `rope`, ...), for `--op`.
    pub op: &'static str,
    /// Types, shapes and parameters, as test-backend-ops prints them.
    pub name: String,
    /// The graph; its inputs are unbound.
    pub graph: Graph,
    /// What each input is filled with.
    pub inputs: Vec<(TensorId, Fill)>,
    /// The tensor compared.
    pub out: TensorId,
    /// Largest NMSE that passes (0 = bit-exact).
    pub limit: f64,
}

/// Builds cases: inputs with random values from one seeded generator.
pub struct CaseBuilder {
    /// The graph under construction.
    pub g: Graph,
    inputs: Vec<(TensorId, Fill)>,
    /// The random source.
    pub rng: Rng,
}

impl CaseBuilder {
    /// A builder seeded with `seed`.
    pub fn new(seed: u64) -> CaseBuilder {
        CaseBuilder {
            g: Graph::new(),
            inputs: vec![],
            rng: Rng::new(seed),
        }
    }

    /// An input of `dtype` and shape `ne` filled with U[lo, hi).
    pub fn uniform(&mut self, dtype: DType, ne: &[usize], lo: f32, hi: f32) -> Result<TensorId> {
        let id = self.g.input("in", dtype, ne)?;
        let n = self.g.layout(id).n_elements();
        let values = self.rng.vec(n, lo, hi);
        let fill = match dtype {
            // Integers as large as 1e9 times the range, past f32's 2^24.
            DType::I32 => Fill::I32(values.iter().map(|v| (v * 1e9) as i32).collect()),
            _ => Fill::F32(values),
        };
        self.inputs.push((id, fill));
        Ok(id)
    }

    /// Writes `values` into the input `id` when the case is prepared.
    pub fn push_f32(&mut self, id: TensorId, values: Vec<f32>) {
        self.inputs.push((id, Fill::F32(values)));
    }

    /// An i32 input of `n` distinct values in `0..below` (`n <= below`), in
    /// random order: rows for set_rows, where repeats would race.
    pub fn distinct_indices(&mut self, n: usize, below: usize) -> Result<TensorId> {
        let id = self.g.input("rows", DType::I32, &[n])?;
        let mut all: Vec<i32> = (0..below as i32).collect();
        for i in 0..n.min(below) {
            let j = i + self.rng.below(below - i);
            all.swap(i, j);
        }
        all.truncate(n);
        self.inputs.push((id, Fill::I32(all)));
        Ok(id)
    }

    /// An i32 input of shape `ne` with values in `0..below`.
    pub fn indices(&mut self, ne: &[usize], below: usize) -> Result<TensorId> {
        let id = self.g.input("ids", DType::I32, ne)?;
        let n = self.g.layout(id).n_elements();
        let v = (0..n).map(|_| self.rng.below(below) as i32).collect();
        self.inputs.push((id, Fill::I32(v)));
        Ok(id)
    }

    /// Finishes the case.
    pub fn case(self, op: &'static str, name: String, out: TensorId, limit: f64) -> Case {
        Case {
            op,
            name,
            graph: self.g,
            inputs: self.inputs,
            out,
            limit,
        }
    }
}

/// A case's graph allocated and filled on one backend, ready to compute.
pub struct Prepared<'a> {
    backend: &'a dyn Backend,
    graph: Graph,
    out: TensorId,
    order: Vec<TensorId>,
}

impl Case {
    /// Allocates the case on `backend` and writes its inputs.
    pub fn prepare<'a>(&self, backend: &'a dyn Backend) -> Result<Prepared<'a>> {
        let mut graph = self.graph.clone();
        graph.set_output(self.out)?;
        backend.allocate_graph(&mut graph)?;
        for (id, fill) in &self.inputs {
            match fill {
                Fill::F32(v) => backend.write_f32(&graph, *id, v)?,
                Fill::I32(v) => backend.write_i32(&graph, *id, v)?,
            }
        }
        let order = graph.compute_order();
        Ok(Prepared {
            backend,
            graph,
            out: self.out,
            order,
        })
    }

    /// Whether `backend` can run every node of the case.
    pub fn supported_by(&self, backend: &dyn Backend) -> bool {
        self.graph
            .compute_order()
            .into_iter()
            .all(|id| backend.supports_op(&self.graph, id))
    }

    /// Bytes the case's op reads and writes once (for GB/s figures).
    pub fn bytes_moved(&self) -> usize {
        let out = self.graph.layout(self.out).span_bytes();
        out + self
            .inputs
            .iter()
            .map(|(id, _)| self.graph.layout(*id).span_bytes())
            .sum::<usize>()
    }
}

impl Prepared<'_> {
    /// Computes the graph once and reads the output.
    pub fn run(&self) -> Result<Vec<f32>> {
        self.backend.compute(&self.graph, &self.order)?;
        self.backend.read_f32(&self.graph, self.out)
    }

    /// Mean seconds per compute over at least `reps` runs (fewer when one
    /// run takes seconds) and at least 0.2 s, after 0.3 s of warm-up runs, so
    /// that a GPU has left its idle clocks.
    pub fn time(&self, reps: usize) -> Result<f64> {
        let start = Instant::now();
        let mut warm = 0u32;
        while warm == 0 || start.elapsed().as_secs_f64() < 0.3 {
            self.backend.compute(&self.graph, &self.order)?;
            self.backend.synchronize()?;
            warm += 1;
        }
        let per = start.elapsed().as_secs_f64() / warm as f64;
        let n = ((0.2 / per).ceil() as usize).max(reps.min((2.0 / per) as usize).max(1));
        let start = Instant::now();
        for _ in 0..n {
            self.backend.compute(&self.graph, &self.order)?;
        }
        self.backend.synchronize()?;
        Ok(start.elapsed().as_secs_f64() / n as f64)
    }
}

/// `Σ(a−b)² / Σb²` of a result against the reference, or why it fails
/// outright: NaN anywhere, or infinities that differ.
pub fn nmse(got: &[f32], reference: &[f32]) -> std::result::Result<f64, String> {
    if got.len() != reference.len() {
        return Err(format!(
            "{} values, reference has {}",
            got.len(),
            reference.len()
        ));
    }
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for (i, (&a, &b)) in got.iter().zip(reference).enumerate() {
        if a.is_nan() || b.is_nan() {
            return Err(format!("NaN at {i}"));
        }
        let inf = |v: f32| v.is_infinite() || v.abs() == f32::MAX;
        if inf(a) || inf(b) {
            if a != b {
                return Err(format!("infinity mismatch at {i}: {a} vs {b}"));
            }
            continue;
        }
        err += (a as f64 - b as f64).powi(2);
        norm += (b as f64).powi(2);
    }
    Ok(if norm == 0.0 { err } else { err / norm })
}

/// The result of one case on one backend.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Measured NMSE (when it could be computed).
    pub nmse: Option<f64>,
    /// Why the case failed, if it did.
    pub failure: Option<String>,
}

/// Runs `case` on `reference` and `backend` and compares.
pub fn check(case: &Case, reference: &dyn Backend, backend: &dyn Backend) -> Outcome {
    let run = |b: &dyn Backend| case.prepare(b).and_then(|p| p.run());
    let (want, got) = match (run(reference), run(backend)) {
        (Ok(w), Ok(g)) => (w, g),
        (Err(e), _) => return failed(None, format!("reference failed: {e}")),
        (_, Err(e)) => return failed(None, format!("{} failed: {e}", backend.name())),
    };
    match nmse(&got, &want) {
        Ok(e) if e <= case.limit => Outcome {
            nmse: Some(e),
            failure: None,
        },
        Ok(e) => failed(Some(e), format!("NMSE {e:.3e} > {:.0e}", case.limit)),
        Err(why) => failed(None, why),
    }
}

fn failed(nmse: Option<f64>, why: String) -> Outcome {
    Outcome {
        nmse,
        failure: Some(why),
    }
}
