//! GPT-2 byte-level BPE: the byte-to-unicode table and rank-based merging.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Tokenizer;
use crate::Result;

/// Whether GPT-2 maps byte `b` to the character with the same number: the
/// printable bytes `!`..=`~`, `¡`..=`¬` and `®`..=`ÿ`.
const fn keeps(b: usize) -> bool {
    (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174
}

/// Byte → code point. The other 68 bytes (controls, space, DEL, NBSP, soft
/// hyphen...) get U+0100, U+0101, ... in byte order.
const BYTE_TO_CP: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut b = 0;
    let mut n = 0;
    while b < 256 {
        if keeps(b) {
            t[b] = b as u32;
        } else {
            t[b] = 256 + n;
            n += 1;
        }
        b += 1;
    }
    t
};

/// U+0100 + i → byte, for the 68 remapped bytes.
const SHIFTED_TO_BYTE: [u8; 68] = {
    let mut t = [0u8; 68];
    let mut b = 0;
    let mut n = 0;
    while b < 256 {
        if !keeps(b) {
            t[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    t
};

/// The character GPT-2's byte-level BPE writes for byte `b` (`' '` → `Ġ`,
/// `'\n'` → `Ċ`).
pub fn byte_to_char(b: u8) -> char {
    char::from_u32(BYTE_TO_CP[b as usize]).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The byte a byte-level character stands for; `None` for characters outside
/// the table.
pub fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if cp < 256 && keeps(cp as usize) {
        Some(cp as u8)
    } else if (256..256 + 68).contains(&cp) {
        SHIFTED_TO_BYTE.get((cp - 256) as usize).copied()
    } else {
        None
    }
}

/// One symbol of a word being merged: a byte range of the mapped word.
#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

/// No neighbour.
const NONE: usize = usize::MAX;

impl Tokenizer {
    /// Tokenizes a raw text fragment: pre-tokenizer split, byte mapping,
    /// merges, vocabulary lookup.
    pub(super) fn bpe_fragment(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let Some(splitter) = &self.splitter else {
            return Ok(());
        };
        let mut word = String::new();
        let mut key = String::new();
        for piece in splitter.split(text)? {
            word.clear();
            word.extend(piece.bytes().map(byte_to_char));
            self.bpe_word(&word, &mut key, out);
        }
        Ok(())
    }

    /// The merge rank of the pair `left right`.
    fn rank(&self, key: &mut String, left: &str, right: &str) -> Option<u32> {
        key.clear();
        key.push_str(left);
        key.push(' ');
        key.push_str(right);
        self.merges.get(key.as_str()).copied()
    }

    /// Merges one byte-mapped word: always the lowest-ranked adjacent pair,
    /// the leftmost of equal ranks, then looks the symbols up.
    fn bpe_word(&self, word: &str, key: &mut String, out: &mut Vec<u32>) {
        if self.ignore_merges {
            if let Some(&id) = self.ids.get(word) {
                out.push(id);
                return;
            }
        }
        let mut syms: Vec<Sym> = Vec::with_capacity(word.len());
        for (start, c) in word.char_indices() {
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
        let text = |s: &Sym| word.get(s.start..s.start + s.len).unwrap_or("");
        // (rank, left, right, left len, right len), smallest first.
        let mut heap = BinaryHeap::new();
        let mut push = |heap: &mut BinaryHeap<_>, syms: &[Sym], l: usize, r: usize| {
            if l == NONE || r == NONE {
                return;
            }
            let (a, b) = (&syms[l], &syms[r]);
            if let Some(rank) = self.rank(key, text(a), text(b)) {
                heap.push(Reverse((rank, l, r, a.len, b.len)));
            }
        };
        for i in 1..syms.len() {
            push(&mut heap, &syms, i - 1, i);
        }
        while let Some(Reverse((_, l, r, llen, rlen))) = heap.pop() {
            if syms[l].len != llen || syms[r].len != rlen || llen == 0 || rlen == 0 {
                continue; // stale: one side was merged since
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
            let t = text(s);
            if let Some(&id) = self.ids.get(t) {
                out.push(id);
            } else {
                // Not in the vocabulary: llama.cpp looks up each byte on its
                // own and drops those it cannot find.
                let mut buf = [0; 4];
                for b in t.bytes().filter(u8::is_ascii) {
                    let one: &str = char::from(b).encode_utf8(&mut buf);
                    if let Some(&id) = self.ids.get(one) {
                        out.push(id);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_is_gpt2s() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'\t'), 'ĉ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0), '\u{100}');
        assert_eq!(byte_to_char(0x7f), '\u{121}');
        assert_eq!(byte_to_char(0xad), '\u{143}');
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_to_char(b);
            assert!(seen.insert(c));
            assert_eq!(char_to_byte(c), Some(b));
        }
        assert_eq!(char_to_byte('\u{144}'), None);
        assert_eq!(char_to_byte('中'), None);
    }
}
