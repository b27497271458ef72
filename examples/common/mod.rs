//! Helpers shared by the model examples: loading with a progress bar on
//! stderr, and JSON output without a serializer dependency.
#![allow(dead_code)]

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wginfer::backend::wgpu::AdapterChoice;
use wginfer::model::synthetic::SyntheticLlama;
use wginfer::model::{BackendChoice, FlashAttn, LoadOptions, Model, SplitMode};

/// The model every example defaults to.
pub const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// A one-line progress bar on stderr, redrawn when the percentage changes;
/// when stderr is not a terminal, one line once loading is done.
pub fn progress_bar(label: &'static str) -> wginfer::model::Progress {
    let last = Arc::new(AtomicUsize::new(usize::MAX));
    let tty = std::io::stderr().is_terminal();
    Arc::new(move |done: usize, total: usize| {
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if last.swap(pct, Ordering::Relaxed) == pct || (!tty && done < total) {
            return;
        }
        let filled = pct * 30 / 100;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{label} [{}{}] {pct:3}% {:.1}/{:.1} MiB",
            "#".repeat(filled),
            "-".repeat(30 - filled),
            done as f64 / (1 << 20) as f64,
            total as f64 / (1 << 20) as f64
        );
        if done >= total {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    })
}

/// The flags every model example takes.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// GGUF model file (the default one is fetched when missing)
    #[arg(short = 'm', long, default_value = DEFAULT_MODEL)]
    pub model: String,
    /// auto (wgpu when a hardware adapter opens, else cpu), wgpu or cpu
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    pub backend: BackendChoice,
    /// Layers on the GPU, the last ones (llama.cpp's -ngl); the rest run on
    /// the CPU; above the layer count the embedding and output go too [default: all]
    #[arg(long = "n-gpu-layers", visible_alias = "ngl")]
    pub n_gpu_layers: Option<usize>,
    /// wgpu adapters to open, one device each, by index or name (see the
    /// adapters example); repeat one to open several devices on it, e.g. 0,0
    #[arg(long, value_delimiter = ',', value_parser = parse_adapter)]
    pub devices: Vec<AdapterChoice>,
    /// How several devices share the model: none (all on --main-gpu),
    /// layer (whole layers) or row (each matrix cut by rows)
    #[arg(long = "split-mode", visible_alias = "sm", default_value = "layer", value_parser = parse_split_mode)]
    pub split_mode: SplitMode,
    /// The device (index into --devices) that holds everything in none mode
    /// and what is not split in row mode
    #[arg(long = "main-gpu", visible_alias = "mg", default_value_t = 0)]
    pub main_gpu: usize,
    /// Each device's proportion of the model, e.g. 3,1 [default: by device memory]
    #[arg(long = "tensor-split", visible_alias = "ts", value_delimiter = ',')]
    pub tensor_split: Vec<f32>,
    /// MiB of weights and KV cache each device may hold [default: its memory]
    #[arg(long = "device-memory-mib")]
    pub device_memory_mib: Option<u64>,
    /// Attention as one flash-attention op: on, off, decode (one-token
    /// steps only) or auto (decode on a GPU, else off)
    #[arg(long = "flash-attn", visible_alias = "fa", default_value = "auto", value_parser = parse_flash_attn)]
    pub flash_attn: FlashAttn,
    /// Threads of the CPU backend [default: one per core]
    #[arg(short = 't', long, default_value_t = 0, hide_default_value = true)]
    pub threads: usize,
    /// Use a model of this shape with random weights instead of -m:
    /// smollm2-135m, 1b or 8b, optionally with a weight type (`8b:q4_K`);
    /// written to a temporary file first
    #[arg(long)]
    pub synthetic: Option<String>,
}

fn parse_flash_attn(s: &str) -> Result<FlashAttn, String> {
    FlashAttn::parse(s).map_err(|e| e.to_string())
}

fn parse_backend(s: &str) -> Result<BackendChoice, String> {
    BackendChoice::parse(s).map_err(|e| e.to_string())
}

fn parse_adapter(s: &str) -> Result<AdapterChoice, String> {
    Ok(AdapterChoice::parse(s))
}

