//! One user turn in the model's chat format (ChatML only, for now).

use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// Whether a chat template is ChatML (`<|im_start|>role\n...<|im_end|>`).
/// A model without a template counts as ChatML, as in llama.cpp.
pub fn is_chatml(template: Option<&str>) -> bool {
    template.is_none_or(|t| t.contains("<|im_start|>"))
}

/// `prompt` as one ChatML user turn followed by the assistant's header.
pub fn chatml_user_turn(prompt: &str) -> String {
    format!("<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
}

/// The prompt for `--chat`: one user turn, or an error when the model's
/// template is not ChatML.
pub fn apply_chat(tok: &Tokenizer, prompt: &str) -> Result<String> {
    if is_chatml(tok.chat_template()) {
        Ok(chatml_user_turn(prompt))
    } else {
        Err(Error::invalid(
            "the model's chat template is not ChatML; only ChatML chats are supported",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_turn() {
        assert_eq!(
            chatml_user_turn("Hi"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert!(is_chatml(None));
        assert!(is_chatml(Some("{{'<|im_start|>' + role}}")));
        assert!(!is_chatml(Some("[INST] {{ content }} [/INST]")));
    }
}
