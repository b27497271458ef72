//! Prompt-processing and generation speed, like llama.cpp's `llama-bench`:
//! `pp N` evaluates N tokens in one batch from an empty context, `tg N`
//! generates N tokens one at a time (a random token each step, its logits
//! read back, as llama-bench does), `gen N` generates N tokens greedily
//! (`--sample`: with llama.cpp's default sampler chain) through
//! `Model::generate` (pipelined on a GPU: the next step runs while the
//! token is read back); each test runs `-r` times after a warm-up and
//! reports the mean and standard deviation in tokens per second.
//!
//! ```text
//! cargo run --release --example bench -- -p 256 -n 32 -r 3
//! cargo run --release --example bench -- --synthetic smollm2-135m -p 512 -n 128   # random weights
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{json_num, json_str, ModelArgs};
use wginfer::model::{GenerateOptions, Model};
use wginfer::rng::Rng;

/// Measure prompt (pp) and generation (tg) speed.
#[derive(Parser, Debug)]
#[command(name = "bench")]
struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt tokens of the pp test (0 skips it)
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Generated tokens of the tg test (0 skips it)
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Repetitions of each test
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    reps: usize,
    /// Print one JSON object instead of a table
    #[arg(long)]
    json: bool,
    /// Run the gen test one step at a time even on a GPU (logits read back,
    /// the token picked on the host)
    #[arg(long)]
    no_pipelining: bool,
    /// Sample the gen test's tokens with llama.cpp's default chain
    /// (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05) instead of greedily
    #[arg(long)]
    sample: bool,
}

/// Mean and standard deviation of tokens per second over the runs.
#[derive(Clone, Copy, Debug, Default)]
struct Speed {
    mean: f64,
    std: f64,
}

fn speed(n_tokens: usize, seconds: &[f64]) -> Speed {
    let rates: Vec<f64> = seconds.iter().map(|&s| n_tokens as f64 / s).collect();
    let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    let var = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / rates.len().max(1) as f64;
    Speed {
        mean,
        std: var.sqrt(),
    }
}

fn random_tokens(rng: &mut Rng, n: usize, n_vocab: usize) -> Vec<u32> {
    (0..n).map(|_| rng.below(n_vocab) as u32).collect()
}

