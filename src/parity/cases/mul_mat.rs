//! mul_mat cases, after test-backend-ops' test_mul_mat: `a` `[k, m, bs0, bs1]`
//! of every weight type times f32 `b` `[k, n, bs0 * nr0, bs1 * nr1]`, with
//! batches, broadcast (GQA), permuted operands and strided rows.

use super::table_types;
use crate::graph::TensorId;
use crate::parity::{Case, CaseBuilder, NMSE_MUL_MAT};
use crate::{DType, Result};

/// One test_mul_mat configuration.
#[derive(Clone, Copy)]
struct Spec {
    ta: DType,
    m: usize,
    n: usize,
    k: usize,
    bs: [usize; 2],
    nr: [usize; 2],
    /// Operands stored with dimensions 1 and 2 swapped, then permuted back.
    per: bool,
    /// Row length of the tensors the operands are views of (0: not views).
    k_v: usize,
}

impl Spec {
    fn new(ta: DType, m: usize, n: usize, k: usize) -> Spec {
        Spec {
            ta,
            m,
            n,
            k,
            bs: [1, 1],
            nr: [1, 1],
            per: false,
            k_v: 0,
        }
    }

    fn batch(self, bs: [usize; 2], nr: [usize; 2]) -> Spec {
        Spec { bs, nr, ..self }
    }

    fn name(&self) -> String {
        let per = if self.per { "[0,2,1,3]" } else { "[0,1,2,3]" };
        format!(
            "MUL_MAT(type_a={},type_b=f32,m={},n={},k={},bs={:?},nr={:?},per={per},k_v={})",
            self.ta.name(),
            self.m,
            self.n,
            self.k,
            self.bs,
            self.nr,
            self.k_v
        )
    }
}

/// An operand of logical shape `ne`, stored as the spec says.
fn operand(b: &mut CaseBuilder, s: &Spec, dtype: DType, ne: [usize; 4]) -> Result<TensorId> {
    let mut stored = ne;
    if s.k_v > 0 {
        stored[0] = s.k_v;
    }
    if s.per {
        stored.swap(1, 2);
    }
    let mut t = b.uniform(dtype, &stored, -1.0, 1.0)?;
    if s.k_v > 0 {
        let nb = b.g.layout(t).nb;
        let mut shape = stored;
        shape[0] = ne[0];
        t = b.g.view(t, &shape, &nb[1..], 0)?;
    }
    if s.per {
        t = b.g.permute(t, [0, 2, 1, 3])?;
    }
    Ok(t)
}

fn build(seed: u64, s: Spec) -> Result<Case> {
    let mut b = CaseBuilder::new(seed);
    let [bs0, bs1] = s.bs;
    let a = operand(&mut b, &s, s.ta, [s.k, s.m, bs0, bs1])?;
    let x = operand(
        &mut b,
        &s,
        DType::F32,
        [s.k, s.n, bs0 * s.nr[0], bs1 * s.nr[1]],
    )?;
    let out = b.g.mul_mat(a, x)?;
    Ok(b.case("mul_mat", s.name(), out, NMSE_MUL_MAT))
}

fn collect(specs: Vec<Spec>, seed: u64) -> Result<Vec<Case>> {
    specs
        .into_iter()
        .enumerate()
        .map(|(i, s)| build(seed + i as u64, s))
        .collect()
}

/// The cases (the suite runs them for both reduction variants, so big
/// shapes are few and have small n).
pub fn cases() -> Result<Vec<Case>> {
    let mut specs = Vec::new();
    for ta in table_types() {
        // Column counts around the mat-vec / tiled switch, and tile edges.
        for n in [1, 2, 3, 4, 5, 8, 9, 16, 64] {
            specs.push(Spec::new(ta, 16, n, 256));
        }
        // Batches and broadcast of a over them (GQA).
        let small = Spec::new(ta, 16, 1, 256);
        specs.push(small.batch([2, 3], [1, 1]));
        specs.push(small.batch([1, 1], [2, 1]));
        specs.push(small.batch([3, 2], [1, 2]));
        specs.push(Spec { n: 9, ..small }.batch([2, 3], [2, 2]));
        specs.push(Spec { n: 16, ..small }.batch([3, 2], [2, 1]));
        // Permuted operands and strided rows.
        let per = Spec { per: true, ..small }.batch([2, 3], [1, 1]);
        specs.push(per);
        specs.push(Spec { n: 16, ..per }.batch([2, 3], [2, 1]));
        specs.push(Spec { k_v: 512, ..small });
        specs.push(
            Spec {
                n: 9,
                k_v: 512,
                ..small
            }
            .batch([2, 1], [1, 2]),
        );
        // Larger rows and partial tiles; K-quant rows are whole 256-blocks.
        let k = if ta.block_elems() == 256 { 1024 } else { 1056 };
        specs.push(Spec::new(ta, 1057, 1, k));
        specs.push(Spec::new(ta, 1056, 4, k));
        specs.push(Spec::new(ta, 129, 77, k));
        specs.push(Spec::new(ta, 128, 128, 256));
    }
    for ta in [DType::F32, DType::F16, DType::BF16] {
        // Rows of odd length (a unit runs past K) and a transposed weight view.
        specs.push(Spec::new(ta, 129, 1, 67));
        specs.push(Spec::new(ta, 16, 9, 129));
        specs.push(Spec::new(ta, 129, 64, 67));
        specs.push(Spec::new(ta, 16, 1, 1057).batch([2, 3], [2, 1]));
        specs.push(Spec {
            k_v: 200,
            ..Spec::new(ta, 16, 5, 129)
        });
    }
    // Products over several of the cooperative kernel's 128 x 128 tiles,
    // partial on both edges, one batched and broadcast.
    for ta in [DType::Q4_0, DType::Q4K, DType::F16, DType::Q2K, DType::Q3K] {
        specs.push(Spec::new(ta, 1030, 900, 256));
    }
    specs.push(Spec::new(DType::Q8_0, 264, 130, 256).batch([2, 3], [2, 1]));
    // A few decode-sized weights.
    specs.push(Spec::new(DType::Q4_0, 4096, 1, 4096));
    specs.push(Spec::new(DType::Q8_0, 4096, 2, 4096));
    specs.push(Spec::new(DType::F16, 4096, 1, 4096));
    let mut cases = collect(specs, 9000)?;
    cases.extend(transposed()?);
    cases.extend(unaligned_activations()?);
    Ok(cases)
}

