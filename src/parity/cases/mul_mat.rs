//! mul_mat cases.

use crate::parity::Case;
use crate::Result;

/// The mul_mat cases.
pub fn cases() -> Result<Vec<Case>> {
    Ok(vec![])
}
