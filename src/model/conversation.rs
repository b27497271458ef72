//! A multi-turn chat that keeps the KV cache between turns: each turn
//! renders the whole conversation, and only the tokens past what the cache
//! already holds (the earlier turns, as a rule) are evaluated.

use super::chat::{apply_chat_messages, Message};
use super::generate::{GenerateOptions, Generation};
use super::load::Model;
use crate::Result;

/// The turns so far and the tokens the model's cache holds for them.
///
/// Between a reply and the next turn the model must run nothing else (its
/// cache would no longer hold this conversation); [`Conversation::forget_cache`]
/// makes the next turn evaluate everything.
#[derive(Clone, Debug, Default)]
pub struct Conversation {
    messages: Vec<Message>,
    cached: Vec<u32>,
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Conversation {
        Conversation::default()
    }

    /// A conversation that starts with a system message.
    pub fn with_system(system: &str) -> Conversation {
        Conversation {
            messages: vec![Message::new("system", system)],
            cached: Vec::new(),
        }
    }

    /// The turns so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Makes the next turn evaluate the whole conversation.
    pub fn forget_cache(&mut self) {
        self.cached.clear();
    }

    /// Adds the user's turn and starts the model's reply; once the reply
    /// has ended (or been cut short), [`Conversation::record`] adds it. An
    /// error (a template that fails, a conversation past the context)
    /// leaves the conversation as it was.
    pub fn reply<'m>(
        &mut self,
        model: &'m mut Model,
        user: &str,
        opts: &GenerateOptions,
    ) -> Result<Generation<'m>> {
        let mut messages = self.messages.clone();
        messages.push(Message::new("user", user));
        let text = apply_chat_messages(model.tokenizer(), &messages)?;
        let tokens = model.tokenize(&text)?;
        let same = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count();
        let generation = model.generate_after(tokens, same, opts)?;
        self.messages = messages;
        Ok(generation)
    }

    /// Adds the reply `generation` gave and remembers what the cache holds.
    pub fn record(&mut self, generation: &Generation<'_>) {
        self.messages
            .push(Message::new("assistant", &generation.text()));
        self.cached = generation.cached_tokens();
    }
}
