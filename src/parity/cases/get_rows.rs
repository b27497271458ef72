//! get_rows cases.

use crate::parity::Case;
use crate::Result;

/// The get_rows cases.
pub fn cases() -> Result<Vec<Case>> {
    Ok(vec![])
}
