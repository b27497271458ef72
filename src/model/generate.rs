//! Text generation: the prompt in batches, then one token per step, streamed
//! as decoded text pieces, with llama.cpp-style timings.

use std::collections::VecDeque;
use std::time::Instant;

use super::chat::apply_chat;
use super::config::ModelConfig;
use super::eval::{Evaluator, PendingToken};
use super::kv_cache::KvCache;
use super::load::Model;
use super::sampler::{Sampler, SamplerOptions};
use super::weights::Weights;
use crate::tokenizer::{StreamDecoder, Tokenizer};
use crate::{Error, Result};

/// How to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Most tokens to generate (`usize::MAX`: until end of generation or of the context).
    pub n_predict: usize,
    /// Temperature; `<= 0` is greedy.
    pub temp: f32,
    /// Top-k (0: off).
    pub top_k: usize,
    /// Top-p (1: off).
    pub top_p: f32,
    /// Min-p (0: off).
    pub min_p: f32,
    /// Seed of the sampler.
    pub seed: u64,
    /// Wrap the prompt in the model's chat format as one user turn (ChatML).
    pub chat: bool,
    /// Keep generating past end-of-generation tokens (llama.cpp's
    /// `--ignore-eos`), for benchmarks.
    pub ignore_eos: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        let s = SamplerOptions::default();
        GenerateOptions {
            n_predict: 128,
            temp: s.temp,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            seed: s.seed,
            chat: false,
            ignore_eos: false,
        }
    }
}

impl GenerateOptions {
    /// The sampler part of the options.
    pub fn sampler(&self) -> SamplerOptions {
        SamplerOptions {
            temp: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            seed: self.seed,
        }
    }
}

/// Where time went, as llama.cpp's `llama_perf` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Loading the model (file, weights, context).
    pub load_ms: f64,
    /// Evaluating the prompt and sampling the first token.
    pub prompt_ms: f64,
    /// Prompt tokens evaluated.
    pub prompt_tokens: usize,
    /// Single-token evaluations and sampling after the prompt.
    pub decode_ms: f64,
    /// Single-token evaluations.
    pub decode_tokens: usize,
}

fn per_second(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1e3 / ms
    } else {
        0.0
    }
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prompt_tok_s(&self) -> f64 {
        per_second(self.prompt_tokens, self.prompt_ms)
    }

    /// Generated tokens per second after the first.
    pub fn decode_tok_s(&self) -> f64 {
        per_second(self.decode_tokens, self.decode_ms)
    }
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced this end-of-generation token (not yielded).
    EndOfGeneration(u32),
    /// `n_predict` tokens were generated.
    MaxTokens,
    /// The context is full.
    ContextFull,
    /// An evaluation failed (the error was yielded).
    Error,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::EndOfGeneration(id) => write!(f, "end of generation (token {id})"),
            StopReason::MaxTokens => f.write_str("n_predict reached"),
            StopReason::ContextFull => f.write_str("context full"),
            StopReason::Error => f.write_str("error"),
        }
    }
}

/// One step of a [`Generation`]: a token and the text it completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The generated token; `None` for the final flush of held-back bytes.
    pub token: Option<u32>,
    /// Text completed by this token (empty while a UTF-8 character is split).
    pub text: String,
}

/// A running generation: an iterator of [`Piece`]s; each `next` after the
/// first evaluates one token. The prompt was evaluated by [`Model::generate`].
pub struct Generation<'a> {
    config: &'a ModelConfig,
    weights: &'a Weights,
    kv: &'a KvCache,
    eval: &'a mut Evaluator,
    tokenizer: &'a Tokenizer,
    decoder: StreamDecoder<'a>,
    sampler: Sampler,
    n_predict: usize,
    prompt: Vec<u32>,
    tokens: Vec<u32>,
    n_past: usize,
    /// Sampled, not yet yielded.
    pending: Option<u32>,
    /// Yielded, not yet in the cache.
    to_eval: Option<u32>,
    /// Steps chained on the device (see [`Evaluator::submit_picked`]), each
    /// picking its token there: their tokens, oldest first, read back
    /// while later steps run.
    in_flight: Option<VecDeque<PendingToken>>,
    /// Chained decode steps submitted: step `j` evaluates generated token
    /// `j` at position `prompt + j`.
    submitted: usize,
    ignore_eos: bool,
    stop: Option<StopReason>,
    flushed: bool,
    timings: Timings,
}

