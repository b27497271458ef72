//! The CPU reference backend against scalar formulas written out in f64.
//!
//! Each case builds a small graph over random inputs, including permuted,
//! strided and broadcast operands, and compares with a direct evaluation of
//! the op's definition.

mod common;

use common::{f16_round, flat, indices, nmse, run_cpu, run_on, Fill, Rng};
use wginfer::backend::cpu::CpuBackend;
use wginfer::graph::{Graph, RopeMode, RopeParams, TensorId};
use wginfer::{quant, DType};

/// An input tensor, possibly seen through a permute, and its logical values.
struct Operand {
    /// The tensor ops consume (the view when permuted).
    id: TensorId,
    /// The input tensor the values are written to.
    storage: TensorId,
    stored: Vec<f32>,
    ne: [usize; 4],
    vals: Vec<f64>,
}

impl Operand {
    fn at(&self, i: [usize; 4]) -> f64 {
        self.vals[flat(self.ne, i)]
    }
}

/// Logical values of `permute(storage, axes)` where `storage` has shape `s`.
fn permuted(values: &[f32], s: [usize; 4], axes: [usize; 4]) -> ([usize; 4], Vec<f64>) {
    let mut ne = [0; 4];
    for k in 0..4 {
        ne[axes[k]] = s[k];
    }
    let out = indices(ne)
        .map(|j| values[flat(s, [j[axes[0]], j[axes[1]], j[axes[2]], j[axes[3]]])] as f64)
        .collect();
    (ne, out)
}

const NO_PERMUTE: [usize; 4] = [0, 1, 2, 3];

/// An input of `dtype` and storage shape `s` filled with U[lo, hi), seen through `axes`.
fn operand(
    g: &mut Graph,
    rng: &mut Rng,
    dtype: DType,
    s: [usize; 4],
    axes: [usize; 4],
    range: (f32, f32),
) -> Operand {
    let storage = g.input("in", dtype, &s).unwrap();
    let mut stored = rng.vec(s.iter().product(), range.0, range.1);
    if dtype == DType::F16 {
        stored
            .iter_mut()
            .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
    }
    let (ne, vals) = permuted(&stored, s, axes);
    let id = if axes == NO_PERMUTE {
        storage
    } else {
        g.permute(storage, axes).unwrap()
    };
    Operand {
        id,
        storage,
        stored,
        ne,
        vals,
    }
}

fn run(g: Graph, ops: &[&Operand], out: TensorId) -> Vec<f32> {
    let inputs: Vec<_> = ops
        .iter()
        .map(|o| (o.storage, Fill::F32(o.stored.clone())))
        .collect();
    run_cpu(g, &inputs, out).unwrap()
}

fn assert_close(got: &[f32], want: &[f64], limit: f64, what: &str) {
    let e = nmse(got, want);
    assert!(e <= limit, "{what}: NMSE {e:e} > {limit:e}");
}

#[test]
fn add_and_mul_broadcast_over_permuted_sources() {
    let mut rng = Rng::new(1);
    let cases: [([usize; 4], [usize; 4], [usize; 4]); 5] = [
        ([10, 5, 4, 3], [10, 5, 4, 3], NO_PERMUTE),
        ([10, 5, 4, 3], [10, 1, 1, 1], NO_PERMUTE),
        ([10, 5, 4, 3], [1, 5, 1, 3], NO_PERMUTE),
        ([20, 10, 8, 3], [10, 5, 4, 3], NO_PERMUTE),
        ([10, 5, 4, 3], [5, 4, 10, 3], [1, 2, 0, 3]), // src1 permuted, as test-backend-ops' perm1
    ];
    for (na, sb, axes) in cases {
        for mul in [false, true] {
            let range = if mul { (0.9, 1.1) } else { (-1.0, 1.0) };
            let mut g = Graph::new();
            let a = operand(&mut g, &mut rng, DType::F32, na, NO_PERMUTE, range);
            let b = operand(&mut g, &mut rng, DType::F32, sb, axes, range);
            let out = if mul {
                g.mul(a.id, b.id)
            } else {
                g.add(a.id, b.id)
            }
            .unwrap();
            let want: Vec<f64> = indices(na)
                .map(|i| {
                    let j = [
                        i[0] % b.ne[0],
                        i[1] % b.ne[1],
                        i[2] % b.ne[2],
                        i[3] % b.ne[3],
                    ];
                    if mul {
                        a.at(i) * b.at(j)
                    } else {
                        a.at(i) + b.at(j)
                    }
                })
                .collect();
            let got = run(g, &[&a, &b], out);
            assert_close(&got, &want, 1e-12, &format!("add/mul {na:?} by {:?}", b.ne));
        }
    }
}

