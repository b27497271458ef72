//! The tokenizer: llama.cpp's ids for every reference text on the default
//! model, round trips, streaming decoding, SentencePiece and BPE on small
//! synthetic vocabularies, and errors for bad metadata.

mod fixtures;
#[path = "tokenizer_support/vocab.rs"]
mod vocab;

use wginfer::gguf::{GgufFile, GgufWriter, Value};
use wginfer::tokenizer::{PreTokenizer, TokenType, Tokenizer, TokenizerModel};
use wginfer::Error;

/// The default model's tokenizer (the model is fetched when missing).
fn default_tokenizer() -> Tokenizer {
    let file = GgufFile::open(fixtures::default_model()).expect("open the default model");
    Tokenizer::from_gguf(&file).expect("load its tokenizer")
}

/// `(text, parse_special, ids)` of llama.cpp's tokenize.json.
fn reference_cases() -> Vec<(String, bool, Vec<u32>)> {
    let all = fixtures::reference_json("tokenize.json");
    let cases: Vec<_> = all
        .as_arr()
        .expect("an array")
        .iter()
        .map(|e| {
            (
                e.get("text")
                    .and_then(|v| v.as_str())
                    .expect("text")
                    .to_string(),
                e.get("parse_special")
                    .and_then(|v| v.as_bool())
                    .expect("parse_special"),
                e.get("ids").and_then(|v| v.as_ids()).expect("ids"),
            )
        })
        .collect();
    assert!(cases.len() >= 18, "only {} reference cases", cases.len());
    cases
}

#[test]
fn default_model_metadata() {
    let tok = default_tokenizer();
    assert_eq!(tok.model(), TokenizerModel::Bpe);
    assert_eq!(tok.pre_name(), Some("smollm"));
    assert_eq!(tok.pre_tokenizer(), PreTokenizer::Starcoder);
    assert_eq!(tok.n_vocab(), 49152);
    let s = tok.special_tokens();
    assert_eq!(
        (s.bos, s.eos, s.unk, s.pad),
        (Some(1), Some(2), Some(0), Some(2))
    );
    assert_eq!(tok.eot(), Some(2), "<|im_end|> is the end of turn");
    assert!(tok.is_eog(2) && tok.is_eog(0) && !tok.is_eog(1));
    assert!(!tok.add_bos() && !tok.add_eos() && !tok.add_space_prefix());
    assert_eq!(tok.token_type(1), Some(TokenType::Control));
    assert_eq!(tok.token_text(1), Some("<|im_start|>"));
    assert_eq!(tok.token_id("<|im_end|>"), Some(2));
    assert!(tok
        .chat_template()
        .is_some_and(|t| t.contains("<|im_start|>")));
    assert_eq!(tok.token_to_piece(216), Some(&b" "[..]));
    assert_eq!(tok.token_to_piece(49152), None);
}

