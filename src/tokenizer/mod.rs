//! Tokenizers of GGUF models, id for id the same as llama.cpp's.
//!
//! [`Tokenizer::from_gguf`] reads the `tokenizer.ggml.*` metadata of a model
//! file: the vocabulary, the token types, the scores (SentencePiece) or the
//! merges (BPE), the special token ids and the flags that say whether a BOS
//! token or a space prefix is added. Two models are supported:
//!
//! - `gpt2`: byte-level BPE. Text is split by the pre-tokenizer regexes named
//!   by `tokenizer.ggml.pre` ([`PreTokenizer`]), each piece's bytes are mapped
//!   to printable characters (GPT-2's byte-to-unicode table) and merged by
//!   rank.
//! - `llama`: SentencePiece-style BPE. Spaces become `▁`, a space is prefixed
//!   (`tokenizer.ggml.add_space_prefix`), adjacent pieces are merged by the
//!   highest score, and characters outside the vocabulary fall back to the
//!   byte tokens `<0xXX>`.
//!
//! With `parse_special`, the text of control tokens (`<|im_start|>`, `<s>`)
//! becomes their single ids, matched longest-first before anything else is
//! tokenized; user-defined tokens are matched that way even without it.
//!
//! ```no_run
//! # fn main() -> wginfer::Result<()> {
//! use wginfer::gguf::GgufFile;
//! use wginfer::tokenizer::Tokenizer;
//!
//! let file = GgufFile::open("models/SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let tok = Tokenizer::from_gguf(&file)?;
//! let ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n", true)?;
//! assert_eq!(tok.decode(&ids), "<|im_start|>user\nHi<|im_end|>\n");
//!
//! let mut stream = tok.stream_decoder();
//! for &id in &ids {
//!     print!("{}", stream.push(id));
//! }
//! print!("{}", stream.finish());
//! # Ok(())
//! # }
//! ```

mod bpe;
mod encode;
mod load;
mod pre;
mod spm;
mod stream;

use std::collections::{BTreeSet, HashMap};

pub use bpe::{byte_to_char, char_to_byte};
pub use pre::PreTokenizer;
pub use stream::StreamDecoder;

use crate::Result;

/// The type of a token (`tokenizer.ggml.token_type`, llama.cpp's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// 0: no type given.
    Undefined,
    /// 1: an ordinary piece of text.
    Normal,
    /// 2: the unknown token (`<unk>`).
    Unknown,
    /// 3: a control token (`<s>`, `<|im_start|>`): not text.
    Control,
    /// 4: a user-defined token, always matched as a whole in the text.
    UserDefined,
    /// 5: an unused slot.
    Unused,
    /// 6: a byte token `<0xXX>` (SentencePiece byte fallback).
    Byte,
}

impl TokenType {
    /// The type with GGUF number `v`, `None` outside `0..=6`.
    pub fn from_gguf(v: i64) -> Option<TokenType> {
        Some(match v {
            0 => TokenType::Undefined,
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }

    /// Control and unknown tokens: parsed from text only with
    /// `parse_special`, rendered by decoding only when asked to.
    pub fn is_special(self) -> bool {
        matches!(self, TokenType::Control | TokenType::Unknown)
    }
}

/// Which algorithm turns text into ids (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerModel {
    /// `gpt2`: byte-level BPE with ranked merges.
    Bpe,
    /// `llama`: SentencePiece-style BPE with scores and byte fallback.
    Spm,
}

/// The special token ids of a vocabulary; `None` where the model has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn (`<|im_end|>`, `<|eot_id|>`, ...).
    pub eot: Option<u32>,
    /// End of message (`<|eom_id|>`).
    pub eom: Option<u32>,
    /// Unknown.
    pub unk: Option<u32>,
    /// Separator.
    pub sep: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
    /// Mask.
    pub mask: Option<u32>,
}

/// A model's tokenizer: vocabulary, merges or scores, special tokens.
pub struct Tokenizer {
    model: TokenizerModel,
    pre: PreTokenizer,
    pre_name: Option<String>,
    splitter: Option<pre::Splitter>,
    texts: Vec<String>,
    types: Vec<TokenType>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    /// `"left right"` → rank (BPE only).
    merges: HashMap<String, u32>,
    /// Each token's bytes as decoding renders them (special tokens as text).
    pieces: Vec<Vec<u8>>,
    special: SpecialTokens,
    eog: BTreeSet<u32>,
    /// Control, user-defined and unknown tokens, longest text first.
    special_cache: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    ignore_merges: bool,
    chat_template: Option<String>,
}