#[test]
fn unary_ops_on_f32_f16_and_permuted_inputs() {
    type Formula = fn(f64) -> f64;
    let silu: Formula = |x| x / (1.0 + (-x).exp());
    let relu: Formula = |x| x.max(0.0);
    let gelu: Formula = |x| {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
    };
    let scale: Formula = |x| x * 0.37;
    let mut rng = Rng::new(2);
    for (name, f) in [
        ("silu", silu),
        ("relu", relu),
        ("gelu", gelu),
        ("scale", scale),
    ] {
        for dtype in [DType::F32, DType::F16] {
            for (shape, axes) in [([128, 2, 2, 2], NO_PERMUTE), ([5, 7, 11, 13], [1, 0, 3, 2])] {
                let mut g = Graph::new();
                let a = operand(&mut g, &mut rng, dtype, shape, axes, (-150.0, 150.0));
                let out = match name {
                    "silu" => g.silu(a.id),
                    "relu" => g.relu(a.id),
                    "gelu" => g.gelu(a.id),
                    _ => g.scale(a.id, 0.37),
                }
                .unwrap();
                let round = |x: f64| if dtype == DType::F16 { f16_round(x) } else { x };
                let want: Vec<f64> = a.vals.iter().map(|&x| round(f(x))).collect();
                let got = run(g, &[&a], out);
                let limit = if dtype == DType::F16 { 1e-6 } else { 1e-12 };
                assert_close(&got, &want, limit, &format!("{name} {dtype} {shape:?}"));
            }
        }
    }
}

#[test]
fn soft_max_with_scale_and_broadcast_masks() {
    let mut rng = Rng::new(3);
    let cases = [
        ([16, 16, 1, 1], None),
        ([15, 15, 1, 1], Some((DType::F32, [15, 15, 1, 1]))),
        ([1023, 15, 1, 1], Some((DType::F16, [1023, 16, 1, 1]))), // mask has extra rows
        ([16, 2, 32, 1], Some((DType::F32, [16, 2, 1, 1]))),      // broadcast over heads
        ([16, 16, 2, 3], Some((DType::F16, [16, 16, 2, 1]))),
    ];
    for (ne, mask) in cases {
        for scale in [0.1f32, 1.0] {
            let mut g = Graph::new();
            let a = operand(&mut g, &mut rng, DType::F32, ne, NO_PERMUTE, (-1.0, 1.0));
            let m = mask.map(|(t, s)| operand(&mut g, &mut rng, t, s, NO_PERMUTE, (-1.0, 1.0)));
            let out = g.soft_max(a.id, m.as_ref().map(|m| m.id), scale).unwrap();
            let mut want = Vec::new();
            for i in indices([1, ne[1], ne[2], ne[3]]) {
                let row: Vec<f64> = (0..ne[0])
                    .map(|i0| {
                        let bias = m
                            .as_ref()
                            .map_or(0.0, |m| m.at([i0, i[1], i[2] % m.ne[2], i[3] % m.ne[3]]));
                        a.at([i0, i[1], i[2], i[3]]) * scale as f64 + bias
                    })
                    .collect();
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
                want.extend(row.iter().map(|v| (v - max).exp() / sum));
            }
            let ops: Vec<&Operand> = std::iter::once(&a).chain(m.as_ref()).collect();
            let got = run(g, &ops, out);
            assert_close(
                &got,
                &want,
                1e-12,
                &format!("soft_max {ne:?} mask {mask:?}"),
            );
        }
    }
}

