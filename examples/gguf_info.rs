//! Prints what a GGUF file holds: version, metadata and a tensor table.
//!
//! ```text
//! cargo run --example gguf_info -- [path]   # default: the SmolLM2 test model
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;

use wginfer::gguf::{GgufFile, Value};

const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// A value on one line: arrays summarised, long strings cut.
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        let cut: String = s.chars().take(117).collect();
        format!("{cut}... ({} chars)", s.chars().count())
    } else {
        s
    }
}

fn human(bytes: usize) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2} MiB", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

fn run(path: &str) -> wginfer::Result<()> {
    let file = GgufFile::open(path)?;
    println!("file:       {path}");
    println!(
        "size:       {} ({} bytes)",
        human(file.file_size()),
        file.file_size()
    );
    println!("version:    {}", file.version());
    println!("alignment:  {}", file.alignment());
    println!("data at:    byte {}", file.data_offset());
    println!();
    println!("metadata ({} entries):", file.metadata().len());
    let width = file
        .metadata()
        .iter()
        .map(|e| e.key.len())
        .max()
        .unwrap_or(0);
    for e in file.metadata() {
        println!(
            "  {:width$}  {:<16}  {}",
            e.key,
            e.value.type_description(),
            show(&e.value)
        );
    }
    println!();
    println!("tensors ({}):", file.tensors().len());
    let width = file
        .tensors()
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(0);
    println!(
        "  {:width$}  {:<7}  {:<20}  {:>12}  offset",
        "name", "type", "shape", "bytes"
    );
    let mut by_type: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut total = 0usize;
    for t in file.tensors() {
        let shape = format!("{:?}", t.shape());
        println!(
            "  {:width$}  {:<7}  {:<20}  {:>12}  {}",
            t.name,
            t.type_name(),
            shape,
            t.size,
            file.tensor_range(t).start
        );
        let slot = by_type.entry(t.type_name()).or_default();
        slot.0 += 1;
        slot.1 += t.size;
        total += t.size;
    }
    println!();
    for (ty, (n, bytes)) in &by_type {
        let computable = if wginfer::DType::ALL.iter().any(|d| d.name() == *ty) {
            ""
        } else {
            "  (not supported by wginfer)"
        };
        println!(
            "  {ty:<7} {n:>4} tensors  {:>10}{computable}",
            human(*bytes)
        );
    }
    println!(
        "  total   {:>4} tensors  {:>10}",
        file.tensors().len(),
        human(total)
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") || args.len() > 1 {
        eprintln!("usage: gguf_info [path]   (default: {DEFAULT_MODEL})");
        return if args.len() > 1 {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let path = args.first().map_or(DEFAULT_MODEL, String::as_str);
    match run(path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gguf_info: {e}");
            ExitCode::FAILURE
        }
    }
}
