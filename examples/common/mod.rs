//! Helpers shared by the model examples: loading with a progress bar on
//! stderr, and JSON output without a serializer dependency.
#![allow(dead_code)]

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wginfer::model::{BackendChoice, LoadOptions, Model};

/// The model every example defaults to.
pub const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// A one-line progress bar on stderr, redrawn when the percentage changes;
/// when stderr is not a terminal, one line once loading is done.
pub fn progress_bar(label: &'static str) -> wginfer::model::Progress {
    let last = Arc::new(AtomicUsize::new(usize::MAX));
    let tty = std::io::stderr().is_terminal();
    Arc::new(move |done: usize, total: usize| {
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if last.swap(pct, Ordering::Relaxed) == pct || (!tty && done < total) {
            return;
        }
        let filled = pct * 30 / 100;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{label} [{}{}] {pct:3}% {:.1}/{:.1} MiB",
            "#".repeat(filled),
            "-".repeat(30 - filled),
            done as f64 / (1 << 20) as f64,
            total as f64 / (1 << 20) as f64
        );
        if done >= total {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    })
}

/// Loads `path` with a progress bar; a missing default model gets a hint.
pub fn load_model(
    path: &str,
    backend: BackendChoice,
    n_ctx: usize,
    n_batch: usize,
) -> wginfer::Result<Model> {
    if !Path::new(path).exists() && path == DEFAULT_MODEL {
        return Err(wginfer::Error::invalid(format!(
            "{path} is missing: run scripts/fetch-model.sh first"
        )));
    }
    let model = Model::load(
        path,
        &LoadOptions {
            backend,
            n_ctx,
            n_batch,
            progress: Some(progress_bar("loading")),
            ..LoadOptions::default()
        },
    )?;
    if let Some(note) = &model.backend_info().note {
        eprintln!("note: {note}");
    }
    Ok(model)
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A finite f64 as JSON, rounded to 3 decimals (non-finite values become null).
pub fn json_num(v: f64) -> String {
    if v.is_finite() {
        // Three decimals: timings in ms and rates need no more.
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        "null".into()
    }
}

/// An f32 as JSON in its shortest exact form (non-finite values become null).
pub fn json_f32(v: f32) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// A list of ids as a JSON array.
pub fn json_ids(ids: &[u32]) -> String {
    let items: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The value after a flag, or an error naming the flag.
pub fn value<I: Iterator<Item = String>>(it: &mut I, flag: &str) -> Result<String, String> {
    it.next().ok_or(format!("{flag} needs a value"))
}

/// A parsed number, or an error naming the flag.
pub fn number<T: std::str::FromStr>(s: &str, flag: &str) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{flag}: '{s}' is not a valid number"))
}