#[test]
fn norm_and_rms_norm_over_odd_and_permuted_rows() {
    let mut rng = Rng::new(4);
    for (shape, axes) in [
        ([64, 5, 4, 3], NO_PERMUTE),
        ([1025, 5, 4, 3], NO_PERMUTE),
        ([5, 33, 4, 3], [1, 0, 2, 3]),
    ] {
        for eps in [0.0f32, 1e-6, 1e-4, 0.1, 10.0] {
            for rms in [false, true] {
                let mut g = Graph::new();
                let range = if rms { (-10.0, 10.0) } else { (-1.0, 1.0) };
                let a = operand(&mut g, &mut rng, DType::F32, shape, axes, range);
                let out = if rms {
                    g.rms_norm(a.id, eps)
                } else {
                    g.norm(a.id, eps)
                }
                .unwrap();
                let n0 = a.ne[0];
                let mut want = Vec::new();
                for row in a.vals.chunks(n0) {
                    let mean = if rms {
                        0.0
                    } else {
                        row.iter().sum::<f64>() / n0 as f64
                    };
                    let var = row.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n0 as f64;
                    want.extend(row.iter().map(|x| (x - mean) / (var + eps as f64).sqrt()));
                }
                let got = run(g, &[&a], out);
                assert_close(
                    &got,
                    &want,
                    1e-11,
                    &format!("norm rms={rms} {shape:?} eps={eps}"),
                );
            }
        }
    }
}

#[test]
fn diag_mask_inf_masks_the_future() {
    let mut rng = Rng::new(5);
    for ne in [[10, 10, 1, 1], [10, 10, 3, 1], [10, 10, 3, 2]] {
        let mut g = Graph::new();
        let a = operand(&mut g, &mut rng, DType::F32, ne, NO_PERMUTE, (-1.0, 1.0));
        let out = g.diag_mask_inf(a.id, 5).unwrap();
        let want: Vec<f64> = indices(ne)
            .map(|i| {
                if i[0] > 5 + i[1] {
                    f64::NEG_INFINITY
                } else {
                    a.at(i)
                }
            })
            .collect();
        let got = run(g, &[&a], out);
        assert_close(&got, &want, 0.0, &format!("diag_mask_inf {ne:?}"));
    }
}

/// Reference mul_mat in f64 over logical values.
fn mul_mat_ref(a: &Operand, b: &Operand) -> Vec<f64> {
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let out_ne = [a.ne[1], b.ne[1], b.ne[2], b.ne[3]];
    indices(out_ne)
        .map(|[m, n, i2, i3]| {
            (0..a.ne[0])
                .map(|k| a.at([k, m, i2 / r2, i3 / r3]) * b.at([k, n, i2, i3]))
                .sum()
        })
        .collect()
}

#[test]
fn mul_mat_float_weights_with_broadcast_and_permutes() {
    let mut rng = Rng::new(6);
    // (a storage, a permute, b storage, b permute)
    let cases = [
        ([256, 16, 1, 1], NO_PERMUTE, [256, 1, 1, 1], NO_PERMUTE),
        ([256, 16, 1, 1], NO_PERMUTE, [256, 9, 1, 1], NO_PERMUTE),
        ([67, 33, 2, 3], NO_PERMUTE, [67, 5, 2, 3], NO_PERMUTE),
        ([64, 16, 2, 1], NO_PERMUTE, [64, 8, 6, 2], NO_PERMUTE), // GQA broadcast over dims 2, 3
        ([64, 2, 16, 1], [0, 2, 1, 3], [64, 6, 3, 1], [0, 2, 1, 3]), // permuted, as K and Q in attention
        ([16, 64, 2, 1], [1, 0, 2, 3], [64, 4, 2, 1], NO_PERMUTE), // transposed weights: strided rows
    ];
    for dtype in [DType::F32, DType::F16] {
        for (sa, pa, sb, pb) in cases {
            let mut g = Graph::new();
            let a = operand(&mut g, &mut rng, dtype, sa, pa, (-1.0, 1.0));
            let b = operand(&mut g, &mut rng, DType::F32, sb, pb, (-1.0, 1.0));
            let out = g.mul_mat(a.id, b.id).unwrap();
            let want = mul_mat_ref(&a, &b);
            let got = run(g, &[&a, &b], out);
            assert_close(
                &got,
                &want,
                1e-11,
                &format!("mul_mat {dtype} {:?} x {:?}", a.ne, b.ne),
            );
        }
    }
}

