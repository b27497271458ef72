//! rope cases.

use crate::parity::Case;
use crate::Result;

/// The rope cases.
pub fn cases() -> Result<Vec<Case>> {
    Ok(vec![])
}
