//! The cases, by op family, ported from llama.cpp's test-backend-ops for the
//! types wginfer supports (see refs/backend_ops_cases.md).

mod argmax;
mod elementwise;
mod flash_attn;
mod fused;
mod get_rows;
mod mul_mat;
mod mul_mat_id;
mod norm;
mod rope;
mod set_rows;
mod softmax;
mod top_k;

use super::Case;
use crate::{DType, Result};

/// Every type a tensor of weights or a table can have: all but integers.
fn table_types() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|t| *t != DType::I32)
}

pub use flash_attn::unfused_pairs as flash_attn_unfused_pairs;

/// Every case, in a fixed order (seeded, so inputs repeat run to run).
pub fn all_cases() -> Result<Vec<Case>> {
    let mut all = Vec::new();
    for family in [
        elementwise::cases,
        norm::cases,
        softmax::cases,
        rope::cases,
        get_rows::cases,
        set_rows::cases,
        mul_mat::cases,
        mul_mat_id::cases,
        fused::cases,
        fused::prompt_cases,
        flash_attn::cases,
        argmax::cases,
        top_k::cases,
    ] {
        all.extend(family()?);
    }
    Ok(all)
}

/// Extra cases for `backend_ops --mode perf` only (too big for the test
/// suite): those of the ops and names `wanted(op, name)` keeps, the others
/// not built at all.
pub fn perf_cases(wanted: &dyn Fn(&str, &str) -> bool) -> Result<Vec<Case>> {
    let mut cases = mul_mat::perf_cases(&|name| wanted("mul_mat", name))?;
    cases.extend(flash_attn::perf_cases(&|name| {
        wanted("flash_attn_ext", name)
    })?);
    Ok(cases)
}
