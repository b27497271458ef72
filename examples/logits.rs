//! Evaluates a prompt (or a list of token ids) in one batch and prints the
//! top logits at every position, for comparisons with llama.cpp.
//!
//! ```text
//! cargo run --release --example logits -- -p "The capital of France is" --top-k 5
//! cargo run --release --example logits -- --tokens 504,3575,282 --out logits.f32
//! ```
//! Prints `{"positions": [{"pos": 0, "top": [[id, logit], ...]}, ...]}`;
//! `--out FILE` also writes every position's full logit vector as
//! little-endian f32, row after row.

mod common;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use common::{json_f32, ModelArgs};

/// Evaluate tokens in one batch and print the top logits at every position.
#[derive(Parser, Debug)]
#[command(name = "logits")]
struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Text, tokenized as llama.cpp does (special tokens parsed)
    #[arg(short = 'p', long, required_unless_present = "tokens")]
    prompt: Option<String>,
    /// Comma-separated token ids instead of a prompt
    #[arg(long, value_delimiter = ',', conflicts_with = "prompt")]
    tokens: Option<Vec<u32>>,
    /// Logits listed per position
    #[arg(long = "top-k", default_value_t = 10)]
    top_k: usize,
    /// Also write every position's logits as little-endian f32, row after row
    #[arg(long)]
    out: Option<String>,
}

/// The `k` largest `(id, logit)` pairs, ties by id.
fn top(row: &[f32], k: usize) -> Vec<(usize, f32)> {
    let mut idx: Vec<(usize, f32)> = row.iter().copied().enumerate().collect();
    idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    idx.truncate(k);
    idx
}

fn run(a: &Args) -> wginfer::Result<()> {
    // Read the token count first so the context (and the one batch) fit it.
    let n = match &a.tokens {
        Some(t) => t.len(),
        None => {
            let file = wginfer::gguf::GgufFile::open(&a.model.model)?;
            let tok = wginfer::tokenizer::Tokenizer::from_gguf(&file)?;
            tok.encode_opts(a.prompt.as_deref().unwrap_or_default(), true, true)?
                .len()
        }
    };
    if n == 0 {
        return Err(wginfer::Error::invalid("no tokens to evaluate"));
    }
    let mut model = a.model.load(n, n)?;
    let tokens = match &a.tokens {
        Some(t) => t.clone(),
        None => model.tokenize(a.prompt.as_deref().unwrap_or_default())?,
    };
    let logits = model.eval(&tokens, 0, true)?;
    let n_vocab = model.config().n_vocab;
    let mut positions = Vec::with_capacity(tokens.len());
    for (pos, row) in logits.chunks_exact(n_vocab).enumerate() {
        let items: Vec<String> = top(row, a.top_k)
            .into_iter()
            .map(|(id, v)| format!("[{id}, {}]", json_f32(v)))
            .collect();
        positions.push(format!(
            "{{\"pos\": {pos}, \"top\": [{}]}}",
            items.join(", ")
        ));
    }
    if let Some(path) = &a.out {
        let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(path, bytes).map_err(|e| wginfer::Error::io(path, e))?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{{\"positions\": [{}]}}", positions.join(", "))?;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    common::main_of("logits", || run(&args))
}
