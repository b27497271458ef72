//! llama.cpp's `test-quantize-fns` checks, reimplemented against wginfer's
//! reference row functions, plus row-level error handling.
//!
//! ggml quantizes the second operand of its dot test to the type's
//! `vec_dot_type` (q8_0, q8_1 or q8_K); `dot_row` takes `f32` activations, so
//! here only the first operand is quantized.

use approx::assert_relative_eq;
use wginfer::quant::{dequantize_row, dot_row, quantize_row};
use wginfer::{DType, Error};

/// test-quantize-fns' `test_size`: a whole number of 256-value q6_K blocks.
const N: usize = 32 * 128;
const MAX_QUANTIZATION_TOTAL_ERROR: f64 = 0.002;
const MAX_QUANTIZATION_TOTAL_ERROR_2BITS: f64 = 0.0075;
const MAX_QUANTIZATION_TOTAL_ERROR_3BITS: f64 = 0.0040;
const MAX_DOT_PRODUCT_ERROR: f64 = 0.02;
const MAX_DOT_PRODUCT_ERROR_LOWBIT: f64 = 0.04;

/// test-quantize-fns' bound on the round trip's error for `dtype`.
fn max_quantization_error(dtype: DType) -> f64 {
    match dtype {
        DType::Q2K => MAX_QUANTIZATION_TOTAL_ERROR_2BITS,
        DType::Q3K => MAX_QUANTIZATION_TOTAL_ERROR_3BITS,
        _ => MAX_QUANTIZATION_TOTAL_ERROR,
    }
}

/// test-quantize-fns' bound on the dot product's error for `dtype` (q3_K
/// keeps the general one).
fn max_dot_error(dtype: DType) -> f64 {
    match dtype {
        DType::Q2K => MAX_DOT_PRODUCT_ERROR_LOWBIT,
        _ => MAX_DOT_PRODUCT_ERROR,
    }
}

/// Every block-quantized type.
fn quant_types() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|t| t.is_quantized())
}

/// test-quantize-fns' `generate_data`.
fn synthetic_data(offset: f32) -> Vec<f32> {
    (0..N)
        .map(|i| 0.1 + 2.0 * (i as f32 + offset).cos())
        .collect()
}

/// test-quantize-fns' `array_rmse`: the root of the summed squared error,
/// divided by `n` (not by `sqrt(n)`).
fn total_error(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
        .sum();
    sum.sqrt() / a.len() as f64
}

fn dot_f64(x: &[f32], y: &[f32]) -> f64 {
    x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum()
}

fn round_trip(dtype: DType, x: &[f32]) -> Vec<f32> {
    let bytes = quantize_row(dtype, x).unwrap();
    assert_eq!(bytes.len(), dtype.row_bytes(x.len()).unwrap());
    let mut out = vec![f32::NAN; x.len()];
    dequantize_row(dtype, &bytes, &mut out).unwrap();
    out
}

fn round_trip_error(dtype: DType) -> f64 {
    let x = synthetic_data(0.0);
    total_error(&x, &round_trip(dtype, &x))
}

#[test]
fn round_trip_error_within_ggml_bound() {
    for dtype in quant_types() {
        let err = round_trip_error(dtype);
        println!("{dtype}: absolute quantization error {err:.6}");
        assert!(err <= max_quantization_error(dtype), "{dtype}: {err}");
    }
}

#[test]
fn dot_product_error_within_ggml_bound() {
    let (x, y) = (synthetic_data(0.0), synthetic_data(1.0));
    let want = dot_f64(&x, &y);
    for dtype in quant_types() {
        let bytes = quantize_row(dtype, &x).unwrap();
        let got = dot_row(dtype, &bytes, &y).unwrap() as f64;
        let err = (got - want).abs() / N as f64;
        println!("{dtype}: dot product error {err:.6} ({got} vs {want})");
        assert!(err <= max_dot_error(dtype), "{dtype}: {err}");
    }
}

#[test]
fn dot_row_matches_dequantized_dot() {
    // The fused dot loops must agree with dequantize_row up to f32 rounding.
    let (x, y) = (synthetic_data(0.0), synthetic_data(1.0));
    for dtype in quant_types() {
        let bytes = quantize_row(dtype, &x).unwrap();
        let mut deq = vec![0.0; N];
        dequantize_row(dtype, &bytes, &mut deq).unwrap();
        let got = dot_row(dtype, &bytes, &y).unwrap() as f64;
        assert_relative_eq!(got, dot_f64(&deq, &y), epsilon = 1e-2, max_relative = 1e-4);
    }
}

#[test]
fn q8_0_is_much_more_precise_than_q4_0() {
    let (q8, q4) = (round_trip_error(DType::Q8_0), round_trip_error(DType::Q4_0));
    // 16x finer steps: expect an order of magnitude.
    assert!(q8 * 10.0 < q4, "q8_0 {q8} vs q4_0 {q4}");
    // q6_K sits in between.
    let q6 = round_trip_error(DType::Q6K);
    assert!(q8 < q6 && q6 < q4, "q6_K {q6}");
    // Fewer bits, more error: q2_K, q3_K, q4_K.
    let (e2, e3, e4) = (
        round_trip_error(DType::Q2K),
        round_trip_error(DType::Q3K),
        round_trip_error(DType::Q4K),
    );
    assert!(e2 > e3 && e3 > e4, "q2_K {e2}, q3_K {e3}, q4_K {e4}");
    // A fifth bit halves the step.
    for (q5, q4) in [(DType::Q5_0, DType::Q4_0), (DType::Q5_1, DType::Q4_1)] {
        let (e5, e4) = (round_trip_error(q5), round_trip_error(q4));
        assert!(e5 * 1.5 < e4, "{q5} {e5} vs {q4} {e4}");
    }
}