#[test]
fn mul_mat_and_get_rows_with_quantized_weights() {
    let mut rng = Rng::new(7);
    for dtype in DType::ALL.into_iter().filter(|t| t.is_quantized()) {
        for n in [1, 7] {
            // Weights are quantized when written; the reference uses their dequantized values.
            let w = rng.vec(512 * 12, -1.0, 1.0);
            let mut deq = vec![0.0; w.len()];
            quant::dequantize_row(dtype, &quant::quantize_row(dtype, &w).unwrap(), &mut deq)
                .unwrap();
            let mut g = Graph::new();
            let wa = g.input("w", dtype, &[512, 12]).unwrap();
            let b = operand(
                &mut g,
                &mut rng,
                DType::F32,
                [512, n, 2, 1],
                NO_PERMUTE,
                (-1.0, 1.0),
            );
            let out = g.mul_mat(wa, b.id).unwrap();
            let inputs = vec![
                (wa, Fill::F32(w.clone())),
                (b.storage, Fill::F32(b.stored.clone())),
            ];
            let dequantized = Operand {
                id: wa,
                storage: wa,
                stored: vec![],
                ne: [512, 12, 1, 1],
                vals: deq.iter().map(|&v| v as f64).collect(),
            };
            let want = mul_mat_ref(&dequantized, &b);
            let got = run_cpu(g, &inputs, out).unwrap();
            assert_close(&got, &want, 1e-11, &format!("mul_mat {dtype} n={n}"));

            // get_rows of the same table, rows in arbitrary order and repeated.
            let ids: Vec<i32> = (0..5).map(|_| rng.below(12) as i32).collect();
            let mut g = Graph::new();
            let table = g.input("w", dtype, &[512, 12]).unwrap();
            let idx = g.input("ids", DType::I32, &[5]).unwrap();
            let rows = g.get_rows(table, idx).unwrap();
            let inputs = vec![(table, Fill::F32(w)), (idx, Fill::I32(ids.clone()))];
            let got = run_cpu(g, &inputs, rows).unwrap();
            let want: Vec<f64> = ids
                .iter()
                .flat_map(|&r| dequantized.vals[r as usize * 512..][..512].to_vec())
                .collect();
            assert_close(&got, &want, 0.0, &format!("get_rows {dtype}"));
        }
    }
}

/// The fast path (activations quantized to q8 blocks, integer dots) against
/// the exact product of the dequantized weights, within test-backend-ops'
/// mul_mat limit: mat-vec and mat-mat, odd row counts, batches with
/// broadcast weights, permuted activations. f16 weights take the
/// vectorized f16 dot (exact conversions, f32 sums in another order: within
/// the exact limit), rows it cannot quantize (K not a multiple of 32) the
/// reference loops. Rows go four at a time with four columns at a time
/// where the SIMD loops have tiles; a row's results are the same on one
/// thread and on two.
/// A fast-path case: weight type, K, rows, activations' shape and axes.
type FastCase = (DType, usize, usize, [usize; 4], [usize; 4]);