impl std::fmt::Debug for Tokenizer {
    /// A summary: the vocabulary itself is left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("model", &self.model)
            .field("pre", &self.pre)
            .field("n_vocab", &self.texts.len())
            .field("n_merges", &self.merges.len())
            .field("special", &self.special)
            .field("eog", &self.eog)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("add_space_prefix", &self.add_space_prefix)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Reads the tokenizer of a GGUF file. Fails with a message naming the
    /// key when metadata is missing, has the wrong type or length, or names
    /// a tokenizer model other than `gpt2` and `llama`.
    pub fn from_gguf(g: &crate::gguf::Gguf) -> Result<Tokenizer> {
        load::load(g)
    }

    /// The tokenizer model.
    pub fn model(&self) -> TokenizerModel {
        self.model
    }

    /// The pre-tokenizer in use (BPE only; SentencePiece has none).
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// `tokenizer.ggml.pre` as the file has it.
    pub fn pre_name(&self) -> Option<&str> {
        self.pre_name.as_deref()
    }

    /// The number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.texts.len()
    }

    /// The special token ids.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The BOS id, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.special.bos
    }

    /// The EOS id, if the model has one.
    pub fn eos(&self) -> Option<u32> {
        self.special.eos
    }

    /// The end-of-turn id, from metadata or found by its text.
    pub fn eot(&self) -> Option<u32> {
        self.special.eot
    }

    /// The unknown-token id, if the model has one.
    pub fn unk(&self) -> Option<u32> {
        self.special.unk
    }

    /// The padding id, if the model has one.
    pub fn pad(&self) -> Option<u32> {
        self.special.pad
    }

    /// Whether `id` ends generation: EOS, EOT, EOM and the tokens llama.cpp
    /// recognises by text (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// All end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.eog.iter().copied()
    }

    /// Whether [`Tokenizer::encode_with_bos`] prepends BOS
    /// (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether [`Tokenizer::encode_with_bos`] appends EOS
    /// (`tokenizer.ggml.add_eos_token`).
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether SentencePiece text gets a leading space, and decoding drops
    /// it again (`tokenizer.ggml.add_space_prefix`).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    /// `tokenizer.chat_template`, if the file has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// The vocabulary text of `id` (byte-mapped for BPE, `▁` for spaces in
    /// SentencePiece).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// The type of `id`.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The score of `id` (0 where the file has no scores).
    pub fn token_score(&self, id: u32) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    /// The id whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// The bytes `id` stands for: decoded text for normal tokens, the byte of
    /// a byte token, the text itself for control, unknown and user-defined
    /// tokens, nothing for unused ones. `None` for an id past the vocabulary.
    pub fn token_to_piece(&self, id: u32) -> Option<&[u8]> {
        self.pieces.get(id as usize).map(Vec::as_slice)
    }

    /// The ids' text, control tokens included (llama.cpp's detokenize with
    /// `unparse_special`). Ids past the vocabulary are skipped; bytes that
    /// are not UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.decode_opts(ids, true)
    }

    /// [`Tokenizer::decode`]; `special: false` leaves out control and unknown
    /// tokens.
    pub fn decode_opts(&self, ids: &[u32], special: bool) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, special)).into_owned()
    }

    /// The raw bytes of [`Tokenizer::decode_opts`].
    pub fn decode_bytes(&self, ids: &[u32], special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            out.extend_from_slice(self.render(id, i == 0, special));
        }
        out
    }

    /// A decoder that takes ids one at a time ([`StreamDecoder`]).
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }

    /// The piece of `id` in decoded text: empty for special tokens unless
    /// `special`, and without its leading space when it is the first token
    /// of a space-prefixed (SentencePiece) text.
    fn render(&self, id: u32, first: bool, special: bool) -> &[u8] {
        let Some(piece) = self.pieces.get(id as usize) else {
            return &[];
        };
        if !special && self.types[id as usize].is_special() {
            return &[];
        }
        match piece.as_slice() {
            [b' ', rest @ ..] if first && self.add_space_prefix => rest,
            p => p,
        }
    }
}
