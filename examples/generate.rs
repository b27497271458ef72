//! Generates text from a prompt, like llama.cpp's `llama-cli -no-cnv`.
//!
//! ```text
//! cargo run --release --example generate -- -p "Once upon a time" -n 64 --temp 0
//! cargo run --release --example generate -- --chat -p "What is the capital of France?" --json
//! cargo run --release --example generate -- -i --system "Answer briefly."  # a chat on the terminal
//! cargo run --release --example generate -- -p "Hello" --n-gpu-layers 10   # 10 layers on the GPU
//! ```
//! Text streams to stdout (a progress bar and timings go to stderr); with
//! `--json` one object is printed at the end instead. `-i` chats turn after
//! turn, reading each user turn as a line of stdin (end of input ends the
//! chat) and keeping the KV cache between turns.

mod common;

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use common::{json_ids, json_num, json_str, ModelArgs};
use wginfer::model::{Conversation, GenerateOptions, Generation, Model};

/// Generate text from a prompt.
#[derive(Parser, Debug)]
#[command(name = "generate")]
struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt (special tokens such as <|im_start|> are parsed)
    #[arg(short = 'p', long, required_unless_present_any = ["file", "interactive"])]
    prompt: Option<String>,
    /// Read the prompt from a file
    #[arg(short = 'f', long, conflicts_with = "prompt")]
    file: Option<String>,
    /// Tokens to generate; -1 runs until end of generation or the context's end
    #[arg(
        short = 'n',
        long = "n-predict",
        default_value_t = 128,
        allow_negative_numbers = true
    )]
    n_predict: i64,
    /// Temperature; 0 is greedy
    #[arg(long, default_value_t = 0.8)]
    temp: f32,
    /// Keep the K most likely tokens; 0 keeps all
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Keep the smallest set of tokens with probability at least P; 1 keeps all
    #[arg(long = "top-p", default_value_t = 0.95)]
    top_p: f32,
    /// Keep the tokens at least P times as likely as the most likely one; 0 keeps all
    #[arg(long = "min-p", default_value_t = 0.05)]
    min_p: f32,
    /// Sampler seed
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Context length [default: 2048, at most the model's]
    #[arg(
        short = 'c',
        long = "ctx-size",
        default_value_t = 0,
        hide_default_value = true
    )]
    n_ctx: usize,
    /// Logical batch: most prompt tokens handed to the model at once
    /// (llama.cpp's -b); each graph takes at most --ubatch-size of them
    #[arg(short = 'b', long = "batch-size", default_value_t = 2048,
          value_parser = clap::value_parser!(u32).range(1..))]
    n_batch: u32,
    /// Physical batch: most prompt tokens per graph (llama.cpp's -ub)
    #[arg(long = "ubatch-size", visible_alias = "ub", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    n_ubatch: u32,
    /// Wrap the prompt in the model's chat format as one user turn: the
    /// file's template, else ChatML (Gemma's turns for Gemma vocabularies)
    #[arg(long)]
    chat: bool,
    /// Chat turn after turn: each line of stdin is a user turn (-p, if
    /// given, is the first); the KV cache is kept between turns
    #[arg(short = 'i', long, conflicts_with_all = ["json", "file"])]
    interactive: bool,
    /// A system message that starts the chat (with --chat or -i)
    #[arg(long)]
    system: Option<String>,
    /// Print one JSON object: prompt_tokens, tokens, text, backend, adapter, timings
    #[arg(long)]
    json: bool,
    /// Keep generating past end-of-generation tokens
    #[arg(long)]
    ignore_eos: bool,
    /// Decode one step at a time even on a GPU (logits read back and the
    /// token sampled on the host each step) instead of pipelined with the
    /// token picked on the device
    #[arg(long)]
    no_pipelining: bool,
}

