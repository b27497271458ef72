//! Counts the kernels' encoders choose by, each with a default measured on
//! one GPU and an environment variable to try another on a new device.

use std::sync::OnceLock;

/// A count read once from the environment variable `var` (a number), else
/// `default` (also where the variable does not parse).
pub struct Tunable {
    var: &'static str,
    default: usize,
    value: OnceLock<usize>,
}

impl Tunable {
    pub const fn new(var: &'static str, default: usize) -> Tunable {
        Tunable {
            var,
            default,
            value: OnceLock::new(),
        }
    }

    pub fn get(&self) -> usize {
        *self.value.get_or_init(|| {
            std::env::var(self.var)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(self.default)
        })
    }
}
