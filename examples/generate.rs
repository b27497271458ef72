//! Generates text from a prompt, like llama.cpp's `llama-cli -no-cnv`.
//!
//! ```text
//! cargo run --release --example generate -- -p "Once upon a time" -n 64 --temp 0
//! cargo run --release --example generate -- --chat -p "What is the capital of France?" --json
//! ```
//! Text streams to stdout (a progress bar and timings go to stderr); with
//! `--json` one object is printed at the end instead.

mod common;

use std::io::Write;
use std::process::ExitCode;

use common::{json_ids, json_num, json_str, number, value, DEFAULT_MODEL};
use wginfer::model::{BackendChoice, GenerateOptions};

struct Args {
    model: String,
    prompt: String,
    backend: BackendChoice,
    n_ctx: usize,
    n_batch: usize,
    gen: GenerateOptions,
    json: bool,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: generate [-m MODEL] -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]\
         \n                [--backend auto|wgpu|cpu] [-c N] [-b N] [--chat] [--json]\
         \n\
         \n  -m, --model PATH       GGUF model (default {DEFAULT_MODEL})\
         \n  -p, --prompt TEXT      the prompt (special tokens such as <|im_start|> are parsed)\
         \n  -f, --file PATH        read the prompt from a file\
         \n  -n, --n-predict N      tokens to generate, -1 until end of generation (default 128)\
         \n  --temp T               temperature, 0 = greedy (default 0.8)\
         \n  --top-k K              top-k, 0 = off (default 40)\
         \n  --top-p P              top-p, 1 = off (default 0.95)\
         \n  --seed S               sampler seed (default 42)\
         \n  --backend B            auto (wgpu if usable, else cpu), wgpu or cpu (default auto)\
         \n  -c, --ctx-size N       context length (default 2048, at most the model's)\
         \n  -b, --batch-size N     most prompt tokens per graph (default 512)\
         \n  --chat                 wrap the prompt in the model's (ChatML) chat format\
         \n  --json                 print one JSON object: prompt_tokens, tokens, text, backend,\
         \n                         adapter, timings"
    );
    ExitCode::from(2)
}

fn parse() -> Result<Option<Args>, String> {
    let mut a = Args {
        model: DEFAULT_MODEL.into(),
        prompt: String::new(),
        backend: BackendChoice::Auto,
        n_ctx: 0,
        n_batch: 0,
        gen: GenerateOptions::default(),
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let f = flag.as_str();
        match f {
            "-m" | "--model" => a.model = value(&mut it, f)?,
            "-p" | "--prompt" => a.prompt = value(&mut it, f)?,
            "-f" | "--file" => {
                let path = value(&mut it, f)?;
                a.prompt = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            }
            "-n" | "--n-predict" => {
                let n: i64 = number(&value(&mut it, f)?, f)?;
                a.gen.n_predict = usize::try_from(n).unwrap_or(usize::MAX);
            }
            "--temp" => a.gen.temp = number(&value(&mut it, f)?, f)?,
            "--top-k" => {
                let k: i64 = number(&value(&mut it, f)?, f)?;
                a.gen.top_k = usize::try_from(k).unwrap_or(0);
            }
            "--top-p" => a.gen.top_p = number(&value(&mut it, f)?, f)?,
            "--seed" => a.gen.seed = number(&value(&mut it, f)?, f)?,
            "--backend" => {
                a.backend = BackendChoice::parse(&value(&mut it, f)?).map_err(|e| e.to_string())?
            }
            "-c" | "--ctx-size" => a.n_ctx = number(&value(&mut it, f)?, f)?,
            "-b" | "--batch-size" => a.n_batch = number(&value(&mut it, f)?, f)?,
            "--chat" => a.gen.chat = true,
            "--json" => a.json = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.prompt.is_empty() {
        return Err("give a prompt with -p or -f".into());
    }
    Ok(Some(a))
}

fn run(a: &Args) -> wginfer::Result<()> {
    let mut model = common::load_model(&a.model, a.backend.clone(), a.n_ctx, a.n_batch)?;
    let info = model.backend_info().clone();
    let mut gen = model.generate(&a.prompt, &a.gen)?;
    let mut text = String::new();
    let mut out = std::io::stdout().lock();
    for piece in &mut gen {
        let piece = piece?;
        if !a.json {
            out.write_all(piece.text.as_bytes())?;
            out.flush()?;
        }
        text.push_str(&piece.text);
    }
    let t = gen.timings();
    if a.json {
        let adapter = info.adapter.as_deref().map_or("null".into(), json_str);
        writeln!(
            out,
            "{{\"prompt_tokens\": {}, \"tokens\": {}, \"text\": {}, \"backend\": {}, \
             \"adapter\": {adapter}, \"timings\": {{\"load_ms\": {}, \"prompt_ms\": {}, \
             \"prompt_tok_s\": {}, \"decode_ms\": {}, \"decode_tok_s\": {}}}}}",
            json_ids(gen.prompt_tokens()),
            json_ids(gen.tokens()),
            json_str(&text),
            json_str(&info.kind),
            json_num(t.load_ms),
            json_num(t.prompt_ms),
            json_num(t.prompt_tok_s()),
            json_num(t.decode_ms),
            json_num(t.decode_tok_s()),
        )?;
    } else {
        writeln!(out)?;
        eprintln!(
            "backend {}{}: load {:.0} ms | prompt {} tokens {:.1} ms ({:.1} tok/s) | \
             decode {} tokens {:.1} ms ({:.1} tok/s) | stop: {}",
            info.kind,
            info.adapter.map(|n| format!(" ({n})")).unwrap_or_default(),
            t.load_ms,
            t.prompt_tokens,
            t.prompt_ms,
            t.prompt_tok_s(),
            t.decode_tokens,
            t.decode_ms,
            t.decode_tok_s(),
            gen.stop_reason()
                .map_or("running".to_string(), |r| r.to_string()),
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    let args = match parse() {
        Ok(Some(a)) => a,
        Ok(None) => return usage(),
        Err(e) => {
            eprintln!("generate: {e}");
            return usage();
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("generate: {e}");
            ExitCode::FAILURE
        }
    }
}
