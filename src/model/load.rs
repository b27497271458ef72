//! [`Model`]: a GGUF llama model loaded onto a backend with its context
//! (KV cache and compute arena), ready to evaluate tokens.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::config::ModelConfig;
use super::devices::{open_cpu, open_custom, open_wgpu, BackendChoice, BackendInfo, Opened};
use super::eval::Evaluator;
use super::kv_cache::KvCache;
use super::llama_graph::FlashAttn;
use super::llama_graph::{expected_weights, optional_weights};
use super::placement::{GpuSplit, LayerPlacement, SplitMode};
use super::weights::Weights;
use crate::backend::wgpu::AdapterChoice;
use crate::backend::Backend;
use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;
use crate::{DType, Error, Result};

/// Context length when [`LoadOptions::n_ctx`] is 0 (capped at the model's).
pub const DEFAULT_N_CTX: usize = 2048;
/// Tokens per graph when [`LoadOptions::n_batch`] is 0.
pub const DEFAULT_N_BATCH: usize = 512;

/// Called with `(bytes uploaded, bytes in all)` while weights load.
pub type Progress = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// How to load a model.
#[derive(Clone)]
pub struct LoadOptions {
    /// Where to run.
    pub backend: BackendChoice,
    /// Context length in tokens; 0 is [`DEFAULT_N_CTX`] or the model's own
    /// when that is smaller. More than the model's is an error.
    pub n_ctx: usize,
    /// Most tokens evaluated in one graph (longer prompts go in pieces); 0 is
    /// [`DEFAULT_N_BATCH`].
    pub n_batch: usize,
    /// Type of the KV cache: F16 (llama.cpp's default) or F32.
    pub kv_type: DType,
    /// Layers on the GPU, the last ones first (llama.cpp's `n_gpu_layers`);
    /// the rest run on the CPU. `None` offloads everything, including the
    /// token embedding and output, which also go to the GPU for any value
    /// above the layer count. Ignored on the CPU backend.
    pub n_gpu_layers: Option<usize>,
    /// wgpu adapters to open, one device (buffers and queue) each; an
    /// adapter may repeat to open several devices on it. Empty is the
    /// default adapter. Only for the `wgpu` and `auto` backends.
    pub devices: Vec<AdapterChoice>,
    /// How several devices share the model (llama.cpp's `--split-mode`).
    pub split_mode: SplitMode,
    /// The device, an index into `devices`, that holds everything in `none`
    /// mode and what is not split in `row` mode (llama.cpp's `--main-gpu`).
    pub main_gpu: usize,
    /// Each device's proportion of the model, e.g. `[3.0, 1.0]` (llama.cpp's
    /// `--tensor-split`); missing entries are 0; empty follows each
    /// device's memory.
    pub tensor_split: Vec<f32>,
    /// Bytes of weights and KV cache a model may plan on each device
    /// (default: the device's local memory, where the driver reports it).
    pub device_memory: Option<u64>,
    /// Attention as one flash-attention op (llama.cpp's `--flash-attn`):
    /// `Auto` uses it where it is faster (see [`FlashAttn::Auto`]).
    pub flash_attn: FlashAttn,
    /// Threads of the CPU backend (llama.cpp's `--threads`); 0: one per
    /// available core.
    pub threads: usize,
    /// Weight-upload progress.
    pub progress: Option<Progress>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            backend: BackendChoice::Auto,
            n_ctx: 0,
            n_batch: 0,
            kv_type: DType::F16,
            n_gpu_layers: None,
            devices: Vec::new(),
            split_mode: SplitMode::default(),
            main_gpu: 0,
            tensor_split: Vec::new(),
            device_memory: None,
            flash_attn: FlashAttn::default(),
            threads: 0,
            progress: None,
        }
    }
}

impl std::fmt::Debug for LoadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadOptions")
            .field("backend", &self.backend)
            .field("n_ctx", &self.n_ctx)
            .field("n_batch", &self.n_batch)
            .field("kv_type", &self.kv_type)
            .field("n_gpu_layers", &self.n_gpu_layers)
            .field("devices", &self.devices)
            .field("split_mode", &self.split_mode)
            .field("main_gpu", &self.main_gpu)
            .field("tensor_split", &self.tensor_split)
            .field("device_memory", &self.device_memory)
            .field("flash_attn", &self.flash_attn)
            .field("threads", &self.threads)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// A llama-family model on a backend, with one sequence's context.
