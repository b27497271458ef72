//! Writes a model of a preset shape with random weights to a GGUF file,
//! for comparing engines on the same file where the real model cannot go
//! (`llama-bench -m FILE` beside `bench -m FILE`). The other examples'
//! `--synthetic SHAPE` writes the same model to a temporary file.
//!
//! `cargo run --release --example synthetic -- 1b models/synthetic-1b.gguf`

use clap::Parser;

#[derive(Parser)]
#[command(about = "Write a random-weight model of a preset shape to a GGUF file")]
struct Args {
    /// smollm2-135m, 1b, 8b, tiny or tiny-k, optionally as another architecture
    /// and with a weight type (`8b:q4_K`, `tiny@qwen2`, `1b@llama3:q4_K`)
    shape: String,
    /// The file to write
    path: std::path::PathBuf,
    /// Seed of the random weights
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() {
    let args = Args::parse();
    let written = wginfer::model::synthetic::SyntheticLlama::preset(&args.shape)
        .and_then(|spec| spec.write(&args.path, args.seed));
    if let Err(e) = written {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    eprintln!("wrote {} to {}", args.shape, args.path.display());
}
