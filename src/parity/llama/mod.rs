//! llama.cpp's own test-backend-ops cases, rebuilt from their case strings.
//!
//! `tests/data/llamacpp/backend_ops_cases_list.txt` lists every case string
//! of llama.cpp's test-backend-ops for the seed's ops (`OP(key=value,...)`,
//! a tab, and whether llama.cpp's CPU backend runs it). [`llama_cases`]
//! turns each line into a [`Case`] named by that exact string, built the way
//! test-backend-ops builds it (shapes, views, permutations, value ranges,
//! NMSE limit), or says why wginfer cannot express it: a type it does not
//! have, an op option it does not implement (ALiBi, attention sinks, rope
//! frequency factors, multi-section rope), or a case llama.cpp's CPU backend
//! does not run either.

mod ops;
mod parse;

use super::Case;
use crate::{Error, Result};
use parse::CaseString;

/// Why a case string gives no case.
#[derive(Clone, Debug, PartialEq)]
pub enum Skip {
    /// wginfer has no such type or op option (what it lacks).
    Unsupported(String),
    /// The string does not read as this op's case (what is wrong).
    Malformed(String),
}

impl From<Error> for Skip {
    // The graph builders reject what the ops do not implement (an f16 `b`
    // in mul_mat, a quantized cpy destination, ...).
    fn from(e: Error) -> Skip {
        Skip::Unsupported(e.to_string())
    }
}

/// One line of the list.
pub struct LlamaCase {
    /// llama.cpp's case string.
    pub name: String,
    /// The case, or why there is none.
    pub case: std::result::Result<Case, Skip>,
}

/// Every case of a test-backend-ops case list (blank lines and `#` comments
/// skipped). A line that does not parse is an error naming it; a case for
/// an op this module does not know is [`Skip::Unsupported`].
pub fn llama_cases(list: &str) -> Result<Vec<LlamaCase>> {
    let mut out = Vec::new();
    for (i, line) in list.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| Error::invalid(format!("case list line {}: {why}", i + 1));
        let (name, status) = line.split_once('\t').unwrap_or((line, "SUPPORTED"));
        let parsed = CaseString::parse(name).map_err(bad)?;
        let case = match status {
            "SUPPORTED" => ops::build(&parsed, i as u64),
            "NOT SUPPORTED" => Err(Skip::Unsupported(
                "llama.cpp's CPU backend does not run it".into(),
            )),
            s => return Err(bad(format!("unknown status '{s}'"))),
        };
        if let Err(Skip::Malformed(why)) = &case {
            return Err(bad(format!("{name}: {why}")));
        }
        out.push(LlamaCase {
            name: name.to_string(),
            case,
        });
    }
    Ok(out)
}
