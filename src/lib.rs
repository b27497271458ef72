//! wginfer: LLM inference and general tensor graphs on any GPU through `wgpu`.
//!
//! The crate is a port of llama.cpp's Kompute (Vulkan) backend: a ggml-style
//! tensor [`graph`], a [`backend`] trait with a CPU reference implementation,
//! ggml's block-[`quant`] formats, [`gguf`] model files, a [`tokenizer`] and
//! llama-family text generation ([`model`]).
#![warn(missing_docs)]

pub mod backend;
pub mod dtype;
pub mod error;
pub mod gguf;
pub mod graph;
pub mod model;
pub mod parity;
pub mod quant;
pub mod sched;
pub mod tensor;
pub mod tokenizer;

pub use dtype::DType;
pub use error::{Error, Result};

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