pub struct Model {
    pub(super) config: ModelConfig,
    pub(super) tokenizer: Tokenizer,
    pub(super) weights: Weights,
    pub(super) kv: KvCache,
    pub(super) eval: Evaluator,
    info: BackendInfo,
    offloaded_layers: usize,
    split: GpuSplit,
    load_ms: f64,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("config", &self.config)
            .field("backend", &self.info)
            .field("weights", &self.weights)
            .field("kv", &self.kv)
            .field("eval", &self.eval)
            .finish_non_exhaustive()
    }
}

/// Checks every weight the graph reads before anything is uploaded.
fn check_weights(file: &GgufFile, c: &ModelConfig) -> Result<()> {
    // Each block has several tensors of its own. A block count from the
    // file above its tensor count is wrong, and would first build a list of
    // that many blocks' weight names (a count near 2^64 exhausts memory).
    if c.n_layer > file.tensors().len() {
        return Err(Error::invalid(format!(
            "{}: block_count {} is more than the {} tensors in the file",
            c.arch,
            c.n_layer,
            file.tensors().len()
        )));
    }
    let optional = optional_weights(c)
        .into_iter()
        .filter(|(name, _)| file.tensor(name).is_some());
    for (name, ne) in expected_weights(c).into_iter().chain(optional) {
        let info = file.require_tensor(&name)?;
        let want = crate::graph::shape4(&ne)?;
        if info.ne != want {
            return Err(Error::shape(format!(
                "tensor '{name}' has shape {:?}; the hyperparameters need {want:?}",
                info.shape()
            )));
        }
        info.dtype()?;
    }
    Ok(())
}

struct Parts {
    weights: Weights,
    kv: KvCache,
    eval: Evaluator,
    offloaded_layers: usize,
    split: GpuSplit,
}

fn load_parts(
    file: &GgufFile,
    c: &ModelConfig,
    opened: &Opened,
    n_ctx: usize,
    opts: &LoadOptions,
) -> Result<Parts> {
    let backends = &opened.backends;
    let mut report = |done: usize, total: usize| {
        if let Some(p) = &opts.progress {
            p(done, total);
        }
    };
    let n_batch = match opts.n_batch {
        0 => DEFAULT_N_BATCH,
        n => n,
    };
    let n_gpus = opened.n_gpus;
    let split = if n_gpus <= 1 && opts.main_gpu == 0 && opts.tensor_split.len() <= 1 {
        GpuSplit::single()
    } else {
        let capacity: Vec<Option<usize>> = backends[..n_gpus].iter().map(|b| b.memory()).collect();
        GpuSplit::new(
            opts.split_mode,
            opts.main_gpu,
            &opts.tensor_split,
            &capacity,
        )?
    };
    let place = LayerPlacement::new(c.n_layer, opts.n_gpu_layers, c.tied_output, n_gpus, &split);
    let adjacent = super::llama_graph::joined_weights(c);
    let weights = Weights::plan(
        file,
        backends,
        &|name, rows| {
            let bytes = file.tensor(name).map_or(0, |t| t.size);
            place.sized_tensor(name, rows, bytes, &|b| backends[b].max_tensor_size())
        },
        &adjacent,
    )?;
    check_fits(c, &weights, &place, backends, n_ctx, opts.kv_type)?;
    let weights = weights.upload(file, backends, &mut report)?;
    let layer_backends: Vec<&dyn Backend> = (0..c.n_layer)
        .map(|il| backends[place.layer(il)].as_ref())
        .collect();
    let kv = KvCache::new(&layer_backends, n_ctx, c.n_embd_kv(), opts.kv_type)?;
    // Flash attention pays on hardware GPUs only, and only when every
    // layer's attention runs there (see `FlashAttn::Auto`).
    let on_gpus = !opened.software && layer_backends.iter().all(|b| b.queues_work());
    let flash_attn = match (c.attn_softcap, opts.flash_attn) {
        // The flash-attention kernels have no soft cap of the scores.
        (Some(_), FlashAttn::On | FlashAttn::Decode) => {
            return Err(Error::invalid(format!(
                "{}: flash attention does not soft-cap the attention scores; use --flash-attn off or auto",
                c.arch
            )))
        }
        (Some(_), _) => FlashAttn::Off,
        (None, choice) => choice.resolve(on_gpus),
    };
    let eval = Evaluator::new(backends.clone(), c, &weights, &kv, n_batch, flash_attn)?;
    Ok(Parts {
        weights,
        kv,
        eval,
        offloaded_layers: place.offloaded_layers(),
        split,
    })
}

