//! add, mul, scale, silu, relu, gelu, tanh, cpy and cont cases (diag_mask_inf's
//! are llama.cpp's own three, in its case list).

use crate::graph::TensorId;
use crate::parity::{Case, CaseBuilder, NMSE_DEFAULT};
use crate::{DType, Result};

const IDENTITY: [usize; 4] = [0, 1, 2, 3];

fn binary(
    cases: &mut Vec<Case>,
    mul: bool,
    t: DType,
    ne: [usize; 4],
    nr: [usize; 4],
    perm1: bool,
) -> Result<()> {
    let (lo, hi) = if mul { (0.9, 1.1) } else { (-1.0, 1.0) };
    let mut b = CaseBuilder::new(cases.len() as u64 + 100);
    let ne0: Vec<usize> = (0..4).map(|i| ne[i] * nr[i]).collect();
    let a = b.uniform(t, &ne0, lo, hi)?;
    let src1 = if perm1 {
        // src1 stored as [ne1, ne2, ne0, ne3] and permuted back to ne.
        let stored = b.uniform(t, &[ne[1], ne[2], ne[0], ne[3]], lo, hi)?;
        b.g.permute(stored, [1, 2, 0, 3])?
    } else {
        b.uniform(t, &ne, lo, hi)?
    };
    let out = if mul {
        b.g.mul(a, src1)?
    } else {
        b.g.add(a, src1)?
    };
    let op = if mul { "mul" } else { "add" };
    let name = format!(
        "{}(type={t},ne={ne:?},nr={nr:?},perm1={perm1})",
        op.to_uppercase()
    );
    cases.push(b.case(op, name, out, NMSE_DEFAULT));
    Ok(())
}

/// A view of every dim halved into a larger tensor, as test-backend-ops' `v=1`.
fn halved_view(
    b: &mut CaseBuilder,
    t: DType,
    ne: [usize; 4],
    lo: f32,
    hi: f32,
) -> Result<TensorId> {
    let big = b.uniform(t, &[ne[0] * 2, ne[1] * 2, ne[2] * 2, ne[3] * 2], lo, hi)?;
    let nb = b.g.layout(big).nb;
    b.g.view(big, &ne, &nb[1..], 0)
}

fn unary(
    cases: &mut Vec<Case>,
    op: &'static str,
    t: DType,
    ne: [usize; 4],
    strided: bool,
) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 200);
    let a = if strided {
        halved_view(&mut b, t, ne, -150.0, 150.0)?
    } else {
        b.uniform(t, &ne, -150.0, 150.0)?
    };
    let out = match op {
        "silu" => b.g.silu(a)?,
        "relu" => b.g.relu(a)?,
        "tanh" => b.g.tanh(a)?,
        _ => b.g.gelu(a)?,
    };
    let name = format!(
        "{}(type={t},ne={ne:?},v={})",
        op.to_uppercase(),
        strided as u8
    );
    cases.push(b.case(op, name, out, NMSE_DEFAULT));
    Ok(())
}

fn cpy(
    cases: &mut Vec<Case>,
    src: DType,
    dst: DType,
    ne: [usize; 4],
    perm_src: [usize; 4],
    perm_dst: [usize; 4],
) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 300);
    let stored = b.uniform(src, &ne, -150.0, 150.0)?;
    let a = b.g.permute(stored, perm_src)?;
    let dst_ne = b.g.layout(a).ne;
    // The destination is stored so that permuting it by perm_dst gives a's shape.
    let mut stored_ne = [0; 4];
    for i in 0..4 {
        stored_ne[i] = dst_ne[perm_dst[i]];
    }
    let target = b.uniform(dst, &stored_ne, -1.0, 1.0)?;
    let view = b.g.permute(target, perm_dst)?;
    b.g.cpy(a, view)?;
    let limit = if src == dst { 0.0 } else { 1e-6 };
    let name = format!("CPY(type_src={src},type_dst={dst},ne={ne:?},permute_src={perm_src:?},permute_dst={perm_dst:?})");
    cases.push(b.case("cpy", name, target, limit));
    Ok(())
}

/// A quantizing copy of six rows that probe its rounding, compared
/// exactly: zeros, a constant, codes that fall exactly halfway (the scale
/// comes out 1, so each value's code ends in .5 and goes away from zero,
/// as the reference's `f32::round`, where WGSL's `round` would go to
/// even), mixed signs, magnitudes near f16's largest, and values so small
/// that the scale rounds to zero in f16.
fn quantizing_cpy_edges(cases: &mut Vec<Case>, dst: DType) -> Result<()> {
    // Each type's code range, whose ends make the scale 1.
    let (lo, hi) = match dst {
        DType::Q4_0 => (-8.0, 7.0),
        DType::Q5_0 => (-16.0, 15.0),
        DType::Q8_0 => (-127.0, 127.0),
        DType::Q4_1 => (0.0, 15.0),
        _ => (0.0, 31.0),
    };
    let span = hi - lo;
    let step = (span / 30.0f32).floor().max(1.0);
    let mut halves = vec![lo, hi];
    halves.extend((0..30).map(|j| lo + 0.5 + (j as f32 * step) % span));
    let mut values = vec![0.0; 32];
    values.extend([2.5; 32]);
    values.extend(&halves);
    values.extend((0..32).map(|j| (j as f32 - 15.5) * 0.37));
    values.extend((0..32).map(|j| 60000.0 - 1000.0 * j as f32));
    values.extend((0..32).map(|j| 1e-9 * (j as f32 - 16.0)));
    exact_copy(cases, values, &[32, 6], dst)
}

