use super::*;

/// Arguments whose arithmetic would overflow are shape errors.
#[test]
fn overflowing_arguments_are_errors() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64]).unwrap();
    // Default strides of a view: 4 bytes x usize::MAX / 2 values per
    // row overflows.
    let e = g.view(x, &[usize::MAX / 2, 8], &[], 0).unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");
    // A top-k of more than half the chunk, however large.
    assert!(g.top_k(x, usize::MAX, TOP_K_CHUNK, false).is_err());
    assert!(g.top_k(x, 32, 64, false).is_ok());
    assert!(g.top_k(x, 33, 64, false).is_err());
}

/// Copies convert between the float types, move blocks between tensors
/// of one quantized type, dequantize to f32 and quantize floats to the
/// 32-value block types; other conversions are errors that name both
/// types.
/// Frequency factors are a dense f32 vector of at least n_dims / 2.
#[test]
fn rope_factors_are_checked() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[16, 2, 3]).unwrap();
    let pos = g.input("pos", DType::I32, &[3]).unwrap();
    let p = RopeParams::new(super::super::RopeMode::Normal, 16, 10000.0);
    for (dtype, ne, ok) in [
        (DType::F32, vec![8], true),
        (DType::F32, vec![9], true),
        (DType::F32, vec![7], false),
        (DType::F16, vec![8], false),
        (DType::F32, vec![8, 2], false),
    ] {
        let f = g.input("ff", dtype, &ne).unwrap();
        let r = g.rope_ext(a, pos, Some(f), p);
        assert_eq!(r.is_ok(), ok, "{dtype} {ne:?}: {r:?}");
        if let Ok(id) = r {
            assert_eq!(g.node(id).src, vec![a, pos, f]);
        }
    }
}

#[test]
fn copy_types() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 2]).unwrap();
    let q = g.input("q", DType::Q4_0, &[64, 2]).unwrap();
    for to in [DType::F16, DType::BF16, DType::F32] {
        assert!(g.cast(x, to).is_ok(), "f32 to {to}");
    }
    assert!(g.cont(q).is_ok());
    assert!(g.cast(q, DType::F32).is_ok());
    let t = g.permute(q, [0, 2, 1, 3]).unwrap();
    assert!(g.cont(t).is_ok());
    for to in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
    ] {
        assert!(g.cast(x, to).is_ok(), "f32 to {to}");
    }
    let i = g.input("i", DType::I32, &[64, 2]).unwrap();
    for (a, to) in [(x, DType::I32), (i, DType::F32), (i, DType::I32)] {
        assert!(g.cast(a, to).is_ok(), "{} to {to}", g.layout(a).dtype);
    }
    let k = g.input("k", DType::F32, &[256, 2]).unwrap();
    for (a, to) in [
        (k, DType::Q4K),
        (i, DType::Q8_0),
        (q, DType::F16),
        (q, DType::Q8_0),
        (q, DType::I32),
        (i, DType::F16),
    ] {
        let e = g.cast(a, to).unwrap_err().to_string();
        assert!(e.contains(&format!("to {to} is not supported")), "{e}");
    }
}
