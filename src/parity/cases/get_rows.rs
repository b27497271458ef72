//! get_rows cases: every table type, batched over dims 2 and 3, with the
//! index tensor as a strided view (`v=1`) and the table as an offset view
//! of a padded tensor (`vs0=1`). Indices stay in range: the CPU reference
//! rejects the others, while the GPU writes zero rows.

use super::table_types;
use crate::parity::{Case, CaseBuilder, NMSE_DEFAULT};
use crate::{DType, Result};

/// Table `[n, m, be1, be2]`, indices `[r, be1, be2]` in `0..m`.
fn get_rows(
    cases: &mut Vec<Case>,
    t: DType,
    [n, m, r, be1, be2]: [usize; 5],
    v: bool,
    vs0: bool,
) -> Result<()> {
    let mut b = CaseBuilder::new(cases.len() as u64 + 1000);
    let table = if vs0 {
        // Rows of a wider, taller tensor, starting one row in.
        let big = b.uniform(t, &[2 * n, m + 1, be1, be2], -1.0, 1.0)?;
        let nb = b.g.layout(big).nb;
        b.g.view(big, &[n, m, be1, be2], &nb[1..], nb[1])?
    } else {
        b.uniform(t, &[n, m, be1, be2], -1.0, 1.0)?
    };
    let idx = if v {
        let all = b.indices(&[2 * r, be1, be2], m)?;
        let nb = b.g.layout(all).nb;
        b.g.view(all, &[r, be1, be2], &nb[1..3], 0)?
    } else {
        b.indices(&[r, be1, be2], m)?
    };
    let out = b.g.get_rows(table, idx)?;
    let name = format!(
        "GET_ROWS(type={t},n={n},m={m},r={r},be1={be1},be2={be2},v={},vs0={})",
        v as u8, vs0 as u8
    );
    cases.push(b.case("get_rows", name, out, NMSE_DEFAULT));
    Ok(())
}

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for t in table_types() {
        for be1 in [1, 7] {
            for v in [false, true] {
                get_rows(&mut cases, t, [256, 5, 4, be1, 1], v, false)?;
            }
        }
        get_rows(&mut cases, t, [256, 8, 2, 2, 3], true, true)?;
        if t.block_elems() <= 32 {
            get_rows(&mut cases, t, [32, 8, 2, 2, 3], false, false)?;
        }
    }
    get_rows(&mut cases, DType::F32, [1, 8, 2, 1, 1], false, false)?;
    get_rows(&mut cases, DType::F16, [3, 8, 5, 2, 1], true, true)?;
    Ok(cases)
}
