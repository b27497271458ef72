//! softmax cases.

use crate::parity::Case;
use crate::Result;

/// The softmax cases.
pub fn cases() -> Result<Vec<Case>> {
    Ok(vec![])
}