#[test]
fn quantized_dots_stay_within_the_mul_mat_limit() {
    let fast = CpuBackend::with_threads(2).with_quantized_dots(true);
    let one_thread = CpuBackend::with_threads(1).with_quantized_dots(true);
    let mut rng = Rng::new(11);
    let cases: [FastCase; 33] = [
        // Tiles of four rows by four columns, and rows and columns past them.
        (DType::Q4_0, 128, 9, [128, 6, 2, 1], NO_PERMUTE),
        (DType::Q5_0, 64, 10, [64, 5, 1, 1], NO_PERMUTE),
        (DType::Q5_1, 96, 6, [96, 4, 1, 1], NO_PERMUTE),
        (DType::Q8_0, 256, 6, [256, 7, 1, 1], NO_PERMUTE),
        (DType::Q4_0, 256, 13, [256, 1, 1, 1], NO_PERMUTE),
        (DType::Q4_1, 96, 7, [96, 9, 1, 1], NO_PERMUTE),
        (DType::Q8_0, 512, 5, [512, 3, 2, 1], NO_PERMUTE),
        (DType::Q4_0, 64, 3, [64, 4, 3, 2], [0, 2, 1, 3]),
        (DType::Q4_1, 576, 33, [576, 1, 1, 1], NO_PERMUTE),
        (DType::Q6K, 256, 4, [256, 2, 1, 1], NO_PERMUTE),
        (DType::Q5_0, 64, 5, [64, 3, 1, 1], NO_PERMUTE),
        (DType::Q5_1, 96, 4, [96, 1, 2, 1], NO_PERMUTE),
        (DType::Q4K, 512, 6, [512, 2, 1, 1], NO_PERMUTE),
        (DType::Q5K, 256, 5, [256, 3, 1, 1], NO_PERMUTE),
        (DType::Q2K, 512, 5, [512, 5, 1, 1], NO_PERMUTE),
        (DType::Q3K, 256, 7, [256, 2, 3, 1], [0, 2, 1, 3]),
        // Super-block-scaled activations (ggml's q8_K) by column quads.
        (DType::Q4K, 256, 11, [256, 6, 1, 1], NO_PERMUTE),
        (DType::Q5K, 512, 6, [512, 9, 1, 1], NO_PERMUTE),
        (DType::Q6K, 512, 9, [512, 6, 1, 1], NO_PERMUTE),
        (DType::IQ4XS, 256, 5, [256, 6, 1, 1], NO_PERMUTE),
        (DType::IQ4XS, 512, 3, [512, 1, 1, 1], NO_PERMUTE),
        (DType::IQ4NL, 64, 9, [64, 6, 1, 1], NO_PERMUTE),
        // One column (a decode step) of every block type the rows above
        // take only in tiles or column quads.
        (DType::Q8_0, 128, 5, [128, 1, 1, 1], NO_PERMUTE),
        (DType::Q5_0, 96, 6, [96, 1, 1, 1], NO_PERMUTE),
        (DType::Q4K, 256, 5, [256, 1, 1, 1], NO_PERMUTE),
        (DType::Q5K, 256, 3, [256, 1, 1, 1], NO_PERMUTE),
        (DType::Q6K, 512, 4, [512, 1, 1, 1], NO_PERMUTE),
        (DType::Q2K, 256, 6, [256, 1, 1, 1], NO_PERMUTE),
        (DType::Q3K, 512, 3, [512, 1, 1, 1], NO_PERMUTE),
        (DType::IQ4NL, 96, 7, [96, 1, 1, 1], NO_PERMUTE),
        (DType::F16, 40, 6, [40, 3, 1, 1], NO_PERMUTE),
        // Attention's shapes: K cache rows of a head times a permuted query.
        (DType::F16, 64, 9, [64, 5, 3, 1], [0, 2, 1, 3]),
        (DType::F16, 1000, 4, [1000, 1, 2, 1], NO_PERMUTE),
    ];
    for (dtype, k, m, b_ne, axes) in cases {
        let w = rng.vec(k * m, -1.0, 1.0);
        let stored = match dtype {
            DType::F16 => w.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect(),
            _ => {
                let mut deq = vec![0.0; w.len()];
                let bytes = quant::quantize_row(dtype, &w).unwrap();
                quant::dequantize_row(dtype, &bytes, &mut deq).unwrap();
                deq
            }
        };
        let mut g = Graph::new();
        let wa = g.input("w", dtype, &[k, m]).unwrap();
        let b = operand(&mut g, &mut rng, DType::F32, b_ne, axes, (-2.0, 2.0));
        let out = g.mul_mat(wa, b.id).unwrap();
        let inputs = vec![(wa, Fill::F32(w)), (b.storage, Fill::F32(b.stored.clone()))];
        let weights = Operand {
            id: wa,
            storage: wa,
            stored: vec![],
            ne: [k, m, 1, 1],
            vals: stored.iter().map(|&v| v as f64).collect(),
        };
        let want = mul_mat_ref(&weights, &b);
        let got = run_on(&fast, g.clone(), &inputs, out).unwrap();
        let serial = run_on(&one_thread, g, &inputs, out).unwrap();
        assert_eq!(
            got, serial,
            "{dtype} k={k} b={b_ne:?}: one thread and two differ"
        );
        let limit = if quant::q8_dot::supports(dtype) {
            5e-4
        } else {
            1e-11
        };
        assert_close(
            &got,
            &want,
            limit,
            &format!("fast mul_mat {dtype} k={k} b={b_ne:?}"),
        );
    }
}

