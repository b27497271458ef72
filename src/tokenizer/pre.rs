//! BPE pre-tokenizers: the regexes that cut text into words before merging.

use fancy_regex::Regex;

use crate::{Error, Result};

/// GPT-2's word pattern: contractions, letters, digits and other symbols
/// each with an optional leading space, then whitespace. The final `\s+`
/// stands for what llama.cpp keeps when nothing else matches.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Llama 3's pattern (case-insensitive contractions, up to 3 digits).
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen 2's pattern: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Hunyuan's dense models: digits in threes, runs of CJK ideographs and
/// kana, then words with their marks, an ASCII punctuation mark leading
/// ASCII letters, punctuation runs and whitespace.
const HUNYUAN_DENSE: [&str; 3] = [
    r"\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
];

/// A BPE pre-tokenizer: a list of regexes applied in turn, each splitting
/// every piece the previous ones left (matches and the text between them
/// both stay pieces). A regex sees one piece at a time, so a lookahead never
/// looks past the end of its piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// llama.cpp's `default`: punctuation runs, GPT-2, digit runs, 3 digits.
    Default,
    /// GPT-2 (`gpt-2`, `mpt`, `olmo`, `jais`, `phi-2`, ...).
    Gpt2,
    /// Each digit alone, then GPT-2 (`smollm`, `starcoder`, `refact`,
    /// `command-r`, `codeshell`, `exaone`, `minerva-7b`).
    Starcoder,
    /// Llama 3 (`llama-bpe`, `llama3`, `falcon3`, `dbrx`, `smaug-bpe`, ...).
    Llama3,
    /// Qwen 2 (`qwen2`, `stablelm2`, `deepseek-r1-qwen`, `megrez`, ...).
    Qwen2,
    /// Falcon: punctuation runs, GPT-2, 3 digits.
    Falcon,
    /// Hunyuan's dense models (`hunyuan-dense`).
    HunyuanDense,
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre` = `name`;
    /// `None` for names it does not know here.
    pub fn from_name(name: &str) -> Option<PreTokenizer> {
        Some(match name {
            "default" => PreTokenizer::Default,
            "gpt-2" | "gpt2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "jina-v1-en" | "jina-v2-code"
            | "roberta-bpe" | "mpt" | "olmo" | "jais" | "exaone4" | "trillion"
            | "granite-docling" => PreTokenizer::Gpt2,
            "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone"
            | "minerva-7b" => PreTokenizer::Starcoder,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "dbrx" | "smaug-bpe" | "chatglm-bpe" | "glm4" | "glm5" => {
                PreTokenizer::Llama3
            }
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "stablelm2" | "megrez" | "hunyuan" => {
                PreTokenizer::Qwen2
            }
            "falcon" => PreTokenizer::Falcon,
            "hunyuan-dense" => PreTokenizer::HunyuanDense,
            _ => return None,
        })
    }

    /// Whether llama.cpp, for this `tokenizer.ggml.pre`, adds BOS by
    /// default and takes a word that is a whole vocabulary entry as it is,
    /// without merging (the Llama 3 family).
    pub(super) fn llama3_flags(name: &str) -> bool {
        matches!(
            name,
            "llama3"
                | "llama-v3"
                | "llama-bpe"
                | "falcon3"
                | "falcon-h1"
                | "pixtral"
                | "midm-2.0"
                | "lfm2"
        )
    }

    /// Whether llama.cpp takes a word that is a whole vocabulary entry as
    /// it is, without merging: the Llama 3 family, and GLM-4/5 (which add
    /// no BOS).
    pub(super) fn ignores_merges(name: &str) -> bool {
        Self::llama3_flags(name) || matches!(name, "glm4" | "glm5")
    }

    /// The regexes, in the order they are applied.
    pub fn patterns(self) -> &'static [&'static str] {
        match self {
            PreTokenizer::Default => {
                &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"]
            }
            PreTokenizer::Gpt2 => &[GPT2],
            PreTokenizer::Starcoder => &[r"\p{N}", GPT2],
            PreTokenizer::Llama3 => &[LLAMA3],
            PreTokenizer::Qwen2 => &[QWEN2],
            PreTokenizer::Falcon => &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
            PreTokenizer::HunyuanDense => &HUNYUAN_DENSE,
        }
    }
}

/// The compiled regexes of a [`PreTokenizer`].
#[derive(Debug)]
pub(super) struct Splitter {
    regexes: Vec<Regex>,
}

impl Splitter {
    pub(super) fn new(pre: PreTokenizer) -> Result<Splitter> {
        let regexes = pre
            .patterns()
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|e| Error::invalid(format!("pre-tokenizer regex {p}: {e}")))
            })
            .collect::<Result<_>>()?;
        Ok(Splitter { regexes })
    }

    /// Cuts `text` into words.
    pub(super) fn split<'t>(&self, text: &'t str) -> Result<Vec<&'t str>> {
        let mut pieces = vec![text];
        for re in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for piece in pieces {
                let mut last = 0;
                for m in re.find_iter(piece) {
                    let m = m.map_err(|e| Error::invalid(format!("pre-tokenizer: {e}")))?;
                    if m.start() == m.end() {
                        continue;
                    }
                    if m.start() > last {
                        next.push(&piece[last..m.start()]);
                    }
                    next.push(m.as_str());
                    last = m.end();
                }
                if last < piece.len() {
                    next.push(&piece[last..]);
                }
            }
            pieces = next;
        }
        pieces.retain(|p| !p.is_empty());
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: PreTokenizer, text: &str) -> Vec<&str> {
        Splitter::new(pre).unwrap().split(text).unwrap()
    }

    #[test]
    fn gpt2_words() {
        assert_eq!(
            split(PreTokenizer::Gpt2, "I'm  here, DON'T 123\n\n x  "),
            ["I", "'m", " ", " here", ",", " DON", "'", "T", " 123", "\n\n", " x", "  "]
        );
    }

    #[test]
    fn starcoder_splits_digits_first() {
        // The digit split comes first, so the space before a number is
        // left alone at the end of its piece.
        assert_eq!(
            split(PreTokenizer::Starcoder, "a 12, x"),
            ["a", " ", "1", "2", ",", " x"]
        );
    }

    #[test]
    fn llama3_words() {
        assert_eq!(
            split(PreTokenizer::Llama3, "I'M 12345 ok!\n\nyes"),
            ["I", "'M", " ", "123", "45", " ok", "!\n\n", "yes"]
        );
    }

    #[test]
    fn hunyuan_dense_splits_kana_ideographs_and_digits() {
        assert_eq!(
            split(PreTokenizer::HunyuanDense, "日本語です 12345 .Net ok!\n.x"),
            [
                "日本語です",
                " ",
                "123",
                "45",
                " .",
                "Net",
                " ok",
                "!\n",
                ".x"
            ]
        );
    }

    #[test]
    fn default_splits_punctuation_first() {
        assert_eq!(
            split(PreTokenizer::Default, "a+b 1234"),
            ["a", "+", "b", " ", "123", "4"]
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            PreTokenizer::from_name("smollm"),
            Some(PreTokenizer::Starcoder)
        );
        assert_eq!(PreTokenizer::from_name("gpt-2"), Some(PreTokenizer::Gpt2));
        assert_eq!(PreTokenizer::from_name("nope"), None);
        // GLM-4 splits as Llama 3 and keeps whole-word tokens, without
        // Llama 3's default BOS.
        assert_eq!(PreTokenizer::from_name("glm4"), Some(PreTokenizer::Llama3));
        assert!(PreTokenizer::ignores_merges("glm4") && !PreTokenizer::llama3_flags("glm4"));
    }
}
