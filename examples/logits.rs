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

use common::{json_f32, number, value, DEFAULT_MODEL};
use wginfer::model::BackendChoice;

struct Args {
    model: String,
    prompt: Option<String>,
    tokens: Option<Vec<u32>>,
    backend: BackendChoice,
    top_k: usize,
    out: Option<String>,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: logits [-m MODEL] (-p PROMPT | --tokens 1,2,3) [--backend auto|wgpu|cpu] [--top-k K] [--out FILE]\
         \n\
         \n  -m, --model PATH    GGUF model (default {DEFAULT_MODEL})\
         \n  -p, --prompt TEXT   text, tokenized as llama.cpp does (special tokens parsed)\
         \n  --tokens IDS        comma-separated token ids instead of a prompt\
         \n  --backend B         auto, wgpu or cpu (default auto)\
         \n  --top-k K           logits listed per position (default 10)\
         \n  --out FILE          write all logits as little-endian f32, one row per position"
    );
    ExitCode::from(2)
}

fn parse() -> Result<Option<Args>, String> {
    let mut a = Args {
        model: DEFAULT_MODEL.into(),
        prompt: None,
        tokens: None,
        backend: BackendChoice::Auto,
        top_k: 10,
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let f = flag.as_str();
        match f {
            "-m" | "--model" => a.model = value(&mut it, f)?,
            "-p" | "--prompt" => a.prompt = Some(value(&mut it, f)?),
            "--tokens" => {
                let list = value(&mut it, f)?;
                let ids = list
                    .split(',')
                    .map(|s| number::<u32>(s.trim(), f))
                    .collect::<Result<Vec<_>, _>>()?;
                a.tokens = Some(ids);
            }
            "--backend" => {
                a.backend = BackendChoice::parse(&value(&mut it, f)?).map_err(|e| e.to_string())?
            }
            "--top-k" => a.top_k = number(&value(&mut it, f)?, f)?,
            "--out" => a.out = Some(value(&mut it, f)?),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.prompt.is_some() == a.tokens.is_some() {
        return Err("give either -p PROMPT or --tokens IDS".into());
    }
    Ok(Some(a))
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
            let file = wginfer::gguf::GgufFile::open(&a.model)?;
            let tok = wginfer::tokenizer::Tokenizer::from_gguf(&file)?;
            tok.encode_opts(a.prompt.as_deref().unwrap_or_default(), true, true)?
                .len()
        }
    };
    if n == 0 {
        return Err(wginfer::Error::invalid("no tokens to evaluate"));
    }
    let mut model = common::load_model(&a.model, a.backend.clone(), n, n)?;
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
    env_logger::init();
    let args = match parse() {
        Ok(Some(a)) => a,
        Ok(None) => return usage(),
        Err(e) => {
            eprintln!("logits: {e}");
            return usage();
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("logits: {e}");
            ExitCode::FAILURE
        }
    }
}