/// Seconds of one pp run: `n` tokens in one batch at position 0.
fn pp_once(m: &mut Model, rng: &mut Rng, n: usize) -> wginfer::Result<f64> {
    let tokens = random_tokens(rng, n, m.config().n_vocab);
    let t = Instant::now();
    m.eval(&tokens, 0, false)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Seconds of one tg run: `n` single-token steps from position 0; adds
/// each step's host time split to `split` (prepare, run, read, and the part
/// of run spent copying between backends).
fn tg_once(m: &mut Model, rng: &mut Rng, n: usize, split: &mut [f64; 4]) -> wginfer::Result<f64> {
    let tokens = random_tokens(rng, n, m.config().n_vocab);
    let t = Instant::now();
    for (pos, &tok) in tokens.iter().enumerate() {
        m.eval(&[tok], pos, false)?;
        let s = m.last_times();
        let copies = m.last_run().transfer_time;
        for (acc, d) in split.iter_mut().zip([s.prepare, s.run, s.read, copies]) {
            *acc += d.as_secs_f64();
        }
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Seconds per `n` tokens of generation (greedy, or with the default
/// sampler) after a one-token prompt (the decode part only, as llama.cpp's
/// eval time).
fn gen_once(m: &mut Model, rng: &mut Rng, n: usize, sample: bool) -> wginfer::Result<f64> {
    let prompt = random_tokens(rng, 1, m.config().n_vocab);
    let defaults = GenerateOptions::default();
    let opts = GenerateOptions {
        n_predict: n,
        temp: if sample { defaults.temp } else { 0.0 },
        ignore_eos: true,
        ..defaults
    };
    let mut gen = m.generate_tokens(prompt, &opts)?;
    for piece in &mut gen {
        piece?;
    }
    let t = gen.timings();
    Ok(t.decode_ms / 1e3 * n as f64 / t.decode_tokens.max(1) as f64)
}

fn run(a: &Args) -> wginfer::Result<()> {
    let n_ctx = (a.n_prompt.max(a.n_gen)).max(1);
    let loaded = a.model.load(n_ctx, a.n_prompt.max(1));
    let mut m = loaded?;
    let reps = a.reps.max(1);
    let mut rng = Rng::new(1234);
    let mut pp = None;
    if a.n_prompt > 0 {
        pp_once(&mut m, &mut rng, a.n_prompt)?; // warm-up: pipelines, clocks
        let runs = (0..reps)
            .map(|_| pp_once(&mut m, &mut rng, a.n_prompt))
            .collect::<wginfer::Result<Vec<_>>>()?;
        pp = Some(speed(a.n_prompt, &runs));
    }
    let (mut tg, mut per_token, mut gpu_us) = (None, None, None);
    let mut split = [0.0f64; 4];
    if a.n_gen > 0 {
        tg_once(&mut m, &mut rng, a.n_gen.min(8), &mut [0.0; 4])?;
        let before = m.counters();
        let runs = (0..reps)
            .map(|_| tg_once(&mut m, &mut rng, a.n_gen, &mut split))
            .collect::<wginfer::Result<Vec<_>>>()?;
        let after = m.counters();
        let steps = (a.n_gen * reps) as f64;
        if after.submits > 0 {
            per_token = Some((
                (after.dispatches - before.dispatches) as f64 / steps,
                (after.submits - before.submits) as f64 / steps,
            ));
        }
        if after.gpu_timed_runs > before.gpu_timed_runs {
            let us = |a: u64, b: u64| (a - b) as f64 / 1e3 / steps;
            gpu_us = Some((
                us(after.gpu_busy_ns, before.gpu_busy_ns),
                us(after.gpu_span_ns, before.gpu_span_ns),
            ));
        }
        tg = Some(speed(a.n_gen, &runs));
    }
    let mut gen = None;
    m.set_pipelining(!a.no_pipelining);
    if a.n_gen > 1 {
        gen_once(&mut m, &mut rng, a.n_gen.min(8), a.sample)?;
        let runs = (0..reps)
            .map(|_| gen_once(&mut m, &mut rng, a.n_gen, a.sample))
            .collect::<wginfer::Result<Vec<_>>>()?;
        gen = Some(speed(a.n_gen, &runs));
    }
    let copies = m.last_run();

    let us = |v: f64| v * 1e6 / (a.n_gen * reps).max(1) as f64;
    let name = a
        .model
        .synthetic
        .as_ref()
        .map_or(a.model.model.clone(), |p| format!("synthetic {p}"));
    let info = m.backend_info();
    if a.json {
        let sp =
            |s: Option<Speed>, f: fn(Speed) -> f64| s.map_or("null".into(), |s| json_num(f(s)));
        let pt = |i: usize| {
            per_token.map_or("null".into(), |p: (f64, f64)| {
                json_num(if i == 0 { p.0 } else { p.1 })
            })
        };
        println!(
            "{{\"model\": {}, \"backend\": {}, \"adapter\": {}, \"devices\": [{}], \"split_mode\": {}, \
             \"n_gpu_layers\": {}, \"flash_attn\": {}, \"splits\": {}, \"decode_transfers\": {}, \"decode_transfer_bytes\": {}, \
             \"n_prompt\": {}, \"n_gen\": {}, \"repetitions\": {reps}, \"pp_tok_s\": {}, \
             \"pp_std\": {}, \"tg_tok_s\": {}, \"tg_std\": {}, \"gen_tok_s\": {}, \"gen_std\": {}, \
             \"pipelined\": {}, \"gen_sampled\": {}, \"dispatches_per_token\": {}, \
             \"submits_per_token\": {}, \"decode_host_us\": {{\"prepare\": {}, \"run\": {}, \"copies\": {}, \"read\": {}}}, \
             \"decode_gpu_us\": {}}}",
            json_str(&name),
            json_str(&info.kind),
            info.adapter.as_deref().map_or("null".into(), json_str),
            info.devices.iter().map(|d| json_str(d)).collect::<Vec<_>>().join(", "),
            json_str(&m.split_mode().to_string()),
            m.offloaded_layers(),
            json_str(&format!("{:?}", a.model.flash_attn).to_lowercase()),
            m.splits(),
            copies.transfers,
            copies.transfer_bytes,
            a.n_prompt,
            a.n_gen,
            sp(pp, |s| s.mean),
            sp(pp, |s| s.std),
            sp(tg, |s| s.mean),
            sp(tg, |s| s.std),
            sp(gen, |s| s.mean),
            sp(gen, |s| s.std),
            m.pipelining(),
            a.sample,
            pt(0),
            pt(1),
            json_num(us(split[0])),
            json_num(us(split[1])),
            json_num(us(split[3])),
            json_num(us(split[2])),
            gpu_us.map_or("null".into(), |(busy, span)| format!(
                "{{\"busy\": {}, \"span\": {}}}",
                json_num(busy),
                json_num(span)
            )),
        );
    } else {
        println!("{}", common::placement_note(&m));
        println!("| model | test | t/s |\n| --- | --- | ---: |");
        for (test, s) in [
            (format!("pp{}", a.n_prompt), pp),
            (format!("tg{}", a.n_gen), tg),
            (
                format!(
                    "gen{} ({}{})",
                    a.n_gen,
                    if m.pipelining() {
                        "pipelined"
                    } else {
                        "serial"
                    },
                    if a.sample { ", sampled" } else { "" }
                ),
                gen,
            ),
        ] {
            if let Some(s) = s {
                println!("| {name} | {test} | {:.2} ± {:.2} |", s.mean, s.std);
            }
        }
        if let Some((d, s)) = per_token {
            println!(
                "decode: {d:.1} dispatches and {s:.1} submits per token, {} copies between backends ({:.1} KiB)",
                copies.transfers,
                copies.transfer_bytes as f64 / 1024.0
            );
        }
        if tg.is_some() {
            println!(
                "decode per token on the host: prepare {:.0} us, run {:.0} us (copies between backends {:.0} us), wait + read {:.0} us",
                us(split[0]),
                us(split[1]),
                us(split[3]),
                us(split[2])
            );
        }
        if let Some((busy, span)) = gpu_us {
            println!(
                "decode per token on the GPU: kernels {busy:.0} us, first to last {span:.0} us \
                 (timestamps at each submission's start and end, WGINFER_GPU_TIMER)"
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    common::main_of("bench", || run(&args))
}
