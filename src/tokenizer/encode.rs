//! Encoding: special-token partition, then BPE or SentencePiece per fragment.

use super::{Tokenizer, TokenizerModel};
use crate::{Error, Result};

/// A stretch of the input: raw text (a byte range) or a special token.
#[derive(Clone, Copy, Debug)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

impl Tokenizer {
    /// Tokenizes `text`, without BOS/EOS. With `parse_special`, the text of
    /// control tokens becomes their ids; without, it is tokenized as text.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>> {
        self.encode_opts(text, false, parse_special)
    }

    /// [`Tokenizer::encode`], with BOS first where the model adds it
    /// ([`Tokenizer::add_bos`]) and EOS last where it adds that
    /// ([`Tokenizer::add_eos`]), as llama.cpp's `add_special`.
    pub fn encode_with_bos(&self, text: &str, parse_special: bool) -> Result<Vec<u32>> {
        self.encode_opts(text, true, parse_special)
    }

    /// llama.cpp's `tokenize(text, add_special, parse_special)`.
    pub fn encode_opts(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.push(self.special.bos.ok_or_else(|| {
                Error::invalid("the model asks for a BOS token but has no BOS id")
            })?);
        }
        // SentencePiece prefixes a space at the start and after each special token.
        let mut prev_special = true;
        for frag in self.partition(text, parse_special) {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(a, b) => {
                    let raw = text.get(a..b).unwrap_or("");
                    match self.model {
                        TokenizerModel::Bpe => self.bpe_fragment(raw, &mut out)?,
                        TokenizerModel::Spm => {
                            let mut s = String::with_capacity(raw.len() + 4);
                            if self.add_space_prefix && prev_special {
                                s.push(' ');
                            }
                            s.push_str(raw);
                            self.spm_fragment(&s.replace(' ', "\u{2581}"), &mut out)?;
                        }
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.push(self.special.eos.ok_or_else(|| {
                Error::invalid("the model asks for an EOS token but has no EOS id")
            })?);
        }
        Ok(out)
    }

    /// Splits `text` at special tokens, longest first, as llama.cpp does:
    /// each token in turn splits every remaining text fragment at all of its
    /// occurrences. Control and unknown tokens count only with
    /// `parse_special`; user-defined tokens always.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut frags = Vec::new();
        if !text.is_empty() {
            frags.push(Fragment::Text(0, text.len()));
        }
        for &id in &self.special_cache {
            let ty = self.types[id as usize];
            if !parse_special && ty.is_special() {
                continue;
            }
            let pat = self.texts[id as usize].as_str();
            let hit = frags.iter().any(|f| match *f {
                Fragment::Text(a, b) => text.get(a..b).is_some_and(|s| s.contains(pat)),
                Fragment::Token(_) => false,
            });
            if !hit {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(a, b) = f else {
                    next.push(f);
                    continue;
                };
                let mut pos = a;
                while let Some(i) = text.get(pos..b).and_then(|s| s.find(pat)) {
                    if i > 0 {
                        next.push(Fragment::Text(pos, pos + i));
                    }
                    next.push(Fragment::Token(id));
                    pos += i + pat.len();
                }
                if pos < b {
                    next.push(Fragment::Text(pos, b));
                }
            }
            frags = next;
        }
        frags
    }
}