#[test]
fn encodes_every_reference_text_like_llama_cpp() {
    let tok = default_tokenizer();
    let cases = reference_cases();
    let mut bad = Vec::new();
    for (text, parse_special, want) in &cases {
        let got = tok.encode(text, *parse_special).unwrap();
        if &got != want {
            bad.push(format!(
                "{text:?} (parse_special {parse_special}):\n  got  {got:?}\n  want {want:?}"
            ));
        }
        // No BOS for this model.
        assert_eq!(&tok.encode_with_bos(text, *parse_special).unwrap(), want);
    }
    eprintln!(
        "{} of {} reference entries match",
        cases.len() - bad.len(),
        cases.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn decode_inverts_encode() {
    let tok = default_tokenizer();
    for (text, parse_special, ids) in reference_cases() {
        assert_eq!(tok.decode(&ids), text, "parse_special {parse_special}");
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&i| tok.token_to_piece(i).unwrap().to_vec())
            .collect();
        assert_eq!(bytes, text.as_bytes());
    }
    let ids = tok
        .encode("<|im_start|>user\nHi<|im_end|>\n", true)
        .unwrap();
    assert_eq!(tok.decode_opts(&ids, false), "user\nHi\n");
}

#[test]
fn greedy_reference_prompts_pieces_and_text() {
    let tok = default_tokenizer();
    let greedy = fixtures::reference_json("greedy.json");
    for r in greedy
        .get("results")
        .and_then(|v| v.as_arr())
        .expect("results")
    {
        let prompt = r.get("prompt").and_then(|v| v.as_str()).expect("prompt");
        let want = r
            .get("prompt_ids")
            .and_then(|v| v.as_ids())
            .expect("prompt_ids");
        assert_eq!(
            tok.encode_with_bos(prompt, true).unwrap(),
            want,
            "{prompt:?}"
        );
        let gen = r
            .get("generated_ids")
            .and_then(|v| v.as_ids())
            .expect("generated_ids");
        let hex = r
            .get("generated_pieces_hex")
            .and_then(|v| v.as_arr())
            .expect("hex");
        for (&id, h) in gen.iter().zip(hex) {
            let piece: String = tok
                .token_to_piece(id)
                .unwrap()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(piece, h.as_str().unwrap(), "piece of {id}");
        }
        let text = r
            .get("generated_text")
            .and_then(|v| v.as_str())
            .expect("text");
        assert_eq!(tok.decode(&gen), text);
        let first_eog = gen.iter().position(|&i| tok.is_eog(i));
        let want_eog = r
            .get("first_eog_index")
            .and_then(|v| v.as_f64())
            .map(|x| x as usize);
        assert_eq!(first_eog, want_eog, "first end-of-generation token");
    }
}

#[test]
fn stream_decoder_holds_back_split_characters() {
    let tok = default_tokenizer();
    let text = "Chinese 中文测试, emoji 🦀👍🏽 and é.";
    let ids = tok.encode(text, false).unwrap();
    let mut stream = tok.stream_decoder();
    let mut out = String::new();
    for &id in &ids {
        let s = stream.push(id);
        assert!(!s.contains('\u{FFFD}'), "a broken character in {s:?}");
        out.push_str(&s);
    }
    out.push_str(&stream.finish());
    assert_eq!(out, text);

    // Byte by byte: the byte-level vocabulary has a token for every byte.
    let ids: Vec<u32> = text
        .bytes()
        .map(|b| {
            tok.token_id(&wginfer::tokenizer::byte_to_char(b).to_string())
                .unwrap()
        })
        .collect();
    assert_eq!(tok.decode(&ids), text);
    stream_bytewise(&tok, text, &ids);
}

/// Feeds `ids` (one per byte of `text`) and checks that each push returns
/// exactly the character its byte completes.
fn stream_bytewise(tok: &Tokenizer, text: &str, ids: &[u32]) {
    let mut stream = tok.stream_decoder();
    let mut k = 0;
    for c in text.chars() {
        let n = c.len_utf8();
        for j in 0..n {
            let s = stream.push(ids[k]);
            k += 1;
            if j + 1 < n {
                assert_eq!(s, "", "{c:?} byte {j}");
                assert_eq!(stream.pending().len(), j + 1);
            } else {
                assert_eq!(s, c.to_string());
            }
        }
    }
    assert_eq!(stream.finish(), "");
}

#[test]
fn stream_decoder_without_a_model() {
    let tok = vocab::tokenizer(&mut vocab::bpe()).unwrap();
    let text = "é中🦀 ok";
    let ids: Vec<u32> = text.bytes().map(u32::from).collect(); // id = byte here
    stream_bytewise(&tok, text, &ids);
    // An incomplete tail comes out as U+FFFD at the end; invalid bytes at once.
    let mut s = tok.stream_decoder();
    assert_eq!(s.push(0xF0), "");
    assert_eq!(s.push(0x9F), "");
    assert_eq!(s.push(b'a' as u32), "\u{FFFD}a");
    assert_eq!(s.push(0xE4), "");
    assert_eq!(s.finish(), "\u{FFFD}");
    // Control tokens are rendered unless asked not to.
    let mut s = tok.stream_decoder().with_special(false);
    assert_eq!(s.push(262), "");
    assert_eq!(tok.stream_decoder().push(262), "<|end|>");
}

#[test]
fn bpe_synthetic_vocabulary() {
    let tok = vocab::tokenizer(&mut vocab::bpe()).unwrap();
    assert_eq!(tok.pre_tokenizer(), PreTokenizer::Gpt2);
    // hello: "h e" (rank 0), "l l" (1), "he ll" (2), "hell o" (4); "e l" (5)
    // goes stale. " world": "Ġ w" (3), the rest stays bytes.
    assert_eq!(
        tok.encode("hello world", false).unwrap(),
        [260, 259, 111, 114, 108, 100]
    );
    assert_eq!(tok.encode("hello<|end|>", true).unwrap(), [260, 262]);
    assert_eq!(
        tok.encode("hello<|end|>", false).unwrap(),
        [260, 60, 124, 101, 110, 100, 124, 62]
    );
    assert_eq!(tok.encode("  x", false).unwrap(), [32, 32, 120]);
    assert_eq!(tok.encode("", true).unwrap(), Vec::<u32>::new());
    assert!(tok.is_eog(262));
    assert_eq!(tok.decode(&[260, 259, 111, 114, 108, 100]), "hello world");
}

/// Ids of the SentencePiece test vocabulary (see `vocab::spm`).
const UNK: u32 = 0;
const BOS: u32 = 1;
const fn byte(b: u8) -> u32 {
    3 + b as u32
}
const SP: u32 = 259; // ▁
const H: u32 = 260;
const L: u32 = 262;
const D: u32 = 266;
const LL: u32 = 267;
const HELLO: u32 = 270;
const SP_HELLO: u32 = 271;
const SP_WOR: u32 = 274;
const TOOL: u32 = 275;

#[test]
fn spm_merges_by_score() {
    let tok = vocab::tokenizer(&mut vocab::spm(true)).unwrap();
    assert_eq!(tok.model(), TokenizerModel::Spm);
    assert!(tok.add_bos() && tok.add_space_prefix());
    // "▁hello▁world": ll (-1), or (-1.5), he (-2), hell (-3), hello (-4),
    // ▁hello (-5), ▁w (-6), ▁wor (-7); "l" and "d" stay.
    assert_eq!(
        tok.encode("hello world", false).unwrap(),
        [SP_HELLO, SP_WOR, L, D]
    );
    // Two spaces: "▁▁" is no piece, so one ▁ stands alone.
    assert_eq!(
        tok.encode("hello  world", false).unwrap(),
        [SP_HELLO, SP, SP_WOR, L, D]
    );
    // Equal scores: the leftmost pair merges first.
    assert_eq!(tok.encode("lll", false).unwrap(), [SP, LL, L]);
    assert_eq!(tok.encode("", false).unwrap(), Vec::<u32>::new());
    assert_eq!(tok.encode_with_bos("", false).unwrap(), [BOS]);
    assert_eq!(
        tok.encode_with_bos("hello", false).unwrap(),
        [BOS, SP_HELLO]
    );
}

#[test]
fn spm_byte_fallback_and_specials() {
    let tok = vocab::tokenizer(&mut vocab::spm(true)).unwrap();
    // "i" and "€" (E2 82 AC) are no pieces: their bytes are <0xXX> tokens.
    let ids = tok.encode("hi€", false).unwrap();
    assert_eq!(ids, [SP, H, byte(b'i'), byte(0xE2), byte(0x82), byte(0xAC)]);
    assert_eq!(tok.decode(&ids), "hi€");
    // A control token is one id only with parse_special; the text after it
    // gets the space prefix again.
    assert_eq!(tok.encode("<s>hello", true).unwrap(), [BOS, SP_HELLO]);
    assert_eq!(
        tok.encode("<s>hello", false).unwrap(),
        [SP, byte(b'<'), byte(b's'), byte(b'>'), HELLO]
    );
    // User-defined tokens are matched even without parse_special.
    assert_eq!(
        tok.encode("hello<tool>hello", false).unwrap(),
        [SP_HELLO, TOOL, SP_HELLO]
    );
    // Decoding drops the prefixed space of the first token only (llama.cpp).
    assert_eq!(tok.decode(&[SP_HELLO, SP_WOR, L, D]), "hello world");
    assert_eq!(tok.decode(&[BOS, SP_HELLO]), "<s> hello");
    assert_eq!(tok.decode_opts(&[BOS, SP_HELLO], false), " hello");
    assert_eq!(tok.decode(&[UNK]), "<unk>");
    assert_eq!(tok.decode_opts(&[UNK], false), "");
    assert_eq!(tok.token_to_piece(byte(0xE2)), Some(&[0xE2u8][..]));

    // Without byte tokens, unknown bytes become <unk>.
    let tok = vocab::tokenizer(&mut vocab::spm(false)).unwrap();
    let sp = tok.token_id("\u{2581}").unwrap();
    let h = tok.token_id("h").unwrap();
    assert_eq!(
        tok.encode("hi€", false).unwrap(),
        [sp, h, UNK, UNK, UNK, UNK]
    );
}

#[test]
fn spm_without_space_prefix() {
    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.add_space_prefix", false)
        .add("tokenizer.ggml.add_bos_token", false);
    let tok = vocab::tokenizer(&mut w).unwrap();
    assert_eq!(
        tok.encode("hello world", false).unwrap(),
        [HELLO, SP_WOR, L, D]
    );
    assert_eq!(tok.encode_with_bos("hello", false).unwrap(), [HELLO]);
    assert_eq!(tok.decode(&[SP_HELLO]), " hello");
}

/// The message of a loading error, which must be about GGUF metadata.
fn load_error(w: &mut GgufWriter) -> String {
    match vocab::tokenizer(w) {
        Err(e @ Error::Gguf { .. }) => e.to_string(),
        Err(e) => panic!("not a GGUF error: {e}"),
        Ok(_) => panic!("loaded"),
    }
}

#[test]
fn bad_metadata_is_reported() {
    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.model", "wordpiece");
    let e = load_error(&mut w);
    assert!(e.contains("unknown tokenizer model 'wordpiece'"), "{e}");

    let e = load_error(&mut GgufWriter::new());
    assert!(e.contains("'tokenizer.ggml.model' is missing"), "{e}");

    let mut w = vocab::bpe();
    w.add(
        "tokenizer.ggml.merges",
        Value::Array(wginfer::gguf::Array::String(vec![])),
    );
    assert!(vocab::tokenizer(&mut w).is_ok(), "no merges is allowed");
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", "gpt2")
        .add("tokenizer.ggml.tokens", vec!["a", "b"]);
    let e = load_error(&mut w);
    assert!(
        e.contains("tokenizer.ggml.merges") && e.contains("missing"),
        "{e}"
    );

    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.scores", vec![0.0f32; 3]);
    let e = load_error(&mut w);
    assert!(e.contains("3 scores for 276 tokens"), "{e}");

    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.token_type", vec![9i32; 276]);
    let e = load_error(&mut w);
    assert!(e.contains("token 0 has type 9"), "{e}");

    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.tokens", vec![1u32, 2, 3]);
    let e = load_error(&mut w);
    assert!(
        e.contains("tokenizer.ggml.tokens") && e.contains("array of strings"),
        "{e}"
    );

    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.tokens", Vec::<String>::new())
        .add("tokenizer.ggml.scores", Vec::<f32>::new())
        .add("tokenizer.ggml.token_type", Vec::<i32>::new());
    assert!(load_error(&mut w).contains("empty"));

    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.bos_token_id", "one");
    let e = load_error(&mut w);
    assert!(
        e.contains("bos_token_id") && e.contains("expected a token id"),
        "{e}"
    );

    // A byte token must read <0xXX>.
    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.token_type", {
        let mut t = vec![1i32; 276];
        t[259] = 6;
        t
    });
    let e = load_error(&mut w);
    assert!(e.contains("byte token 259"), "{e}");
}

#[test]
fn odd_but_usable_metadata() {
    // An id past the vocabulary is ignored (the default stays), a negative
    // one means none.
    let mut w = vocab::spm(true);
    w.add("tokenizer.ggml.bos_token_id", Value::U32(9999))
        .add("tokenizer.ggml.eos_token_id", Value::I32(-1));
    let tok = vocab::tokenizer(&mut w).unwrap();
    assert_eq!((tok.bos(), tok.eos()), (Some(1), None));

    // BOS asked for but there is none.
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", "gpt2")
        .add("tokenizer.ggml.pre", "no-such-pre")
        .add("tokenizer.ggml.tokens", vec!["a", "b"])
        .add("tokenizer.ggml.merges", vec!["a b"])
        .add("tokenizer.ggml.add_bos_token", true);
    let tok = vocab::tokenizer(&mut w).unwrap();
    assert_eq!(
        tok.pre_tokenizer(),
        PreTokenizer::Gpt2,
        "unknown names fall back to gpt2"
    );
    assert_eq!(tok.bos(), None);
    assert_eq!(tok.encode("ab", false).unwrap(), [0, 1]);
    assert!(tok.encode_with_bos("ab", false).is_err());
}
