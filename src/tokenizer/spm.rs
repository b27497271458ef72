//! SentencePiece-style BPE (`llama` model): score-based merges with byte
//! fallback.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::Tokenizer;
use crate::{Error, Result};

/// A candidate merge of two adjacent symbols.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    left_len: usize,
    right_len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// The highest score first; of equal scores, the leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

impl Tokenizer {
    /// Tokenizes one fragment whose spaces are already `▁` (and prefixed).
    pub(super) fn spm_fragment(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
        for (start, c) in text.char_indices() {
            let i = syms.len();
            syms.push(Sym {
                start,
                len: c.len_utf8(),
                prev: if i == 0 { NONE } else { i - 1 },
                next: i + 1,
            });
        }
        if let Some(last) = syms.last_mut() {
            last.next = NONE;
        }
        let span = |s: &Sym| text.get(s.start..s.start + s.len).unwrap_or("");
        let mut heap = BinaryHeap::new();
        // A pair is a candidate when its concatenation is a vocabulary entry
        // (of any type, as in llama.cpp); its score is that entry's.
        let push = |heap: &mut BinaryHeap<Bigram>, syms: &[Sym], l: usize, r: usize| {
            if l == NONE || r == NONE {
                return;
            }
            let (a, b) = (&syms[l], &syms[r]);
            let joined = text.get(a.start..b.start + b.len).unwrap_or("");
            if let Some(&id) = self.ids.get(joined) {
                heap.push(Bigram {
                    score: self.scores[id as usize],
                    left: l,
                    right: r,
                    left_len: a.len,
                    right_len: b.len,
                });
            }
        };
        for i in 1..syms.len() {
            push(&mut heap, &syms, i - 1, i);
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (bg.left, bg.right);
            if syms[l].len != bg.left_len || syms[r].len != bg.right_len || bg.right_len == 0 {
                continue; // stale
            }
            let right = syms[r];
            syms[l].len += right.len;
            syms[l].next = right.next;
            syms[r].len = 0;
            if right.next != NONE {
                syms[right.next].prev = l;
            }
            let prev = syms[l].prev;
            push(&mut heap, &syms, prev, l);
            push(&mut heap, &syms, l, right.next);
        }
        for s in syms.iter().filter(|s| s.len > 0) {
            let t = span(s);
            match self.ids.get(t) {
                Some(&id) => out.push(id),
                None => {
                    for b in t.bytes() {
                        out.push(self.byte_token(b)?);
                    }
                }
            }
        }
        Ok(())
    }

    /// The token of a byte outside the vocabulary: `<0xXX>`, else the byte
    /// as a one-character text, else the unknown token.
    fn byte_token(&self, b: u8) -> Result<u32> {
        let hex = format!("<0x{b:02X}>");
        if let Some(&id) = self.ids.get(hex.as_str()) {
            return Ok(id);
        }
        if b.is_ascii() {
            if let Some(&id) = self.ids.get(char::from(b).to_string().as_str()) {
                return Ok(id);
            }
        }
        self.special.unk.ok_or_else(|| {
            Error::invalid(format!(
                "byte 0x{b:02X} has no token {hex} and the vocabulary has no unknown token"
            ))
        })
    }
}
