//! Small synthetic vocabularies written as GGUF metadata (tests only).

use wginfer::gguf::{Gguf, GgufWriter, Value};
use wginfer::tokenizer::{byte_to_char, Tokenizer};
use wginfer::Result;

/// Parses the metadata of `w` as a GGUF file.
pub fn gguf(w: &mut GgufWriter) -> Gguf {
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).expect("write");
    Gguf::parse(&bytes).expect("parse")
}

pub fn tokenizer(w: &mut GgufWriter) -> Result<Tokenizer> {
    Tokenizer::from_gguf(&gguf(w))
}

/// The SentencePiece test vocabulary:
///
/// | ids | tokens |
/// | --- | --- |
/// | 0, 1, 2 | `<unk>` (unknown), `<s>`, `</s>` (control) |
/// | 3..=258 | `<0x00>`..`<0xFF>` (byte; id = 3 + byte), only `with_bytes` |
/// | then | normal pieces with the scores of [`SPM_PIECES`], then `<tool>` (user-defined) |
pub fn spm(with_bytes: bool) -> GgufWriter<'static> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut scores = vec![0.0f32; 3];
    let mut types = vec![2i32, 3, 3];
    if with_bytes {
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            scores.push(0.0);
            types.push(6);
        }
    }
    for (t, s) in SPM_PIECES {
        tokens.push(t.to_string());
        scores.push(*s);
        types.push(1);
    }
    tokens.push("<tool>".into());
    scores.push(0.0);
    types.push(4);
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", "llama")
        .add("tokenizer.ggml.tokens", tokens)
        .add("tokenizer.ggml.scores", scores)
        .add("tokenizer.ggml.token_type", types);
    w
}

/// Normal SentencePiece pieces and scores: higher scores merge first.
pub const SPM_PIECES: &[(&str, f32)] = &[
    ("\u{2581}", -10.0),     // 259
    ("h", -10.0),            // 260
    ("e", -10.0),            // 261
    ("l", -10.0),            // 262
    ("o", -10.0),            // 263
    ("w", -10.0),            // 264
    ("r", -10.0),            // 265
    ("d", -10.0),            // 266
    ("ll", -1.0),            // 267
    ("he", -2.0),            // 268
    ("hell", -3.0),          // 269
    ("hello", -4.0),         // 270
    ("\u{2581}hello", -5.0), // 271
    ("\u{2581}w", -6.0),     // 272
    ("or", -1.5),            // 273
    ("\u{2581}wor", -7.0),   // 274
];

/// A byte-level BPE vocabulary: the 256 byte characters (id = byte), then
/// `he ll hell Ġw hello el` and the control token `<|end|>`; merges ranked
/// `h e`, `l l`, `he ll`, `Ġ w`, `hell o`, `e l`.
pub fn bpe() -> GgufWriter<'static> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    let mut types = vec![1i32; 256];
    for t in ["he", "ll", "hell", "\u{120}w", "hello", "el", "<|end|>"] {
        tokens.push(t.into());
        types.push(if t == "<|end|>" { 3 } else { 1 });
    }
    let merges: Vec<String> = ["h e", "l l", "he ll", "\u{120} w", "hell o", "e l"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", "gpt2")
        .add("tokenizer.ggml.pre", "gpt-2")
        .add("tokenizer.ggml.tokens", tokens)
        .add("tokenizer.ggml.token_type", types)
        .add("tokenizer.ggml.merges", merges)
        .add("tokenizer.ggml.eos_token_id", Value::U32(262));
    w
}
