//! Tokenizes text with a model's tokenizer, like llama.cpp's `llama-tokenize`.
//!
//! ```text
//! cargo run --example tokenize -- [-m MODEL] (--text T | --file F) [--parse-special] [--add-special] [--json]
//! ```
//! Plain output is one `id -> 'piece'` line per token; `--json` prints
//! `{"ids": [...]}`.

use std::io::Write;
use std::process::ExitCode;

use wginfer::gguf::GgufFile;
use wginfer::tokenizer::Tokenizer;

const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Args {
    model: String,
    text: String,
    parse_special: bool,
    add_special: bool,
    json: bool,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: tokenize [-m|--model PATH] (-t|--text TEXT | -p|--prompt TEXT | -f|--file PATH) \
         [--parse-special] [--add-special] [--json]\n\
         \n  -m, --model PATH    GGUF model (default {DEFAULT_MODEL})\
         \n  -t, --text TEXT     the text to tokenize (also -p, --prompt)\
         \n  -f, --file PATH     read the text from a file\
         \n  --parse-special     special tokens such as <|im_start|> in the text become their ids\
         \n  --add-special       add BOS/EOS as the model asks (tokenizer.ggml.add_bos_token)\
         \n  --json              print {{\"ids\": [...]}} instead of one 'id -> piece' per line"
    );
    ExitCode::from(2)
}

fn parse() -> Result<Option<Args>, String> {
    let mut args = Args {
        model: DEFAULT_MODEL.into(),
        text: String::new(),
        parse_special: false,
        add_special: false,
        json: false,
    };
    let mut have_text = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "-m" | "--model" => args.model = value()?,
            "-t" | "--text" | "-p" | "--prompt" => {
                args.text = value()?;
                have_text = true;
            }
            "-f" | "--file" => {
                let path = value()?;
                args.text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                have_text = true;
            }
            "--parse-special" => args.parse_special = true,
            "--add-special" => args.add_special = true,
            "--json" => args.json = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if !have_text {
        return Err("give the text with --text or --file".into());
    }
    Ok(Some(args))
}

fn run(args: &Args) -> wginfer::Result<()> {
    let file = GgufFile::open(&args.model)?;
    let tok = Tokenizer::from_gguf(&file)?;
    let ids = tok.encode_opts(&args.text, args.add_special, args.parse_special)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(out, "{{\"ids\": [{}]}}", list.join(", "))?;
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
    env_logger::init();
    let args = match parse() {
        Ok(Some(a)) => a,
        Ok(None) => return usage(),
        Err(e) => {
            eprintln!("tokenize: {e}");
            return usage();
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tokenize: {e}");
            ExitCode::FAILURE
        }
    }
}