impl Model {
    /// Tokenizes `prompt` (with `opts.chat`, as one ChatML user turn) and
    /// starts generating from it; see [`Model::generate_tokens`].
    pub fn generate(&mut self, prompt: &str, opts: &GenerateOptions) -> Result<Generation<'_>> {
        let text = if opts.chat {
            apply_chat(&self.tokenizer, prompt)?
        } else {
            prompt.to_string()
        };
        let tokens = self.tokenize(&text)?;
        self.generate_tokens(tokens, opts)
    }

    /// Evaluates `prompt` from the start of the context (earlier sequences
    /// are forgotten), samples the first token and returns the generation.
    /// A prompt that is empty or longer than the context is an error before
    /// anything is computed.
    pub fn generate_tokens(
        &mut self,
        prompt: Vec<u32>,
        opts: &GenerateOptions,
    ) -> Result<Generation<'_>> {
        self.generate_after(prompt, 0, opts)
    }

    /// Like [`Model::generate_tokens`] when the cache already holds the
    /// prompt's first `cached` tokens at positions `0..cached` (from an
    /// earlier generation of the same sequence, see
    /// [`Generation::cached_tokens`]): only the rest is evaluated. At least
    /// the last prompt token is, to give the first token's logits.
    pub fn generate_after(
        &mut self,
        prompt: Vec<u32>,
        cached: usize,
        opts: &GenerateOptions,
    ) -> Result<Generation<'_>> {
        let n_ctx = self.kv.n_ctx();
        if prompt.is_empty() {
            return Err(Error::invalid("the prompt has no tokens"));
        }
        let cached = cached.min(prompt.len() - 1);
        if prompt.len() > n_ctx {
            return Err(Error::invalid(format!(
                "the prompt has {} tokens, more than the {n_ctx}-token context",
                prompt.len()
            )));
        }
        let mut sampler = Sampler::new(opts.sampler())?;
        let start = Instant::now();
        let chained = self.eval.chain_pick(&sampler).is_some();
        let (c, w, kv) = (&self.config, &self.weights, &self.kv);
        let first = if chained {
            self.eval
                .submit_picked(c, w, kv, &prompt[cached..], cached, &mut sampler)?
                .wait()?
        } else {
            let logits = self.eval.eval(c, w, kv, &prompt[cached..], cached, false)?;
            sampler.sample(&logits)?
        };
        let timings = Timings {
            load_ms: self.load_ms(),
            prompt_ms: start.elapsed().as_secs_f64() * 1e3,
            prompt_tokens: prompt.len() - cached,
            ..Timings::default()
        };
        Ok(Generation {
            config: &self.config,
            weights: &self.weights,
            kv: &self.kv,
            eval: &mut self.eval,
            tokenizer: &self.tokenizer,
            decoder: self.tokenizer.stream_decoder(),
            sampler,
            n_predict: opts.n_predict,
            n_past: prompt.len(),
            prompt,
            tokens: Vec::new(),
            pending: Some(first),
            to_eval: None,
            in_flight: chained.then(VecDeque::new),
            submitted: 0,
            ignore_eos: opts.ignore_eos,
            stop: None,
            flushed: false,
            timings,
        })
    }
}