/// A copy of the f32 `values` (shape `ne`) to `dst`, compared exactly.
fn exact_copy(cases: &mut Vec<Case>, values: Vec<f32>, ne: &[usize], dst: DType) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 500);
    let src = b.g.input("in", DType::F32, ne)?;
    b.push_f32(src, values);
    let target = b.uniform(dst, ne, -1.0, 1.0)?;
    b.g.cpy(src, target)?;
    let name = format!("CPY(type_src=f32,type_dst={dst},rounding edges)");
    cases.push(b.case("cpy", name, target, 0.0));
    Ok(())
}

/// f32 to f16 of values that probe the rounding, compared exactly: ties
/// to even either way, the largest finite values, subnormals and their
/// ties, signs (a driver's own conversion may truncate instead).
fn f16_rounding_edges(cases: &mut Vec<Case>) -> Result<()> {
    let tie = 1.0 / 2048.0; // half an f16 step at 1.0
    let sub = 2f32.powi(-24); // f16's smallest subnormal
    let mut values = vec![
        1.0 + tie,
        1.0 + 3.0 * tie,
        1.0 + 0.9 * tie,
        1.0 + 1.1 * tie,
        -(1.0 + 3.0 * tie),
        65504.0,
        65519.0,
        -65519.0,
        0.5 * sub,
        0.75 * sub,
        1.5 * sub,
        2.5 * sub,
        -2.5 * sub,
        1023.5 * sub,
        1023.75 * sub,
        2f32.powi(-14) * (1.0 + tie),
        1e-9,
        0.1,
        -0.1,
        std::f32::consts::PI,
        0.0,
        -0.0,
    ];
    values.extend((0..42).map(|j| (j as f32 - 21.0) * 0.0123));
    exact_copy(cases, values, &[64], DType::F16)
}

fn cont(cases: &mut Vec<Case>, t: DType, ne: [usize; 4], perm: [usize; 4]) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 400);
    let stored = b.uniform(t, &ne, -1.0, 1.0)?;
    let a = b.g.permute(stored, perm)?;
    let out = b.g.cont(a)?;
    cases.push(b.case(
        "cont",
        format!("CONT(type={t},ne={ne:?},perm={perm:?})"),
        out,
        0.0,
    ));
    Ok(())
}

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for t in [DType::F32, DType::F16] {
        for mul in [false, true] {
            let base = [10, 5, 4, 3];
            for nr in [
                [1, 1, 1, 1],
                [2, 1, 1, 1],
                [1, 2, 1, 1],
                [1, 1, 2, 1],
                [1, 1, 1, 2],
                [1, 1, 2, 2],
                [2, 2, 2, 2],
            ] {
                binary(&mut cases, mul, t, base, nr, false)?;
            }
            binary(&mut cases, mul, t, base, [1, 1, 1, 1], true)?;
            binary(&mut cases, mul, t, [10, 5, 4, 3], [2, 1, 1, 1], true)?;
            binary(&mut cases, mul, t, [1, 1, 8, 1], [1, 1, 1, 1], false)?;
            binary(&mut cases, mul, t, [1, 1, 1, 1], [32, 1, 1, 1], false)?;
            binary(&mut cases, mul, t, [1280, 1, 1, 1], [1, 16, 16, 1], false)?;
            binary(&mut cases, mul, t, [10, 5, 1, 1], [1, 1, 4, 3], false)?;
        }
        for op in ["silu", "relu", "gelu", "tanh"] {
            for strided in [false, true] {
                unary(&mut cases, op, t, [128, 2, 2, 2], strided)?;
                unary(&mut cases, op, t, [5, 7, 11, 13], strided)?;
            }
        }
    }
    for (ne, s) in [([10, 10, 10, 10], 2.0f32), ([100, 10, 10, 10], 0.5)] {
        let mut b = CaseBuilder::new(cases.len() as u64 + 500);
        let a = b.uniform(DType::F32, &ne, -1.0, 1.0)?;
        let out = b.g.scale(a, s)?;
        cases.push(b.case(
            "scale",
            format!("SCALE(type=f32,ne={ne:?},scale={s})"),
            out,
            NMSE_DEFAULT,
        ));
    }
    let pairs = [
        (DType::F32, DType::F32),
        (DType::F16, DType::F16),
        (DType::F32, DType::F16),
        (DType::F16, DType::F32),
    ];
    for (src, dst) in pairs {
        cpy(&mut cases, src, dst, [256, 4, 4, 4], IDENTITY, IDENTITY)?;
        cpy(&mut cases, src, dst, [256, 2, 3, 4], [0, 2, 1, 3], IDENTITY)?;
        cpy(&mut cases, src, dst, [256, 2, 3, 4], IDENTITY, [0, 2, 1, 3])?;
        cpy(&mut cases, src, dst, [3, 2, 3, 4], [1, 0, 2, 3], IDENTITY)?;
        cpy(&mut cases, src, dst, [32, 3, 5, 7], [0, 3, 1, 2], IDENTITY)?;
    }
    f16_rounding_edges(&mut cases)?;
    for dst in DType::ALL.into_iter().filter(|t| t.quantizes_by_copy()) {
        cpy(
            &mut cases,
            DType::F32,
            dst,
            [64, 3, 2, 1],
            [0, 2, 1, 3],
            IDENTITY,
        )?;
        quantizing_cpy_edges(&mut cases, dst)?;
    }
    for t in [DType::F32, DType::F16] {
        for (ne, perm) in [
            ([2, 3, 5, 7], [1, 0, 2, 3]),
            ([10, 10, 10, 1], [2, 1, 0, 3]),
            ([33, 5, 7, 1], [0, 2, 1, 3]),
            ([1, 8, 17, 1], [1, 2, 0, 3]),
        ] {
            cont(&mut cases, t, ne, perm)?;
        }
    }
    Ok(cases)
}
