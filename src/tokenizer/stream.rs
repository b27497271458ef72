//! Incremental decoding for generation: one id in, the finished text out.

use super::Tokenizer;

/// Decodes ids one at a time. Each [`StreamDecoder::push`] returns the text
/// that is complete so far: bytes of a UTF-8 character split across tokens
/// are held back until the rest arrives, so multi-byte characters print
/// whole. The concatenated output equals [`Tokenizer::decode_opts`] of all
/// the ids.
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    pending: Vec<u8>,
    first: bool,
    special: bool,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder that renders control tokens (as [`Tokenizer::decode`]).
    pub fn new(tok: &'a Tokenizer) -> StreamDecoder<'a> {
        StreamDecoder {
            tok,
            pending: Vec::new(),
            first: true,
            special: true,
        }
    }

    /// Whether control and unknown tokens are rendered (default true).
    pub fn with_special(mut self, special: bool) -> StreamDecoder<'a> {
        self.special = special;
        self
    }

    /// Adds `id` and returns the text completed by it (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        let piece = self.tok.render(id, self.first, self.special);
        self.first = false;
        self.pending.extend_from_slice(piece);
        self.drain(false)
    }

    /// The bytes still held back (an incomplete UTF-8 sequence).
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Ends the stream: held-back bytes come out as U+FFFD.
    pub fn finish(&mut self) -> String {
        self.drain(true)
    }

    /// Takes the valid UTF-8 from `pending`; invalid sequences become U+FFFD
    /// and an incomplete tail stays unless `flush`.
    fn drain(&mut self, flush: bool) -> String {
        let mut out = String::new();
        let mut pos = 0;
        while pos < self.pending.len() {
            let rest = &self.pending[pos..];
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    pos = self.pending.len();
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    if let Ok(s) = std::str::from_utf8(&rest[..good]) {
                        out.push_str(s);
                    }
                    pos += good;
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            pos += n;
                        }
                        None if flush => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            pos = self.pending.len();
                        }
                        None => break,
                    }
                }
            }
        }
        self.pending.drain(..pos);
        out
    }
}