/// Block-type weights times activations that start one element into a
/// longer row, so no column is 16-byte aligned and the wgpu mat-vec loads
/// them one by one instead of four at a time.
fn unaligned_activations() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (i, ta) in table_types().filter(|t| t.is_quantized()).enumerate() {
        for n in [1, 3] {
            let mut b = CaseBuilder::new(9600 + 4 * i as u64 + n as u64);
            let (m, k) = (20, 512);
            let a = b.uniform(ta, &[k, m], -1.0, 1.0)?;
            let stored = b.uniform(DType::F32, &[k + 1, n], -1.0, 1.0)?;
            let nb = b.g.layout(stored).nb;
            let x = b.g.view(stored, &[k, n], &nb[1..2], 4)?;
            let out = b.g.mul_mat(a, x)?;
            let name = format!(
                "MUL_MAT(type_a={},type_b=f32,m={m},n={n},k={k},b=offset by one)",
                ta.name()
            );
            cases.push(b.case("mul_mat", name, out, NMSE_MUL_MAT));
        }
    }
    Ok(cases)
}

/// f32/f16 weights as transposed views (`nb[0]` > element size), which the
/// wgpu kernels read element by element.
fn transposed() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (i, ta) in [DType::F32, DType::F16].into_iter().enumerate() {
        for n in [1, 33] {
            let mut b = CaseBuilder::new(9500 + 2 * i as u64 + n as u64);
            let (m, k) = (37, 67);
            let stored = b.uniform(ta, &[m, k], -1.0, 1.0)?;
            let a = b.g.transpose(stored)?;
            let x = b.uniform(DType::F32, &[k, n], -1.0, 1.0)?;
            let out = b.g.mul_mat(a, x)?;
            let name = format!(
                "MUL_MAT(type_a={},type_b=f32,m={m},n={n},k={k},a=transposed)",
                ta.name()
            );
            cases.push(b.case("mul_mat", name, out, NMSE_MUL_MAT));
        }
    }
    Ok(cases)
}

/// Weight shapes of 8B-class models, for `backend_ops --mode perf` only:
/// mat-vec (decode) at 4096 x 4096, 14336 x 4096 and 4096 x 14336, the
/// default model's decode products, small batches and a prompt-sized
/// product. A mat-vec case multiplies the same activations by
/// several distinct weight tensors in one graph (one submit), so the time is
/// the kernels' rather than a submit's and the weights, together larger than
/// a big GPU's L2 cache, come from memory. Only cases whose name is
/// `wanted` are built.
pub fn perf_cases(wanted: &dyn Fn(&str) -> bool) -> Result<Vec<Case>> {
    let mut specs = Vec::new();
    for ta in table_types().filter(|t| *t != DType::F32) {
        for (m, k) in [(4096, 4096), (14336, 4096), (4096, 14336)] {
            specs.push((Spec::new(ta, m, 1, k), 128 << 20));
        }
    }
    // The default model's decode products: q4_1 layers, the q8_0 output.
    for (ta, m, k) in [
        (DType::Q4_1, 576, 576),
        (DType::Q4_1, 3072, 576),
        (DType::Q4_1, 576, 1536),
        (DType::Q8_0, 49152, 576),
    ] {
        specs.push((Spec::new(ta, m, 1, k), 16 << 20));
    }
    // Small batches around the mat-vec / tiled switch, and a prompt.
    for ta in [DType::Q4_0, DType::F16] {
        for n in [4, 8, 32] {
            specs.push((Spec::new(ta, 4096, n, 4096), 128 << 20));
        }
    }
    for ta in [DType::Q4_0, DType::Q4_1, DType::F16] {
        specs.push((Spec::new(ta, 4096, 512, 4096), 0));
    }
    let mut cases = Vec::new();
    for (s, bytes) in specs {
        let weight = s.ta.row_bytes(s.k)? * s.m;
        let copies = (bytes / weight).clamp(1, 16);
        let name = format!("{} x{copies}", s.name());
        // Only the wanted cases get their (hundreds of MB of) random data.
        if wanted(&name) {
            cases.push(repeated(s, copies, name)?);
        }
    }
    Ok(cases)
}

/// `s` over `copies` weight copies (to about 128 MB: past a big GPU's L2),
/// all sharing one `b`; the case's output is the last product.
fn repeated(s: Spec, copies: usize, name: String) -> Result<Case> {
    let mut b = CaseBuilder::new(9900 + s.m as u64 + s.k as u64);
    let x = b.uniform(DType::F32, &[s.k, s.n], -1.0, 1.0)?;
    let mut out = x;
    for _ in 0..copies {
        let a = b.uniform(s.ta, &[s.k, s.m], -1.0, 1.0)?;
        out = b.g.mul_mat(a, x)?;
    }
    Ok(b.case("mul_mat", name, out, NMSE_MUL_MAT))
}