/// Checks, before anything is uploaded, that each backend's share of the
/// weights and KV cache fits the memory it reports (the compute arena,
/// sized later, comes on top).
fn check_fits(
    c: &ModelConfig,
    weights: &Weights,
    place: &LayerPlacement,
    backends: &[Arc<dyn Backend>],
    n_ctx: usize,
    kv_type: DType,
) -> Result<()> {
    let align = backends.iter().map(|b| b.alignment()).max().unwrap_or(1);
    let (_, kv_layer) = KvCache::layer_layout(n_ctx, c.n_embd_kv(), kv_type, align)?;
    let mut need = weights.bytes_per_backend(backends.len());
    for il in 0..c.n_layer {
        if let Some(n) = need.get_mut(place.layer(il)) {
            // Saturates into the memory check below instead of overflowing.
            *n = n.saturating_add(kv_layer);
        }
    }
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    for (i, (backend, &need)) in backends.iter().zip(&need).enumerate() {
        log::info!(
            "{} (backend {i}): {:.1} MiB of weights and KV cache",
            backend.name(),
            mib(need)
        );
        match backend.memory() {
            Some(have) if need > have => {
                return Err(Error::OutOfMemory(format!(
                    "the model needs {:.1} MiB of weights and KV cache on device {i} ({}), \
                     which has {:.1} MiB: offload fewer layers (--n-gpu-layers), shorten the \
                     context, change --tensor-split or add devices",
                    mib(need),
                    backend.name(),
                    mib(have)
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

impl Model {
    /// Opens a GGUF file, reads its hyperparameters and tokenizer, uploads
    /// its weights and allocates the context. Errors name the missing key,
    /// the tensor of an unsupported type or shape, or the op a backend lacks.
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Model> {
        let start = Instant::now();
        let file = GgufFile::open(path)?;
        let config = ModelConfig::from_gguf(&file)?;
        let tokenizer = Tokenizer::from_gguf(&file)?;
        check_weights(&file, &config)?;
        let n_ctx = match opts.n_ctx {
            0 => DEFAULT_N_CTX.min(config.n_ctx_train),
            n if n > config.n_ctx_train => {
                return Err(Error::invalid(format!(
                    "a context of {n} tokens exceeds the model's {}",
                    config.n_ctx_train
                )))
            }
            n => n,
        };
        let (opened, parts) = match &opts.backend {
            BackendChoice::Cpu | BackendChoice::Custom(_) if !opts.devices.is_empty() => {
                return Err(Error::invalid(
                    "devices name wgpu adapters: use the wgpu or auto backend",
                ))
            }
            BackendChoice::Cpu => {
                let o = open_cpu(opts.threads, None);
                let p = load_parts(&file, &config, &o, n_ctx, opts)?;
                (o, p)
            }
            BackendChoice::Wgpu => {
                let o = open_wgpu(
                    &opts.devices,
                    opts.main_gpu,
                    opts.device_memory,
                    opts.threads,
                )?;
                let p = load_parts(&file, &config, &o, n_ctx, opts)?;
                (o, p)
            }
            BackendChoice::Custom(b) => {
                let o = open_custom(b, opts.threads);
                let p = load_parts(&file, &config, &o, n_ctx, opts)?;
                (o, p)
            }
            BackendChoice::Auto => {
                // Settings for several devices are the user's intent: their
                // errors surface instead of a quiet run on the CPU.
                let multi_device = !opts.devices.is_empty()
                    || !opts.tensor_split.is_empty()
                    || opts.main_gpu != 0
                    || opts.device_memory.is_some();
                let opened = open_wgpu(
                    &opts.devices,
                    opts.main_gpu,
                    opts.device_memory,
                    opts.threads,
                );
                let opened = match opened {
                    // A software renderer (lavapipe, SwiftShader) runs the
                    // kernels on the same cores, far slower than the CPU
                    // backend's own loops.
                    Ok(o) if o.software && !multi_device => Err(Error::Backend {
                        backend: "wgpu".into(),
                        msg: format!(
                            "{} is a software renderer, slower than the CPU backend \
                             (--backend wgpu uses it)",
                            o.info.adapter.as_deref().unwrap_or("the adapter")
                        ),
                    }),
                    other => other,
                };
                let tried = opened.and_then(|o| {
                    let p = load_parts(&file, &config, &o, n_ctx, opts)?;
                    Ok((o, p))
                });
                match tried {
                    Ok(done) => done,
                    Err(e) if multi_device || matches!(e, Error::InvalidArgument(_)) => {
                        return Err(e)
                    }
                    Err(e) => {
                        let o = open_cpu(
                            opts.threads,
                            Some(format!("wgpu not used ({e}); running on the CPU")),
                        );
                        let p = load_parts(&file, &config, &o, n_ctx, opts)?;
                        (o, p)
                    }
                }
            }
        };
        Ok(Model {
            config,
            tokenizer,
            weights: parts.weights,
            kv: parts.kv,
            eval: parts.eval,
            offloaded_layers: parts.offloaded_layers,
            split: parts.split,
            info: opened.info,
            load_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The backend in use, its adapter and why `auto` fell back, if it did.
    pub fn backend_info(&self) -> &BackendInfo {
        &self.info
    }

    /// Layers whose weights and cache are on the GPU (0 on the CPU backend).
    pub fn offloaded_layers(&self) -> usize {
        self.offloaded_layers
    }

    /// How the model is spread over the GPUs: split mode, main GPU and each
    /// GPU's share.
    pub fn gpu_split(&self) -> &GpuSplit {
        &self.split
    }

    /// The split mode in use (`none` with a single device).
    pub fn split_mode(&self) -> SplitMode {
        self.split.mode()
    }

    /// Bytes of weights on each backend (the GPUs in `devices` order, then
    /// the CPU).
    pub fn weight_bytes_per_backend(&self) -> Vec<usize> {
        self.weights.bytes_per_backend(self.eval.n_backends())
    }

    /// Splits of the largest graph: 1 when it runs on one backend.
    pub fn splits(&self) -> usize {
        self.eval.splits()
    }

    /// Whether evaluations reuse the graph, schedule and recorded dispatches
    /// of an earlier one of the same shape (the default); off, every
    /// evaluation builds its graph anew (for comparisons and bug hunts).
    pub fn set_plan_reuse(&mut self, reuse: bool) {
        self.eval.set_plan_reuse(reuse);
    }

    /// Whether generation pipelines its steps (the default where the whole
    /// model runs on one GPU): each step's token is picked on the device
    /// (an argmax when greedy, else the sampler's top-k and draw, for top-k
    /// up to [`crate::graph::MAX_SAMPLE_TOP_K`]) and read back while the
    /// next step already runs. Off, every step reads its logits back and
    /// the host picks the token (the same tokens, one step at a time; a
    /// sampled token can differ where the draw falls within float rounding
    /// of a boundary between two candidates).
    pub fn set_pipelining(&mut self, on: bool) {
        self.eval.set_chaining(on);
    }

    /// Whether generation is pipelined where the sampler allows (see [`Model::set_pipelining`]).
    pub fn pipelining(&self) -> bool {
        self.eval.can_chain()
    }

    /// Graphs built (scheduled and allocated) so far: one per shape while
    /// plans are reused.
    pub fn plans_built(&self) -> u64 {
        self.eval.plans_built()
    }

    /// What the last evaluation did: splits run, tensors copied between backends.
    pub fn last_run(&self) -> crate::sched::RunStats {
        self.eval.last_run()
    }

    /// Where the last evaluation's time went (prepare, run, read back).
    pub fn last_times(&self) -> super::StepTimes {
        self.eval.last_times()
    }

    /// Dispatches and submits of all backends so far (zero on the CPU).
    pub fn counters(&self) -> crate::backend::Counters {
        self.eval.counters()
    }

    /// Context length in tokens.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx()
    }

    /// Most tokens per graph.
    pub fn n_batch(&self) -> usize {
        self.eval.n_batch()
    }

    /// Milliseconds [`Model::load`] took.
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Bytes on the backend: weights, KV cache and compute arena.
    pub fn backend_bytes(&self) -> (usize, usize, usize) {
        (
            self.weights.bytes(),
            self.kv.bytes(),
            self.eval.arena_bytes(),
        )
    }

    /// Tokenizes a prompt as llama.cpp does: special tokens parsed, BOS only
    /// when the model asks for it (`tokenizer.ggml.add_bos_token`).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        self.tokenizer.encode_opts(text, true, true)
    }

    /// Evaluates `tokens` at positions `n_past..` of the context, writing
    /// their keys and values into the cache, and returns logits: `n_vocab`
    /// per position with `all_logits`, else those of the last token.
    /// Positions `0..n_past` must hold this sequence's earlier tokens (from
    /// earlier calls); the batch attends to them.
    pub fn eval(&mut self, tokens: &[u32], n_past: usize, all_logits: bool) -> Result<Vec<f32>> {
        self.eval.eval(
            &self.config,
            &self.weights,
            &self.kv,
            tokens,
            n_past,
            all_logits,
        )
    }
}