#[test]
fn row_lengths_are_checked() {
    let x = synthetic_data(0.0);
    let bytes = quantize_row(DType::Q4_0, &x[..64]).unwrap();
    assert_eq!(bytes.len(), 36);
    let mut out = vec![0.0; 64];
    // Bytes one short, one over, and for a different value count.
    assert!(shape_err(dequantize_row(
        DType::Q4_0,
        &bytes[..35],
        &mut out
    )));
    assert!(shape_err(dequantize_row(
        DType::Q4_0,
        &[bytes.clone(), vec![0]].concat(),
        &mut out
    )));
    assert!(shape_err(dequantize_row(
        DType::Q4_0,
        &bytes,
        &mut out[..32]
    )));
    // Not a whole number of blocks.
    assert!(shape_err(dequantize_row(
        DType::Q4_0,
        &bytes,
        &mut out[..33]
    )));
    assert!(matches!(
        quantize_row(DType::Q6K, &x[..128]),
        Err(Error::Shape(_))
    ));
    assert!(matches!(
        dot_row(DType::Q4_0, &bytes, &x[..32]),
        Err(Error::Shape(_))
    ));
    assert!(matches!(
        dot_row(DType::F32, &[0; 7], &x[..2]),
        Err(Error::Shape(_))
    ));
    // The valid call still works.
    assert!(dequantize_row(DType::Q4_0, &bytes, &mut out).is_ok());
}

#[test]
fn f16_rows() {
    // 1.0 = 0x3C00 and -2.0 = 0xC000, little-endian.
    let bytes = quantize_row(DType::F16, &[1.0, -2.0, 0.5]).unwrap();
    assert_eq!(bytes, [0x00, 0x3C, 0x00, 0xC0, 0x00, 0x38]);
    assert_eq!(dot_row(DType::F16, &bytes, &[1.0, 1.0, 4.0]).unwrap(), 1.0);

    // Every value comes back as its nearest f16.
    let x = synthetic_data(0.0);
    let back = round_trip(DType::F16, &x);
    for (a, b) in x.iter().zip(&back) {
        assert_eq!(*b, half::f16::from_f32(*a).to_f32());
    }
    let err = total_error(&x, &back);
    assert!(err < round_trip_error(DType::Q8_0), "f16 {err}");
    assert!(shape_err(dequantize_row(DType::F16, &bytes, &mut [0.0; 2])));
}

#[test]
fn f32_rows_are_lossless() {
    let x = synthetic_data(0.5);
    assert_eq!(round_trip(DType::F32, &x), x);
    let bytes = quantize_row(DType::F32, &x).unwrap();
    let y = synthetic_data(1.0);
    assert_relative_eq!(
        dot_row(DType::F32, &bytes, &y).unwrap() as f64,
        dot_f64(&x, &y),
        max_relative = 1e-4
    );
}

fn shape_err(r: wginfer::Result<()>) -> bool {
    matches!(r, Err(Error::Shape(_)))
}

/// Every quantized type decodes `tests/data/dequant/`'s blocks to exactly
/// the values llama.cpp's gguf-py gives them (`gguf.quants.dequantize`;
/// `scripts/make-dequant-fixture.py` wrote both files).
#[test]
fn dequantization_matches_gguf_py_bit_for_bit() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dequant");
    for dtype in quant_types() {
        let read = |ext: &str| {
            let path = dir.join(format!("{}.{ext}", dtype.name()));
            std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let blocks = read("blocks");
        let want: Vec<f32> = read("f32")
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(
            blocks.len() / dtype.block_bytes(),
            8,
            "{dtype}: eight blocks"
        );
        let mut got = vec![0.0f32; want.len()];
        dequantize_row(dtype, &blocks, &mut got).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{dtype} value {i}: {g} vs gguf-py's {w}"
            );
        }
    }
}

/// Blocks of any bytes (NaN and infinite f16 scales included) decode and
/// dot without panicking, and quantizing non-finite values does not panic
/// either.
#[test]
fn arbitrary_bytes_and_non_finite_values_do_not_panic() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut byte = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8
    };
    let x = synthetic_data(0.25);
    let mut odd = x[..512].to_vec();
    odd[3] = f32::NAN;
    odd[300] = f32::INFINITY;
    odd[301] = f32::NEG_INFINITY;
    for dtype in quant_types() {
        for fill in [None, Some(0xff), Some(0x7c)] {
            let bytes: Vec<u8> = (0..dtype.row_bytes(512).unwrap())
                .map(|_| fill.unwrap_or_else(&mut byte))
                .collect();
            let mut out = vec![0.0; 512];
            dequantize_row(dtype, &bytes, &mut out).unwrap();
            dot_row(dtype, &bytes, &x[..512]).unwrap();
        }
        let bytes = quantize_row(dtype, &odd).unwrap();
        assert_eq!(bytes.len(), dtype.row_bytes(512).unwrap(), "{dtype}");
    }
}
