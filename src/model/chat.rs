//! Chat prompts: the GGUF file's `tokenizer.chat_template` (Jinja) rendered
//! with minijinja as Hugging Face's `apply_chat_template` renders it, or, for
//! files that ship none, a built-in format: Gemma's `<start_of_turn>` turns
//! when the vocabulary has them, ChatML otherwise (llama.cpp's fallback).

use std::collections::BTreeMap;

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, ErrorKind, Value};

use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub content: String,
}

impl Message {
    /// A turn of `role`.
    pub fn new(role: &str, content: &str) -> Message {
        Message {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// The built-in chat formats, for files without a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatFormat {
    /// `<|im_start|>role\n...<|im_end|>\n` (SmolLM2, Qwen and many others).
    ChatMl,
    /// `<start_of_turn>role\n...<end_of_turn>\n`, the assistant being `model`.
    Gemma,
}

impl ChatFormat {
    /// The built-in format of a model whose vocabulary has `has_token`:
    /// Gemma's when it has `<start_of_turn>`, else ChatML.
    pub fn for_vocabulary(has_token: &dyn Fn(&str) -> bool) -> ChatFormat {
        match has_token("<start_of_turn>") {
            true => ChatFormat::Gemma,
            false => ChatFormat::ChatMl,
        }
    }

    /// `messages` in this format, followed by the assistant's header.
    pub fn render(self, messages: &[Message]) -> String {
        let mut out = String::new();
        for m in messages {
            out += &match self {
                ChatFormat::ChatMl => format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content),
                // Gemma has no system role: its templates put the system
                // text at the top of the first user turn.
                ChatFormat::Gemma => {
                    let role = if m.role == "assistant" {
                        "model"
                    } else {
                        "user"
                    };
                    format!("<start_of_turn>{role}\n{}<end_of_turn>\n", m.content)
                }
            };
        }
        out += match self {
            ChatFormat::ChatMl => "<|im_start|>assistant\n",
            ChatFormat::Gemma => "<start_of_turn>model\n",
        };
        out
    }
}

/// `prompt` as one ChatML user turn followed by the assistant's header.
pub fn chatml_user_turn(prompt: &str) -> String {
    ChatFormat::ChatMl.render(&[Message::new("user", prompt)])
}

/// Renders a Jinja chat template with `messages`, `add_generation_prompt`,
/// `bos_token` and `eos_token`, as Hugging Face does (blocks trimmed,
/// Python string methods, `raise_exception`). An error names what failed.
pub fn render_template(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String> {
    let fail = |e: minijinja::Error| Error::invalid(format!("the chat template failed: {e:#}"));
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .map_err(fail)?;
    env.set_syntax(syntax);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        },
    );
    env.add_template("chat", template).map_err(fail)?;
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let mut turn = BTreeMap::new();
            turn.insert("role", Value::from(m.role.as_str()));
            turn.insert("content", Value::from(m.content.as_str()));
            Value::from(turn)
        })
        .collect();
    let ctx = minijinja::context! {
        messages => messages,
        add_generation_prompt => add_generation_prompt,
        bos_token => bos_token,
        eos_token => eos_token,
    };
    env.get_template("chat")
        .and_then(|t| t.render(ctx))
        .map_err(fail)
}

/// The prompt text of a conversation, ending with the assistant's header:
/// the file's template when it has one, else the built-in format. A BOS
/// the template writes is dropped when the tokenizer adds one anyway (as
/// llama.cpp does), so the prompt does not start with two.
pub fn apply_chat_messages(tok: &Tokenizer, messages: &[Message]) -> Result<String> {
    let text_of = |id: Option<u32>| id.and_then(|i| tok.token_text(i)).unwrap_or("");
    let (bos, eos) = (text_of(tok.bos()), text_of(tok.eos()));
    let Some(template) = tok.chat_template() else {
        let has_token = |t: &str| tok.token_id(t).is_some();
        return Ok(ChatFormat::for_vocabulary(&has_token).render(messages));
    };
    let text = render_template(template, messages, true, bos, eos)?;
    Ok(match text.strip_prefix(bos) {
        Some(rest) if tok.add_bos() && !bos.is_empty() => rest.to_string(),
        _ => text,
    })
}

/// The prompt for `--chat`: `prompt` as one user turn.
pub fn apply_chat(tok: &Tokenizer, prompt: &str) -> Result<String> {
    apply_chat_messages(tok, &[Message::new("user", prompt)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2's template, as its GGUF file ships it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// The shape of Gemma 3's template: BOS, the system text folded into the
    /// first user turn, Python methods, raise_exception.
    const GEMMA: &str = "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n    {%- endif -%}\n    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n";

    #[test]
    fn built_in_formats() {
        assert_eq!(
            chatml_user_turn("Hi"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let gemma_vocab = |t: &str| t == "<start_of_turn>";
        assert_eq!(ChatFormat::for_vocabulary(&gemma_vocab), ChatFormat::Gemma);
        assert_eq!(ChatFormat::for_vocabulary(&|_| false), ChatFormat::ChatMl);
        let turns = [
            Message::new("user", "Hi"),
            Message::new("assistant", "Hello"),
        ];
        assert_eq!(
            ChatFormat::Gemma.render(&turns),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn templates_render_as_hugging_face_does() {
        let user = [Message::new("user", "Hi")];
        assert_eq!(
            render_template(SMOLLM2, &user, true, "", "<|im_end|>").unwrap(),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let chat = [
            Message::new("system", "Be brief."),
            Message::new("user", " Hi "),
            Message::new("assistant", "Hello"),
            Message::new("user", "Bye"),
        ];
        assert_eq!(
            render_template(GEMMA, &chat, true, "<bos>", "<eos>").unwrap(),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn template_errors_are_clear() {
        let two_users = [Message::new("user", "a"), Message::new("user", "b")];
        let e = render_template(GEMMA, &two_users, true, "", "").unwrap_err();
        assert!(e.to_string().contains("must alternate"), "{e}");
        let e = render_template("{% for %}", &two_users, true, "", "").unwrap_err();
        assert!(e.to_string().contains("chat template"), "{e}");
    }
}
