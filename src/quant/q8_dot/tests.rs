use super::*;
use crate::quant::{dot_row, quantize_row};

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

/// The portable loop's dot of a row of `dtype` with `xq`.
fn portable_dot(dtype: DType, w: &[u8], xq: &Q8Row) -> Option<f32> {
    Some(match dtype {
        DType::Q4_0 => with_blocks(w, |b| portable::q4_0(b, xq)),
        DType::Q4_1 => with_blocks(w, |b| portable::q4_1(b, xq)),
        DType::Q8_0 => with_blocks(w, |b| portable::q8_0(b, xq)),
        DType::Q5_0 => with_blocks(w, |b| portable::q5_0(b, xq)),
        DType::Q5_1 => with_blocks(w, |b| portable::q5_1(b, xq)),
        DType::Q4K => with_blocks(w, |b| portable::q4_k(b, xq)),
        DType::Q5K => with_blocks(w, |b| portable::q5_k(b, xq)),
        DType::Q6K => with_blocks(w, |b| portable::q6_k(b, xq)),
        DType::Q2K => with_blocks(w, |b| two_bit::portable::q2_k(b, xq)),
        DType::Q3K => with_blocks(w, |b| two_bit::portable::q3_k(b, xq)),
        DType::IQ4NL => with_blocks(w, |b| portable::iq4_nl(b, xq)),
        DType::IQ4XS => with_blocks(w, |b| portable::iq4_xs(b, xq)),
        _ => return None,
    })
}

#[test]
fn q8_dots_are_close_to_the_reference_for_every_type() {
    let n = 256;
    let x = values(n, 7);
    let mut xq = Q8Row::default();
    xq.quantize(&x).unwrap();
    for dtype in DType::ALL.into_iter().filter(|t| supports(*t)) {
        let w = quantize_row(dtype, &values(n, 99)).unwrap();
        let exact = dot_row(dtype, &w, &x).unwrap();
        let fast = dot(dtype, &w, &xq).unwrap();
        assert!(
            (exact - fast).abs() <= 0.01 * exact.abs().max(1.0),
            "{dtype}: {exact} vs {fast}"
        );
        let mut both = [0.0; 2];
        dots(dtype, &w, &[xq.clone(), xq.clone()], &mut both).unwrap();
        assert_eq!(both, [fast, fast]);
        let portable = portable_dot(dtype, &w, &xq).unwrap_or(fast);
        // Integer sums are exact; only the f32 accumulation order may differ.
        assert!((portable - fast).abs() <= 1e-4 * fast.abs().max(1.0));
    }
}

#[test]
fn column_groups_give_each_column_its_own_dot() {
    // Six columns: one group of four, then two one by one.
    let n = 256;
    let xs: Vec<Q8Row> = (0..6)
        .map(|c| {
            let mut q = Q8Row::default();
            q.quantize(&values(n, 11 + c)).unwrap();
            q
        })
        .collect();
    for dtype in DType::ALL.into_iter().filter(|t| supports(*t)) {
        let w = quantize_row(dtype, &values(n, 5)).unwrap();
        let mut got = [0.0; 6];
        dots(dtype, &w, &xs, &mut got).unwrap();
        // One column alone may take another loop (decode's four row
        // streams), which sums in another order.
        for (j, x) in xs.iter().enumerate() {
            let alone = dot(dtype, &w, x).unwrap();
            assert!(
                (got[j] - alone).abs() <= 1e-5 * alone.abs().max(1.0),
                "{dtype} column {j}: {} vs {alone}",
                got[j]
            );
        }
    }
}

/// `n` columns of `k` activations, quantized.
fn quantized_columns(n: usize, k: usize, seed: u32) -> Vec<Q8Row> {
    (0..n as u32)
        .map(|c| {
            let mut q = Q8Row::default();
            q.quantize(&values(k, seed + c)).unwrap();
            q
        })
        .collect()
}

/// `m` rows of `k` weights of `dtype`.
fn quantized_rows(dtype: DType, m: usize, k: usize, seed: u32) -> Vec<Vec<u8>> {
    (0..m as u32)
        .map(|r| quantize_row(dtype, &values(k, seed + r)).unwrap())
        .collect()
}

/// The `m` rows `all` times `xs` in two calls, the second from row
/// `first` (a thread's part), row by row.
fn rows_in_two_runs(dots: &RowDots, all: &[u8], m: usize, xs: &[Q8Row], first: usize) -> Vec<f32> {
    let n = xs.len();
    let split = first * all.len() / m;
    let mut out = vec![0.0; m * n];
    let (head, tail) = out.split_at_mut(first * n);
    dots.rows(&all[..split], 0, xs, head).unwrap();
    dots.rows(&all[split..], first, xs, tail).unwrap();
    out
}

