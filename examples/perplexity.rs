//! Perplexity of a text file, scored like llama.cpp's `llama-perplexity`:
//! chunks of `--ctx` tokens, each from an empty cache, second half scored.
//!
//! ```text
//! cargo run --release --example perplexity -- -f tests/data/llamacpp/ppl_gpl3.txt -c 128
//! ```
//! Prints the running estimate after each chunk (`[1]30.1,[2]...`) and the
//! final value; `--json` prints `{"ppl": .., "chunks": [..], ..}` instead.

mod common;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use common::{json_num, json_str, ModelArgs};

/// Measure perplexity over a text file.
#[derive(Parser, Debug)]
#[command(name = "perplexity")]
struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// The text file
    #[arg(short = 'f', long)]
    file: String,
    /// Tokens per chunk (also the context length)
    #[arg(
        short = 'c',
        long = "ctx",
        visible_alias = "ctx-size",
        default_value_t = 512
    )]
    n_ctx: usize,
    /// Print one JSON object: ppl, chunks (running estimates), n_ctx, tokens
    #[arg(long)]
    json: bool,
}

fn run(a: &Args) -> wginfer::Result<()> {
    let text = std::fs::read_to_string(&a.file).map_err(|e| wginfer::Error::io(&a.file, e))?;
    let mut model = a.model.load(a.n_ctx, a.n_ctx)?;
    // llama-perplexity: special tokens added as the model asks, not parsed.
    let tokens = model.tokenizer().encode_opts(&text, true, false)?;
    eprintln!(
        "{}: {} tokens, {} chunks of {}",
        common::placement_note(&model),
        tokens.len(),
        tokens.len() / a.n_ctx,
        a.n_ctx
    );
    let start = std::time::Instant::now();
    let mut err = std::io::stderr();
    let result = model.perplexity(&tokens, a.n_ctx, &mut |i, ppl| {
        let _ = write!(err, "[{}]{ppl:.4},", i + 1);
        let _ = err.flush();
    })?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "\nFinal estimate: PPL = {:.4} ({:.1} s, {:.1} tok/s)",
        result.ppl,
        secs,
        (result.chunks.len() * a.n_ctx) as f64 / secs
    );
    if a.json {
        let chunks: Vec<String> = result.chunks.iter().map(|&c| json_num_6(c)).collect();
        println!(
            "{{\"ppl\": {}, \"chunks\": [{}], \"n_ctx\": {}, \"tokens\": {}, \"backend\": {}, \
             \"seconds\": {}}}",
            json_num_6(result.ppl),
            chunks.join(", "),
            a.n_ctx,
            tokens.len(),
            json_str(&model.backend_info().kind),
            json_num(secs)
        );
    }
    Ok(())
}

/// Perplexities with six decimals, as llama-perplexity's detailed output.
fn json_num_6(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.6}")
    } else {
        "null".into()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    common::main_of("perplexity", || run(&args))
}
