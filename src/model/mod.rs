//! Llama-family text generation: hyperparameters from GGUF metadata,
//! weights and a KV cache on a backend, llama.cpp's llama graph per batch,
//! sampling and streamed decoding.
//!
//! ```no_run
//! use std::io::Write;
//! use wginfer::model::{BackendChoice, GenerateOptions, LoadOptions, Model};
//!
//! # fn main() -> wginfer::Result<()> {
//! let mut model = Model::load(
//!     "models/SmolLM2-135M-Instruct.Q4_1.gguf",
//!     &LoadOptions {
//!         backend: BackendChoice::Cpu,
//!         n_ctx: 1024,
//!         ..LoadOptions::default()
//!     },
//! )?;
//! let opts = GenerateOptions {
//!     n_predict: 32,
//!     temp: 0.0, // greedy
//!     chat: true,
//!     ..GenerateOptions::default()
//! };
//! let mut gen = model.generate("What is the capital of France?", &opts)?;
//! for piece in &mut gen {
//!     print!("{}", piece?.text);
//!     std::io::stdout().flush()?;
//! }
//! let t = gen.timings();
//! eprintln!(
//!     "\nprompt {:.1} tok/s, decode {:.1} tok/s",
//!     t.prompt_tok_s(),
//!     t.decode_tok_s()
//! );
//! # Ok(())
//! # }
//! ```
//!
//! Two GPUs, layers split 3:1 (or one GPU twice: an adapter may repeat):
//!
//! ```no_run
//! use wginfer::backend::wgpu::AdapterChoice;
//! use wginfer::model::{LoadOptions, Model, SplitMode};
//!
//! # fn main() -> wginfer::Result<()> {
//! let model = Model::load(
//!     "models/SmolLM2-135M-Instruct.Q4_1.gguf",
//!     &LoadOptions {
//!         devices: vec![AdapterChoice::Index(0), AdapterChoice::Index(1)],
//!         split_mode: SplitMode::Layer,
//!         tensor_split: vec![3.0, 1.0],
//!         ..LoadOptions::default()
//!     },
//! )?;
//! println!("weights per device: {:?}", model.weight_bytes_per_backend());
//! # Ok(())
//! # }
//! ```
//!
//! Lower down, [`Model::eval`] gives the logits of a batch of tokens at
//! given positions, and [`llama_graph::build`] the graph itself.

mod chat;
mod config;
mod conversation;
mod devices;
mod eval;
mod generate;
mod kv_cache;
pub mod llama_graph;
mod load;
mod perplexity;
mod placement;
mod sampler;
pub mod synthetic;
mod weights;

pub use chat::{
    apply_chat, apply_chat_messages, chatml_user_turn, render_template, ChatFormat, Message,
};
pub use config::{
    Activation, BranchScales, Family, ModelConfig, RopeFactors, SUPPORTED_ARCHITECTURES,
};
pub use conversation::Conversation;
pub use devices::{BackendChoice, BackendInfo};
pub use eval::{Evaluator, PendingToken, StepTimes};
pub use generate::{GenerateOptions, Generation, Piece, StopReason, Timings};
pub use kv_cache::{KvCache, LayerCache};
pub use llama_graph::{Chain, FlashAttn, Pick};
pub use load::{LoadOptions, Model, Progress, DEFAULT_N_BATCH, DEFAULT_N_CTX};
pub use perplexity::Perplexity;
pub use placement::{GpuSplit, Home, LayerPlacement, SplitMode};
pub use sampler::{argmax, Sampler, SamplerOptions};
pub use weights::{Weight, WeightPart, Weights};
