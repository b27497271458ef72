//! Reading a tokenizer from `tokenizer.ggml.*` metadata.

use std::collections::{BTreeSet, HashMap};

use super::bpe::char_to_byte;
use super::pre::{PreTokenizer, Splitter};
use super::{SpecialTokens, TokenType, Tokenizer, TokenizerModel};
use crate::gguf::Gguf;
use crate::{Error, Result};

const MODEL: &str = "tokenizer.ggml.model";
const PRE: &str = "tokenizer.ggml.pre";
const TOKENS: &str = "tokenizer.ggml.tokens";
const SCORES: &str = "tokenizer.ggml.scores";
const TYPES: &str = "tokenizer.ggml.token_type";
const MERGES: &str = "tokenizer.ggml.merges";

/// Texts llama.cpp takes as end of turn when no `eot_token_id` is given, in
/// order of preference.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "<end_of_utterance>",
];

/// Texts of tokens that end generation (llama.cpp's list).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// An error about metadata `key`, at its offset in the file when present.
fn bad(g: &Gguf, key: &str, msg: impl std::fmt::Display) -> Error {
    Error::Gguf {
        offset: g.entry(key).map_or(0, |e| e.offset),
        msg: format!("metadata '{key}': {msg}"),
    }
}

/// An optional token id: absent or negative (some converters write -1) is
/// `None`, an id past the vocabulary keeps `default` with a warning (as
/// llama.cpp), anything but an integer is an error.
fn token_id(g: &Gguf, key: &str, n: usize, default: Option<u32>) -> Result<Option<u32>> {
    let Some(v) = g.get(key) else {
        return Ok(default);
    };
    let Some(i) = v.as_i64() else {
        return Err(bad(
            g,
            key,
            format!("expected a token id, found {}", v.type_description()),
        ));
    };
    match u32::try_from(i) {
        Ok(id) if (id as usize) < n => Ok(Some(id)),
        Ok(id) => {
            log::warn!("{key} = {id} is past the vocabulary ({n} tokens); ignored");
            Ok(default)
        }
        Err(_) => Ok(None),
    }
}

