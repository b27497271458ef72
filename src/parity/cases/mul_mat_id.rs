//! mul_mat_id cases (llama.cpp's MUL_MAT_ID): every weight type as a stack
//! of four experts with an odd row count, two used per token, activations
//! per slot (`b=0`) or one per token shared by its slots (`b=1`), a single
//! token (decode) and several.

use super::table_types;
use crate::parity::{Case, CaseBuilder, NMSE_MUL_MAT};
use crate::{DType, Result};

/// The cases.
pub fn cases() -> Result<Vec<Case>> {
    let (n_mats, n_used, m, k) = (4, 2, 37, 256);
    let mut cases = Vec::new();
    for (i, ta) in table_types().enumerate() {
        for (n, shared) in [(1, false), (5, false), (5, true)] {
            let mut b = CaseBuilder::new(9700 + 8 * i as u64 + n as u64 + u64::from(shared));
            let experts = b.uniform(ta, &[k, m, n_mats], -1.0, 1.0)?;
            let columns = if shared { 1 } else { n_used };
            let x = b.uniform(DType::F32, &[k, columns, n], -1.0, 1.0)?;
            let ids = b.indices(&[n_used, n], n_mats)?;
            let out = b.g.mul_mat_id(experts, x, ids)?;
            let name = format!(
                "MUL_MAT_ID(type_a={},type_b=f32,n_mats={n_mats},n_used={n_used},b={},m={m},n={n},k={k})",
                ta.name(),
                u8::from(shared)
            );
            cases.push(b.case("mul_mat_id", name, out, NMSE_MUL_MAT));
        }
    }
    Ok(cases)
}