/// mul_mat_id: each column by the expert its id names, on the reference
/// (exact) and the fast path (q8 activations: the mul_mat limit), with one
/// activation column per token shared by its slots and one per slot; an id
/// past the experts is an error.
#[test]
fn mul_mat_id_multiplies_each_column_by_its_expert() {
    let fast = CpuBackend::with_threads(2).with_quantized_dots(true);
    let reference = CpuBackend::with_threads(2);
    let mut rng = Rng::new(12);
    let (k, m, n_expert, n_used, t) = (256, 6, 4, 2, 5);
    for dtype in [DType::F32, DType::Q4_0, DType::Q4K] {
        for x in [1, n_used] {
            let w = rng.vec(k * m * n_expert, -1.0, 1.0);
            let mut deq = vec![0.0; w.len()];
            match dtype {
                DType::F32 => deq.copy_from_slice(&w),
                _ => {
                    let bytes = quant::quantize_row(dtype, &w).unwrap();
                    quant::dequantize_row(dtype, &bytes, &mut deq).unwrap();
                }
            }
            let ids: Vec<i32> = (0..n_used * t)
                .map(|_| rng.below(n_expert) as i32)
                .collect();
            let mut g = Graph::new();
            let experts = g.input("experts", dtype, &[k, m, n_expert]).unwrap();
            let b = operand(
                &mut g,
                &mut rng,
                DType::F32,
                [k, x, t, 1],
                NO_PERMUTE,
                (-1.0, 1.0),
            );
            let idx = g.input("ids", DType::I32, &[n_used, t]).unwrap();
            let out = g.mul_mat_id(experts, b.id, idx).unwrap();
            let want: Vec<f64> = indices([m, n_used, t, 1])
                .map(|[row, slot, token, _]| {
                    let e = ids[token * n_used + slot] as usize;
                    (0..k)
                        .map(|i| deq[(e * m + row) * k + i] as f64 * b.at([i, slot % x, token, 0]))
                        .sum()
                })
                .collect();
            let inputs = vec![
                (experts, Fill::F32(w)),
                (b.storage, Fill::F32(b.stored.clone())),
                (idx, Fill::I32(ids.clone())),
            ];
            let what = format!("mul_mat_id {dtype} x={x}");
            let got = run_on(&reference, g.clone(), &inputs, out).unwrap();
            assert_close(&got, &want, 1e-11, &what);
            let got = run_on(&fast, g.clone(), &inputs, out).unwrap();
            let limit = if dtype == DType::F32 { 1e-11 } else { 5e-4 };
            assert_close(&got, &want, limit, &format!("fast {what}"));
            let mut bad = inputs;
            bad[2].1 = Fill::I32(vec![n_expert as i32; n_used * t]);
            assert!(
                run_on(&reference, g, &bad, out).is_err(),
                "{what}: an id past the experts"
            );
        }
    }
}

