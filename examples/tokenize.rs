//! Tokenizes text with a model's tokenizer, like llama.cpp's `llama-tokenize`.
//!
//! ```text
//! cargo run --example tokenize -- [-m MODEL] (--text T | --file F) [--parse-special] [--add-special] [--json]
//! ```
//! Plain output is one `id -> 'piece'` line per token; `--json` prints
//! `{"ids": [...]}`.

mod common;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use common::{json_ids, DEFAULT_MODEL};
use wginfer::gguf::GgufFile;
use wginfer::tokenizer::Tokenizer;

/// Tokenize text with a GGUF model's tokenizer.
#[derive(Parser, Debug)]
#[command(name = "tokenize")]
struct Args {
    /// GGUF model file
    #[arg(short = 'm', long, default_value = DEFAULT_MODEL)]
    model: String,
    /// The text to tokenize
    #[arg(
        short = 't',
        long,
        visible_alias = "prompt",
        short_alias = 'p',
        required_unless_present = "file"
    )]
    text: Option<String>,
    /// Read the text from a file
    #[arg(short = 'f', long, conflicts_with = "text")]
    file: Option<String>,
    /// Special tokens such as <|im_start|> in the text become their ids
    #[arg(long)]
    parse_special: bool,
    /// Add BOS/EOS as the model asks (tokenizer.ggml.add_bos_token)
    #[arg(long)]
    add_special: bool,
    /// Print {"ids": [...]} instead of one 'id -> piece' line per token
    #[arg(long)]
    json: bool,
}

fn run(args: &Args) -> wginfer::Result<()> {
    let text = match &args.file {
        Some(path) => std::fs::read_to_string(path).map_err(|e| wginfer::Error::io(path, e))?,
        None => args.text.clone().unwrap_or_default(),
    };
    let file = GgufFile::open(&args.model)?;
    let tok = Tokenizer::from_gguf(&file)?;
    let ids = tok.encode_opts(&text, args.add_special, args.parse_special)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{{\"ids\": {}}}", json_ids(&ids))?;
    } else {
        for &id in &ids {
            write!(out, "{id:6} -> '")?;
            out.write_all(tok.token_to_piece(id).unwrap_or_default())?;
            writeln!(out, "'")?;
        }
    }
    out.flush()?;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    common::main_of("tokenize", || run(&args))
}
