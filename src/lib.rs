//! wginfer: LLM inference and general tensor graphs on any GPU through `wgpu`.
//!
//! The crate is a port of llama.cpp's Kompute (Vulkan) backend: a ggml-style
//! tensor [`graph`], a [`backend`] trait with a CPU reference implementation,
//! ggml's block-[`quant`] formats, [`gguf`] model files, a [`tokenizer`] and
//! llama-family text generation ([`model`]).
//!
//! # Load a model and generate
//!
//! [`model::Model::load`] reads a GGUF file, opens a backend (a wgpu adapter
//! when one opens, else the CPU: [`model::BackendChoice`]) and uploads the
//! weights; [`model::Model::generate`] streams text pieces as they are
//! decoded.
//!
//! ```no_run
//! use wginfer::model::{GenerateOptions, LoadOptions, Model};
//!
//! # fn main() -> wginfer::Result<()> {
//! let mut model = Model::load("models/SmolLM2-135M-Instruct.Q4_1.gguf", &LoadOptions::default())?;
//! let opts = GenerateOptions { n_predict: 32, chat: true, ..GenerateOptions::default() };
//! for piece in model.generate("What is the capital of France?", &opts)? {
//!     print!("{}", piece?.text);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Run a graph on a backend
//!
//! A [`graph::Graph`] is a list of ggml-style ops with checked builders. A
//! [`backend::Backend`] (the CPU reference [`backend::cpu::CpuBackend`], or
//! [`backend::wgpu::WgpuBackend`] on any wgpu adapter) allocates its tensors,
//! moves values in and out ([`backend::TensorIo`]) and computes it; the
//! [`sched::Scheduler`] spreads one graph over several backends.
//!
//! ```
//! use wginfer::backend::{cpu::CpuBackend, Backend, TensorIo};
//! use wginfer::{graph::Graph, DType};
//!
//! # fn main() -> wginfer::Result<()> {
//! let mut g = Graph::new();
//! let w = g.input("w", DType::F16, &[32, 2])?; // 2 rows of 32 weights
//! let x = g.input("x", DType::F32, &[32])?;
//! let y = g.mul_mat(w, x)?; // [2]
//! g.set_output(y)?;
//! let cpu = CpuBackend::new();
//! cpu.allocate_graph(&mut g)?;
//! cpu.write_f32(&g, w, &[0.5; 64])?; // converted (or quantized) on write
//! cpu.write_f32(&g, x, &[1.0; 32])?;
//! cpu.compute(&g, &g.compute_order())?;
//! assert_eq!(cpu.read_f32(&g, y)?, vec![16.0, 16.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Layers, each depending only on those before it: [`gguf`] files, [`model`]
//! (weights, graph builders, sampling), [`graph`], [`sched`], [`backend`]
//! and its kernels; [`buffer`] handles are shared by the graph and backends.
#![warn(missing_docs)]

pub mod backend;
pub mod buffer;
pub mod dtype;
pub mod error;
pub mod gguf;
pub mod graph;
pub mod model;
pub mod parity;
pub mod quant;
pub mod rng;
pub mod sched;
pub mod tensor;
pub mod tokenizer;

pub use dtype::DType;
pub use error::{Error, Result};

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