#[test]
fn get_rows_float_tables_with_batches_and_bad_indices() {
    let mut rng = Rng::new(8);
    for dtype in [DType::F32, DType::F16] {
        let mut g = Graph::new();
        let a = operand(
            &mut g,
            &mut rng,
            dtype,
            [7, 5, 3, 1],
            NO_PERMUTE,
            (-1.0, 1.0),
        );
        let idx = g.input("ids", DType::I32, &[4, 3]).unwrap();
        let ids: Vec<i32> = (0..12).map(|_| rng.below(5) as i32).collect();
        let out = g.get_rows(a.id, idx).unwrap();
        let want: Vec<f64> = indices([7, 4, 3, 1])
            .map(|[c, r, j, _]| a.at([c, ids[r + 4 * j] as usize, j, 0]))
            .collect();
        let inputs = vec![
            (a.storage, Fill::F32(a.stored.clone())),
            (idx, Fill::I32(ids)),
        ];
        let got = run_cpu(g, &inputs, out).unwrap();
        assert_close(&got, &want, 0.0, &format!("get_rows {dtype}"));
    }
    let mut g = Graph::new();
    let a = g.input("t", DType::F32, &[4, 3]).unwrap();
    let idx = g.input("ids", DType::I32, &[1]).unwrap();
    let out = g.get_rows(a, idx).unwrap();
    let err = run_cpu(
        g,
        &[(a, Fill::F32(vec![0.0; 12])), (idx, Fill::I32(vec![3]))],
        out,
    )
    .unwrap_err();
    assert!(err.to_string().contains("row index 3"), "{err}");
}

/// Rope written from its definition: pair `(j0, j1)` of dims `< n_dims` rotates by
/// `pos * base^(-i0/n_dims)`, with YaRN's ramp between interpolated and extrapolated angles.
fn rope_ref(x: &Operand, pos: &[i32], p: &RopeParams) -> Vec<f64> {
    let nd = p.n_dims as f64;
    let corr_dim = |n_rot: f64| {
        nd * (p.n_ctx_orig as f64 / (n_rot * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * (p.freq_base as f64).ln())
    };
    let lo = corr_dim(p.beta_fast as f64).floor().max(0.0);
    let hi = corr_dim(p.beta_slow as f64).ceil().min(nd - 1.0);
    let mut out = x.vals.clone();
    for [_, i1, i2, i3] in indices([1, x.ne[1], x.ne[2], x.ne[3]]) {
        for i0 in (0..p.n_dims).step_by(2) {
            let extrap = pos[i2] as f64 * (p.freq_base as f64).powf(-(i0 as f64) / nd);
            let interp = extrap * p.freq_scale as f64;
            let (mut theta, mut mag) = (interp, p.attn_factor as f64);
            if p.ext_factor != 0.0 {
                let ramp = 1.0 - (((i0 / 2) as f64 - lo) / (hi - lo).max(0.001)).clamp(0.0, 1.0);
                let mix = ramp * p.ext_factor as f64;
                theta = interp * (1.0 - mix) + extrap * mix;
                mag *= 1.0 + 0.1 * (1.0 / p.freq_scale as f64).ln();
            }
            let (j0, j1) = match p.mode {
                RopeMode::Normal => (i0, i0 + 1),
                RopeMode::Neox => (i0 / 2, i0 / 2 + p.n_dims / 2),
            };
            let (a, b) = (x.at([j0, i1, i2, i3]), x.at([j1, i1, i2, i3]));
            out[flat(x.ne, [j0, i1, i2, i3])] = (a * theta.cos() - b * theta.sin()) * mag;
            out[flat(x.ne, [j1, i1, i2, i3])] = (a * theta.sin() + b * theta.cos()) * mag;
        }
    }
    out
}

#[test]
fn rope_normal_and_neox_with_and_without_yarn() {
    let mut rng = Rng::new(9);
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        for (ne, n_dims) in [
            ([128, 4, 3, 1], 128),
            ([64, 3, 5, 1], 32),
            ([36, 2, 4, 1], 20),
        ] {
            for yarn in [false, true] {
                for dtype in [DType::F32, DType::F16] {
                    let mut p = RopeParams::new(mode, n_dims, 10000.0);
                    if yarn {
                        (p.freq_scale, p.ext_factor, p.attn_factor, p.n_ctx_orig) =
                            (1.0 / 1.4245, 0.7465, 1.4245, 512);
                    }
                    let mut g = Graph::new();
                    let x = operand(&mut g, &mut rng, dtype, ne, NO_PERMUTE, (-1.0, 1.0));
                    let pos_id = g.input("pos", DType::I32, &[ne[2]]).unwrap();
                    let pos: Vec<i32> = (0..ne[2]).map(|_| rng.below(512) as i32).collect();
                    let out = g.rope(x.id, pos_id, p).unwrap();
                    let round = |v: f64| if dtype == DType::F16 { f16_round(v) } else { v };
                    let want: Vec<f64> = rope_ref(&x, &pos, &p).into_iter().map(round).collect();
                    let inputs = vec![
                        (x.storage, Fill::F32(x.stored.clone())),
                        (pos_id, Fill::I32(pos)),
                    ];
                    let got = run_cpu(g, &inputs, out).unwrap();
                    let limit = if dtype == DType::F16 { 1e-6 } else { 1e-9 };
                    assert_close(
                        &got,
                        &want,
                        limit,
                        &format!("rope {mode:?} {ne:?} n_dims={n_dims} yarn={yarn} {dtype}"),
                    );
                }
            }
        }
    }
}