fn run(a: &Args) -> wginfer::Result<()> {
    let prompt = match &a.file {
        Some(path) => std::fs::read_to_string(path).map_err(|e| wginfer::Error::io(path, e))?,
        None => a.prompt.clone().unwrap_or_default(),
    };
    let opts = GenerateOptions {
        n_predict: usize::try_from(a.n_predict).unwrap_or(usize::MAX),
        temp: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        seed: a.seed,
        chat: a.chat,
        ignore_eos: a.ignore_eos,
    };
    // A prompt runs in graphs of the physical batch, as llama.cpp's do.
    let tokens_per_graph = a.n_batch.min(a.n_ubatch) as usize;
    let mut model = a.model.load(a.n_ctx, tokens_per_graph)?;
    model.set_pipelining(!a.no_pipelining);
    let info = model.backend_info().clone();
    let placement = common::placement_note(&model);
    if a.interactive || a.system.is_some() {
        return chat(a, &mut model, &opts, &placement);
    }
    let mut gen = model.generate(&prompt, &opts)?;
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
        let devices: Vec<String> = info.devices.iter().map(|d| json_str(d)).collect();
        writeln!(
            out,
            "{{\"prompt_tokens\": {}, \"tokens\": {}, \"text\": {}, \"backend\": {}, \
             \"adapter\": {adapter}, \"devices\": [{}], \"timings\": {{\"load_ms\": {}, \"prompt_ms\": {}, \
             \"prompt_tok_s\": {}, \"decode_ms\": {}, \"decode_tok_s\": {}}}}}",
            json_ids(gen.prompt_tokens()),
            json_ids(gen.tokens()),
            json_str(&text),
            json_str(&info.kind),
            devices.join(", "),
            json_num(t.load_ms),
            json_num(t.prompt_ms),
            json_num(t.prompt_tok_s()),
            json_num(t.decode_ms),
            json_num(t.decode_tok_s()),
        )?;
    } else {
        writeln!(out)?;
        eprintln!("{placement}: {}", summary(&gen));
    }
    Ok(())
}

/// Timings and the stop reason of a generation, as one line.
fn summary(gen: &Generation<'_>) -> String {
    let t = gen.timings();
    format!(
        "load {:.0} ms | prompt {} tokens {:.1} ms ({:.1} tok/s) | \
         decode {} tokens {:.1} ms ({:.1} tok/s) | stop: {}",
        t.load_ms,
        t.prompt_tokens,
        t.prompt_ms,
        t.prompt_tok_s(),
        t.decode_tokens,
        t.decode_ms,
        t.decode_tok_s(),
        gen.stop_reason()
            .map_or("running".to_string(), |r| r.to_string()),
    )
}

/// A chat: `-p` (if any) as the first user turn, then each line of stdin
/// (`-i`), each reply streamed; the cache keeps the earlier turns.
fn chat(
    a: &Args,
    model: &mut Model,
    opts: &GenerateOptions,
    placement: &str,
) -> wginfer::Result<()> {
    let mut conversation = match &a.system {
        Some(system) => Conversation::with_system(system),
        None => Conversation::new(),
    };
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    let mut first = a.prompt.clone();
    eprintln!("{placement}");
    loop {
        let user = match first.take() {
            Some(p) => p,
            None if !a.interactive => return Ok(()),
            None => {
                if terminal {
                    eprint!("\n> ");
                }
                let mut line = String::new();
                if stdin.lock().read_line(&mut line)? == 0 {
                    return Ok(());
                }
                match line.trim_end_matches(['\n', '\r']) {
                    "" => continue,
                    text => text.to_string(),
                }
            }
        };
        let mut out = std::io::stdout().lock();
        let mut gen = conversation.reply(model, &user, opts)?;
        for piece in &mut gen {
            out.write_all(piece?.text.as_bytes())?;
            out.flush()?;
        }
        writeln!(out)?;
        eprintln!("{}", summary(&gen));
        conversation.record(&gen);
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    common::main_of("generate", || run(&args))
}