fn parse_split_mode(s: &str) -> Result<SplitMode, String> {
    SplitMode::parse(s).map_err(|e| e.to_string())
}

impl ModelArgs {
    /// Loads the model with a progress bar on stderr; the default model is
    /// fetched first when it is missing.
    pub fn load(&self, n_ctx: usize, n_batch: usize) -> wginfer::Result<Model> {
        if let Some(preset) = &self.synthetic {
            let spec = SyntheticLlama::preset(preset)?;
            let path = std::env::temp_dir().join(format!(
                "wginfer-synthetic-{}-{}.gguf",
                preset.replace(':', "-"),
                std::process::id()
            ));
            eprintln!(
                "writing a {preset} model with random weights to {}",
                path.display()
            );
            spec.write(&path, 1)?;
            let model = ModelArgs {
                model: path.display().to_string(),
                synthetic: None,
                ..self.clone()
            }
            .load(n_ctx, n_batch);
            let _ = std::fs::remove_file(&path);
            return model;
        }
        if self.model == DEFAULT_MODEL && !Path::new(&self.model).exists() {
            fetch_default_model()?;
        }
        let model = Model::load(
            &self.model,
            &LoadOptions {
                backend: self.backend.clone(),
                n_ctx,
                n_batch,
                n_gpu_layers: self.n_gpu_layers,
                devices: self.devices.clone(),
                split_mode: self.split_mode,
                main_gpu: self.main_gpu,
                tensor_split: self.tensor_split.clone(),
                device_memory: self.device_memory_mib.map(|m| m << 20),
                flash_attn: self.flash_attn,
                threads: self.threads,
                progress: Some(progress_bar("loading")),
                ..LoadOptions::default()
            },
        )?;
        if let Some(note) = &model.backend_info().note {
            eprintln!("note: {note}");
        }
        Ok(model)
    }
}

/// Runs `scripts/fetch-model.sh`, which downloads and checks the default model.
fn fetch_default_model() -> wginfer::Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-model.sh");
    eprintln!(
        "{DEFAULT_MODEL} is missing: fetching it with {}",
        script.display()
    );
    let status = std::process::Command::new("bash")
        .arg(&script)
        .status()
        .map_err(|e| wginfer::Error::io(&script, e))?;
    if !status.success() {
        return Err(wginfer::Error::invalid(format!(
            "{} failed ({status}); fetch the model by hand or pass -m",
            script.display()
        )));
    }
    Ok(())
}

/// "backend wgpu (adapter), 10/30 layers offloaded, 3 splits" for logs;
/// several devices are listed with the split mode.
pub fn placement_note(model: &Model) -> String {
    let info = model.backend_info();
    let mut s = format!("backend {}", info.kind);
    if info.devices.len() > 1 {
        s += &format!(
            " ({} devices: {}; split {})",
            info.devices.len(),
            info.devices.join(", "),
            model.split_mode()
        );
    } else if let Some(a) = &info.adapter {
        s += &format!(" ({a})");
    }
    if info.kind != "cpu" {
        s += &format!(
            ", {}/{} layers offloaded, {} split{}",
            model.offloaded_layers(),
            model.config().n_layer,
            model.splits(),
            if model.splits() == 1 { "" } else { "s" }
        );
    }
    s
}

/// `main` of an example: logging from `RUST_LOG`, then `run`; an error is
/// printed as `name: error` with a failing exit code.
pub fn main_of(name: &str, run: impl FnOnce() -> wginfer::Result<()>) -> ExitCode {
    env_logger::init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A finite f64 as JSON, rounded to 3 decimals (non-finite values become null).
pub fn json_num(v: f64) -> String {
    if v.is_finite() {
        // Three decimals: timings in ms and rates need no more.
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        "null".into()
    }
}

/// An f32 as JSON in its shortest exact form (non-finite values become null).
pub fn json_f32(v: f32) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// A list of ids as a JSON array.
pub fn json_ids(ids: &[u32]) -> String {
    let items: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!("[{}]", items.join(", "))
}