pub(super) fn load(g: &Gguf) -> Result<Tokenizer> {
    let model_name = g.get_str(MODEL)?;
    let model = match model_name {
        "gpt2" => TokenizerModel::Bpe,
        "llama" => TokenizerModel::Spm,
        other => {
            return Err(bad(
                g,
                MODEL,
                format!("unknown tokenizer model '{other}' (wginfer supports 'gpt2' and 'llama')"),
            ))
        }
    };
    let tokens = g.get_str_array(TOKENS)?;
    let n = tokens.len();
    if n == 0 {
        return Err(bad(g, TOKENS, "the vocabulary is empty"));
    }
    if n > i32::MAX as usize {
        return Err(bad(
            g,
            TOKENS,
            format!("{n} tokens is more than ids can hold"),
        ));
    }
    let scores = match g.opt_f32_array(SCORES)? {
        Some(s) if s.len() != n => {
            return Err(bad(g, SCORES, format!("{} scores for {n} tokens", s.len())))
        }
        Some(s) => s,
        None => vec![0.0; n],
    };
    let mut types = match g.opt_i64_array(TYPES)? {
        Some(t) if t.len() != n => {
            return Err(bad(
                g,
                TYPES,
                format!("{} token types for {n} tokens", t.len()),
            ))
        }
        Some(t) => t
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                TokenType::from_gguf(v)
                    .ok_or_else(|| bad(g, TYPES, format!("token {i} has type {v}, expected 0..=6")))
            })
            .collect::<Result<Vec<_>>>()?,
        None => vec![TokenType::Normal; n],
    };

    let mut texts = Vec::with_capacity(n);
    let mut ids = HashMap::with_capacity(n);
    for (i, t) in tokens.iter().enumerate() {
        let text = if t.is_empty() {
            log::warn!("{TOKENS}: token {i} is empty");
            format!("[EMPTY_{i}]")
        } else {
            t.clone()
        };
        ids.insert(text.clone(), i as u32); // a later duplicate wins, as in llama.cpp
        texts.push(text);
    }

    let mut merges = HashMap::new();
    if model == TokenizerModel::Bpe {
        let list = g
            .opt_str_array(MERGES)?
            .ok_or_else(|| bad(g, MERGES, "missing; a gpt2 tokenizer needs its merges"))?;
        for (rank, m) in list.iter().enumerate() {
            // Split at the first space after the first character.
            let split = m.char_indices().skip(1).find(|&(_, c)| c == ' ');
            let Some((at, _)) = split else {
                log::warn!("{MERGES}: merge {rank} '{m}' has no space; ignored");
                continue;
            };
            let key = format!("{} {}", &m[..at], &m[at + 1..]);
            merges.entry(key).or_insert(rank as u32); // the first one counts
        }
    }

    // Defaults by model, then the metadata.
    let (pre, pre_name, splitter) = match model {
        TokenizerModel::Bpe => {
            let name = g.opt_str(PRE)?;
            let pre = match name.and_then(PreTokenizer::from_name) {
                Some(p) => p,
                None => {
                    log::warn!("{PRE} = {name:?} is not a known pre-tokenizer; using the gpt2 one");
                    PreTokenizer::Gpt2
                }
            };
            (pre, name.map(str::to_owned), Some(Splitter::new(pre)?))
        }
        TokenizerModel::Spm => (
            PreTokenizer::Default,
            g.opt_str(PRE)?.map(str::to_owned),
            None,
        ),
    };
    let llama3 = pre_name.as_deref().is_some_and(PreTokenizer::llama3_flags);
    let ignore_merges = model == TokenizerModel::Bpe
        && pre_name
            .as_deref()
            .is_some_and(PreTokenizer::ignores_merges);
    let (d_bos, d_eos, d_unk) = match model {
        TokenizerModel::Spm => (Some(1), Some(2), Some(0)),
        TokenizerModel::Bpe => (Some(11), Some(11), None),
    };
    let fits = |d: Option<u32>| d.filter(|&i| (i as usize) < n);
    let mut special = SpecialTokens {
        bos: token_id(g, "tokenizer.ggml.bos_token_id", n, fits(d_bos))?,
        eos: token_id(g, "tokenizer.ggml.eos_token_id", n, fits(d_eos))?,
        eot: token_id(g, "tokenizer.ggml.eot_token_id", n, None)?,
        eom: token_id(g, "tokenizer.ggml.eom_token_id", n, None)?,
        unk: token_id(g, "tokenizer.ggml.unknown_token_id", n, fits(d_unk))?,
        sep: token_id(g, "tokenizer.ggml.seperator_token_id", n, None)?,
        pad: token_id(g, "tokenizer.ggml.padding_token_id", n, None)?,
        mask: token_id(g, "tokenizer.ggml.mask_token_id", n, None)?,
    };
    let spm = model == TokenizerModel::Spm;
    let add_bos = g
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(spm || llama3);
    let add_eos = g.opt_bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false);
    let add_space_prefix = g
        .opt_bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(spm);

    // End of turn and of generation, found by text where metadata is silent;
    // such tokens are control tokens whatever their declared type.
    let make_control = |id: u32, types: &mut [TokenType]| {
        let t = &mut types[id as usize];
        if *t != TokenType::Control {
            log::warn!(
                "token {id} '{}' ends generation but is not a control token; treating it as one",
                texts[id as usize]
            );
            *t = TokenType::Control;
        }
    };
    if special.eot.is_none() {
        special.eot = EOT_TEXTS.iter().find_map(|t| ids.get(*t).copied());
        if let Some(id) = special.eot {
            make_control(id, &mut types);
        }
    }
    if special.eom.is_none() {
        special.eom = ids.get("<|eom_id|>").copied();
        if let Some(id) = special.eom {
            make_control(id, &mut types);
        }
    }
    let mut eog = BTreeSet::new();
    for t in EOG_TEXTS {
        if let Some(&id) = ids.get(*t) {
            eog.insert(id);
            make_control(id, &mut types);
        }
    }
    eog.extend(
        [special.eos, special.eot, special.eom]
            .into_iter()
            .flatten(),
    );
    // gpt-oss: with <|return|> and <|call|>, <|end|> does not end generation.
    if ["<|return|>", "<|call|>"]
        .iter()
        .all(|t| ids.contains_key(*t))
    {
        if let Some(&end) = ids.get("<|end|>") {
            if eog.remove(&end) {
                types[end as usize] = TokenType::UserDefined;
            }
        }
    }

    let mut special_cache: Vec<u32> = (0..n as u32)
        .filter(|&i| {
            matches!(
                types[i as usize],
                TokenType::Control | TokenType::UserDefined | TokenType::Unknown
            )
        })
        .collect();
    special_cache.sort_by_key(|&i| std::cmp::Reverse(texts[i as usize].len()));

    let mut pieces = Vec::with_capacity(n);
    for (i, (text, &ty)) in texts.iter().zip(&types).enumerate() {
        pieces.push(match (ty, model) {
            (TokenType::Control | TokenType::Unknown | TokenType::UserDefined, _) => {
                text.as_bytes().to_vec()
            }
            (TokenType::Normal, TokenizerModel::Bpe) => bpe_piece(text),
            (TokenType::Normal, TokenizerModel::Spm) => text.replace('\u{2581}', " ").into_bytes(),
            (TokenType::Byte, TokenizerModel::Spm) => vec![parse_byte(text).ok_or_else(|| {
                bad(
                    g,
                    TOKENS,
                    format!("byte token {i} is '{text}', expected <0xXX>"),
                )
            })?],
            _ => Vec::new(),
        });
    }

    Ok(Tokenizer {
        model,
        pre,
        pre_name,
        splitter,
        texts,
        types,
        scores,
        ids,
        merges,
        pieces,
        special,
        eog,
        special_cache,
        add_bos,
        add_eos,
        add_space_prefix,
        ignore_merges,
        chat_template: g.opt_str("tokenizer.chat_template")?.map(str::to_owned),
    })
}

/// A byte-level token's bytes; characters outside the byte table (some
/// vocabularies have a few) pass through as their UTF-8.
fn bpe_piece(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// The byte of `<0xXX>`.
fn parse_byte(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}