#[test]
fn cpy_cont_and_cast_between_f32_and_f16_layouts() {
    let mut rng = Rng::new(10);
    for (src_t, dst_t) in [
        (DType::F32, DType::F32),
        (DType::F32, DType::F16),
        (DType::F16, DType::F32),
        (DType::F16, DType::F16),
    ] {
        for axes in [NO_PERMUTE, [0, 2, 1, 3], [1, 0, 2, 3], [0, 3, 1, 2]] {
            let mut g = Graph::new();
            let a = operand(
                &mut g,
                &mut rng,
                src_t,
                [32, 3, 5, 7],
                axes,
                (-150.0, 150.0),
            );
            let out = g.cast(a.id, dst_t).unwrap();
            let round = |v: f64| if dst_t == DType::F16 { f16_round(v) } else { v };
            let want: Vec<f64> = a.vals.iter().map(|&v| round(v)).collect();
            let got = run(g, &[&a], out);
            assert_close(
                &got,
                &want,
                0.0,
                &format!("cast {src_t}->{dst_t} via {axes:?}"),
            );
        }
    }

    // cpy into a strided window of a larger tensor, as a KV-cache write does.
    let mut g = Graph::new();
    let src = operand(
        &mut g,
        &mut rng,
        DType::F32,
        [8, 3, 1, 1],
        NO_PERMUTE,
        (-1.0, 1.0),
    );
    let cache = g.input("cache", DType::F16, &[8, 10]).unwrap();
    let row_bytes = 8 * 2;
    let window = g.view(cache, &[8, 3], &[row_bytes], 4 * row_bytes).unwrap();
    let written = g.cpy(src.id, window).unwrap();
    g.set_output(written).unwrap();
    let inputs = vec![
        (src.storage, Fill::F32(src.stored.clone())),
        (cache, Fill::F32(vec![7.0; 80])),
    ];
    let got = run_cpu(g, &inputs, cache).unwrap();
    let want: Vec<f64> = (0..80)
        .map(|i| {
            if (32..56).contains(&i) {
                f16_round(src.vals[i - 32])
            } else {
                7.0
            }
        })
        .collect();
    assert_close(&got, &want, 0.0, "cpy into a cache window");
}

#[test]
fn builders_reject_mismatched_operands() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4, 3]).unwrap();
    let b = g.input("b", DType::F32, &[3, 3]).unwrap();
    let q = g.input("q", DType::Q4_0, &[32, 2]).unwrap();
    let i = g.input("i", DType::I32, &[2]).unwrap();
    assert!(g.add(a, b).is_err(), "3 does not divide 4");
    assert!(g.mul_mat(a, b).is_err(), "K differs");
    assert!(g.silu(q).is_err(), "unary ops take floats");
    assert!(
        g.rope(a, i, RopeParams::new(RopeMode::Normal, 4, 1e4))
            .is_err(),
        "positions per dim 2"
    );
    assert!(g.reshape(a, &[5, 2]).is_err(), "element count differs");
    assert!(
        g.view(a, &[4, 4], &[16], 0).is_err(),
        "view runs past the tensor"
    );
    assert!(
        g.permute(q, [1, 0, 2, 3]).is_err(),
        "quantized rows stay rows"
    );
    assert!(g.input("bad", DType::Q4_0, &[33]).is_err(), "partial block");
}