impl Generation<'_> {
    /// The prompt's tokens.
    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt
    }

    /// The tokens generated so far (without the end-of-generation token).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The generated text so far.
    pub fn text(&self) -> String {
        self.tokenizer.decode(&self.tokens)
    }

    /// The tokens whose keys and values the cache holds, at positions
    /// `0..`: the prompt and the generated tokens evaluated so far (the
    /// last one yielded is evaluated only when the next is asked for).
    pub fn cached_tokens(&self) -> Vec<u32> {
        let generated = self.n_past - self.prompt.len();
        [&self.prompt[..], &self.tokens[..generated]].concat()
    }

    /// Timings so far.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Why generation ended, once it has.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop
    }

    /// Puts the last yielded token into the cache and samples the next.
    fn advance(&mut self, token: u32) -> Result<()> {
        if self.tokens.len() >= self.n_predict {
            self.stop = Some(StopReason::MaxTokens);
            return Ok(());
        }
        if self.n_past >= self.kv.n_ctx() {
            self.stop = Some(StopReason::ContextFull);
            return Ok(());
        }
        let start = Instant::now();
        let logits = self.eval.eval(
            self.config,
            self.weights,
            self.kv,
            &[token],
            self.n_past,
            false,
        )?;
        self.n_past += 1;
        self.pending = Some(self.sampler.sample(&logits)?);
        self.timings.decode_ms += start.elapsed().as_secs_f64() * 1e3;
        self.timings.decode_tokens += 1;
        Ok(())
    }
}

/// Chained steps kept in flight: the host records and submits one while the
/// device runs the one before.
const PIPELINE_DEPTH: usize = 2;

impl Generation<'_> {
    /// Chained mode: submits steps until [`PIPELINE_DEPTH`] are in flight
    /// (none that could only give a token past `n_predict` or the context),
    /// then waits for the oldest one's token.
    fn advance_chained(&mut self) -> Result<()> {
        let start = Instant::now();
        let prompt = self.prompt.len();
        let Some(in_flight) = self.in_flight.as_mut() else {
            return Err(Error::invalid("generation is not chained"));
        };
        while in_flight.len() < PIPELINE_DEPTH
            && self.submitted + 1 < self.n_predict
            && prompt + self.submitted < self.kv.n_ctx()
        {
            let n_past = prompt + self.submitted;
            in_flight.push_back(self.eval.submit_chained(
                self.config,
                self.weights,
                self.kv,
                n_past,
                &mut self.sampler,
            )?);
            self.submitted += 1;
        }
        match in_flight.pop_front() {
            Some(token) => {
                self.pending = Some(token.wait()?);
                // Its step evaluated the last token yielded.
                self.n_past = prompt + self.tokens.len();
                self.timings.decode_tokens += 1;
            }
            None if prompt + self.submitted >= self.kv.n_ctx() => {
                self.stop = Some(StopReason::ContextFull)
            }
            None => self.stop = Some(StopReason::MaxTokens),
        }
        self.timings.decode_ms += start.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Piece>;

    fn next(&mut self) -> Option<Result<Piece>> {
        if self.stop.is_none() {
            let advanced = match (self.to_eval.take(), self.in_flight.is_some()) {
                (Some(_), true) => self.advance_chained(),
                (Some(t), false) => self.advance(t),
                (None, _) => Ok(()),
            };
            if let Err(e) = advanced {
                self.stop = Some(StopReason::Error);
                return Some(Err(e));
            }
        }
        if self.stop.is_none() {
            match self.pending.take() {
                Some(t) if self.tokenizer.is_eog(t) && !self.ignore_eos => {
                    self.stop = Some(StopReason::EndOfGeneration(t))
                }
                Some(_) if self.tokens.len() >= self.n_predict => {
                    self.stop = Some(StopReason::MaxTokens)
                }
                Some(t) => {
                    self.tokens.push(t);
                    self.to_eval = Some(t);
                    let text = self.decoder.push(t);
                    return Some(Ok(Piece {
                        token: Some(t),
                        text,
                    }));
                }
                None => self.stop = Some(StopReason::Error),
            }
        }
        if !self.flushed && self.stop != Some(StopReason::Error) {
            self.flushed = true;
            let text = self.decoder.finish();
            if !text.is_empty() {
                return Some(Ok(Piece { token: None, text }));
            }
        }
        None
    }
}