/// Each of `got` (row r, column c at r * columns + c) within `tolerance`
/// (relative, absolute below 1) of `want` for that row and column, where
/// `want` gives a value.
fn assert_each_near(
    dtype: DType,
    rows: &[Vec<u8>],
    xs: &[Q8Row],
    got: &[f32],
    want: impl Fn(&[u8], &Q8Row) -> Option<f32>,
    tolerance: f32,
) {
    let n = xs.len();
    for (r, row) in rows.iter().enumerate() {
        for (c, x) in xs.iter().enumerate() {
            let Some(want) = want(row, x) else {
                continue;
            };
            let got = got[r * n + c];
            assert!(
                (want - got).abs() <= tolerance * want.abs().max(1.0),
                "{dtype} row {r} column {c}: {want} vs {got}"
            );
        }
    }
}

#[test]
fn row_groups_match_single_rows_and_do_not_depend_on_the_split() {
    // Twenty-nine rows by six columns: sixteen rows together (AVX-512
    // VNNI's nibble rows), tiles of four rows by four columns where the
    // SIMD loops have them, single rows and columns around.
    let (k, m, n) = (256, 29, 6);
    let xs = quantized_columns(n, k, 21);
    for dtype in DType::ALL.into_iter().filter(|t| supports(*t)) {
        let rows = quantized_rows(dtype, m, k, 40);
        let all = rows.concat();
        let dots = RowDots::new(dtype, k).unwrap();
        let whole = rows_in_two_runs(&dots, &all, m, &xs, 0);
        // The same rows in two runs, split where a thread's part may
        // start (a multiple of sixteen rows).
        let parts = rows_in_two_runs(&dots, &all, m, &xs, TILE_ROWS);
        assert_eq!(whole, parts, "{dtype}");
        let single = |row: &[u8], x: &Q8Row| Some(dot(dtype, row, x).unwrap());
        assert_each_near(dtype, &rows, &xs, &whole, single, 1e-5);
    }
}

#[test]
fn decode_rows_match_single_rows_and_do_not_depend_on_the_split() {
    // One to three columns: nibble rows of 2048 values and more go in
    // four streams on x86 (AVX2), each row's dot apart from the three
    // beside it, so thirteen rows split anywhere (after two or five rows
    // here) give the same results; shorter ones one row at a time.
    let m = 13;
    for (k, n) in [256, 2048]
        .into_iter()
        .flat_map(|k| (1..4).map(move |n| (k, n)))
    {
        let xs = quantized_columns(n, k, 31);
        for dtype in DType::ALL.into_iter().filter(|t| supports(*t)) {
            let rows = quantized_rows(dtype, m, k, 60);
            let all = rows.concat();
            let dots = RowDots::new(dtype, k).unwrap();
            let whole = rows_in_two_runs(&dots, &all, m, &xs, 0);
            for first in [2, 5] {
                let parts = rows_in_two_runs(&dots, &all, m, &xs, first);
                assert_eq!(
                    whole, parts,
                    "{dtype}, k {k}, {n} columns, split after {first}"
                );
            }
            // Integer sums are exact; the f32 accumulation order may differ.
            let portable = |row: &[u8], x: &Q8Row| portable_dot(dtype, row, x);
            assert_each_near(dtype, &rows, &xs, &whole, portable, 1e-4);
        }
    }
}

#[test]
fn the_simd_encoding_is_the_portable_one() {
    // Values whose scaled codes fall on and next to halves, so that
    // rounding ties and near-ties are covered.
    let mut x = values(1024, 3);
    for (i, v) in x.iter_mut().enumerate().step_by(7) {
        *v = (i % 255) as f32 / 2.0 - 63.5;
    }
    // A scale of exactly 1 in every other block: halves are ties.
    for v in x.iter_mut().step_by(2 * BLOCK) {
        *v = 127.0;
    }
    let blocks = x.len() / BLOCK;
    // Per block and per 256-value super-block.
    for group in [1, SUPER] {
        let (mut q, mut d, mut halves) =
            (vec![0i8; x.len()], vec![0.0; blocks], vec![[0; 2]; blocks]);
        encode(&x, group, &mut q, &mut d, &mut halves);
        let (mut q2, mut d2, mut halves2) =
            (vec![0i8; x.len()], vec![0.0; blocks], vec![[0; 2]; blocks]);
        encode_blocks(&x, group, &mut q2, &mut d2, &mut halves2);
        assert_eq!((q, d, halves), (q2, d2, halves2));
    }
}

#[test]
fn super_blocks_share_one_scale() {
    let x = values(512, 5);
    let mut xq = Q8Row::default();
    xq.quantize_super(&x).unwrap();
    assert!(xq.shares_scales());
    for (run, xs) in xq.d.chunks_exact(SUPER).zip(x.chunks_exact(BLOCK * SUPER)) {
        let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(run.iter().all(|&d| d == amax / 127.0), "{run:?}");
    }
    assert!(xq.quantize_super(&x[..224]).is_err());
    xq.quantize(&x).unwrap();
    assert!(!xq.shares_scales());
}

#[test]
fn bad_rows_are_errors() {
    let mut xq = Q8Row::default();
    assert!(xq.quantize(&[1.0; 33]).is_err());
    xq.quantize(&[1.0; 64]).unwrap();
    assert!(dot(DType::Q4_0, &[0; 18], &xq).is_err());
    assert!(dot(DType::F16, &[0; 128], &xq).is_err());
    assert_eq!(dot(DType::Q8_0, &[0; 68], &xq).unwrap(), 0.0);
}
