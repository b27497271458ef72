//! One function per op; each returns the node's values in logical order.

pub(crate) mod argmax;
mod elementwise;
mod flash_attn;
mod get_rows;
mod mul_mat;
mod norm;
mod rope;
mod softmax;
pub(crate) mod top_k;

use std::sync::Mutex;

use super::spare::Spare;
use super::workers::Workers;
use super::Src;
use crate::graph::{Node, Op};
use crate::{Error, Result};

/// How the ops run: worker threads, and whether they compute as ggml's CPU
/// backend does (the fast path: mul_mat's activations quantized for
/// integer dot products, GELU from an f16 table) or exactly (the
/// reference).
#[derive(Clone, Copy)]
pub struct Settings<'a> {
    pub threads: usize,
    pub quantized_dots: bool,
    /// Where products take their large buffers from.
    pub spare: &'a Spare,
}

/// Computes `node` from its sources.
pub fn compute(node: &Node, src: &[Src], settings: Settings<'_>) -> Result<Vec<f32>> {
    let threads = settings.threads;
    let s = |i: usize| {
        src.get(i)
            .copied()
            .ok_or_else(|| Error::shape(format!("source {i} is missing")))
    };
    match node.op {
        Op::Input | Op::View | Op::Empty | Op::Transfer => {
            Err(Error::invalid("inputs and views compute nothing"))
        }
        Op::Add => elementwise::binary(s(0)?, s(1)?, threads, |a, b| a + b),
        Op::Mul => elementwise::binary(s(0)?, s(1)?, threads, |a, b| a * b),
        Op::Scale(k) => elementwise::unary(s(0)?, threads, |x| x * k),
        Op::Silu => elementwise::unary(s(0)?, threads, elementwise::silu),
        Op::Relu => elementwise::unary(s(0)?, threads, |x| x.max(0.0)),
        Op::Tanh => elementwise::unary(s(0)?, threads, f32::tanh),
        Op::Gelu if settings.quantized_dots => {
            elementwise::unary(s(0)?, threads, elementwise::gelu_f16_table)
        }
        Op::Gelu => elementwise::unary(s(0)?, threads, elementwise::gelu),
        Op::DiagMaskInf { n_past } => elementwise::diag_mask_inf(s(0)?, n_past),
        Op::SoftMax { scale } => softmax::soft_max(s(0)?, src.get(1).copied(), scale, threads),
        Op::Norm { eps } => norm::norm(s(0)?, eps, threads),
        Op::RmsNorm { eps } => norm::rms_norm(s(0)?, eps, threads),
        Op::MulMat => mul_mat::mul_mat(s(0)?, s(1)?, settings),
        Op::MulMatId => mul_mat::mul_mat_id(s(0)?, s(1)?, s(2)?, settings),
        Op::GetRows => get_rows::get_rows(s(0)?, s(1)?, threads),
        Op::Rope(p) => {
            let factors = src.get(2).map(|_| s(2)).transpose()?;
            rope::rope(s(0)?, s(1)?, factors, &p, threads)
        }
        Op::Cpy => values_f32(s(0)?, threads),
        Op::SetRows => Err(Error::invalid("set_rows writes its rows in place")),
        Op::FlashAttn { scale } => {
            flash_attn::flash_attn(s(0)?, s(1)?, s(2)?, src.get(3).copied(), scale, threads)
        }
        Op::Argmax => argmax::argmax(s(0)?),
        Op::TopK { k, chunk, pairs } => top_k::top_k(s(0)?, k, chunk, pairs),
        Op::SampleTopK => top_k::sample_top_k(s(0)?, s(1)?),
    }
}

/// Splits `out` into chunks of `chunk` values and fills them on up to
/// `threads` of the workers it runs in (the backend's own, entered around
/// each compute); `fill(first_chunk_index, chunks)` gets consecutive
/// chunks. The first error any part returns is returned.
fn parallel_fill<T: Send>(
    out: &mut [T],
    chunk: usize,
    threads: usize,
    fill: impl Fn(usize, &mut [T]) -> Result<()> + Sync,
) -> Result<()> {
    let n_chunks = out.len() / chunk.max(1);
    Workers::with_current(|workers| {
        let threads = threads.min(workers.map_or(1, Workers::threads));
        let per_thread = n_chunks.div_ceil(threads.max(1)).max(1);
        let Some(workers) = workers.filter(|_| threads > 1 && n_chunks > 1) else {
            return fill(0, out);
        };
        // Worker i fills parts i, i + threads, ... (a last partial chunk
        // makes one more part); each part's lock is taken once, uncontended.
        let parts: Vec<Mutex<&mut [T]>> = out
            .chunks_mut(per_thread * chunk.max(1))
            .map(Mutex::new)
            .collect();
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        let finished = workers.run(&|i| {
            if i >= threads {
                return;
            }
            for (j, part) in parts.iter().enumerate().skip(i).step_by(threads) {
                let mut part = part.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = fill(j * per_thread, &mut part) {
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
            }
        });
        match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None if !finished => Err(Error::Backend {
                backend: "cpu".into(),
                msg: "a worker thread panicked".into(),
            }),
            None => Ok(()),
        }
    })
}

/// `src`'s values as f32 in logical order; a large strided or converted
/// source (a prompt's permuted queries, a copy into the KV cache) is read
/// by up to `threads` workers, a row each.
fn values_f32(src: Src, threads: usize) -> Result<Vec<f32>> {
    let [n0, n1, n2, _] = src.ne();
    // Below this many values a handoff to the pool costs more than it saves
    // (a decode step's single query).
    const PARALLEL_MIN: usize = 1 << 14;
    let small = src.layout.n_elements() < PARALLEL_MIN;
    if threads <= 1 || n0 == 0 || small || src.f32_slice().is_some() {
        return src.to_f32();
    }
    let mut out = vec![0.0f32; src.layout.n_elements()];
    parallel_fill(&mut out, n0, threads, |first, part| {
        for (r, row) in part.chunks_exact_mut(n0).enumerate() {
            let flat = first + r;
            src.row_f32(flat % n1, flat / n1 % n2, flat / (n1 * n2), row)?;
        }
        Ok(())
    })?;
    Ok(out)
}

/// A row-wise op's result: `f([0, i1, i2, i3], out_row)` fills each row of
/// `a`'s shape, rows split over up to `threads` workers.
fn each_row_index(
    a: Src,
    threads: usize,
    f: impl Fn([usize; 4], &mut [f32]) -> Result<()> + Sync,
) -> Result<Vec<f32>> {
    let [n0, n1, n2, _] = a.ne();
    let mut out = vec![0.0f32; a.layout.n_elements()];
    if n0 == 0 {
        return Ok(out);
    }
    parallel_fill(&mut out, n0, threads, |first, part| {
        for (r, dst) in part.chunks_exact_mut(n0).enumerate() {
            let flat = first + r;
            f([0, flat % n1, flat / n1 % n2, flat / n1 / n2], dst)?;
        }
        Ok(())
    })?;
    Ok(out)
}

/// Each row of `a`, read as f32 into the result and then transformed in
/// place by `f`, rows split over up to `threads` workers.
fn each_row(a: Src, threads: usize, f: impl Fn(&mut [f32]) + Sync) -> Result<Vec<f32>> {
    each_row_index(a, threads, |[_, i1, i2, i3], row| {
        a.row_f32(i1, i2, i3, row)?;
        f(row);
        Ok(())
    })
}
