//! Perplexity the way llama-perplexity measures it: the text's tokens cut
//! into non-overlapping chunks of `n_ctx`, each evaluated from an empty
//! cache, and only the second half of each chunk scored (the first half is
//! context): the logits at positions `n_ctx/2 .. n_ctx-2` predict tokens
//! `n_ctx/2+1 .. n_ctx-1`. As there, a model that adds BOS sees BOS in
//! place of each chunk's first token.

use super::load::Model;
use crate::{Error, Result};

/// The result of [`Model::perplexity`].
#[derive(Clone, Debug, PartialEq)]
pub struct Perplexity {
    /// exp of the mean negative log-likelihood over every scored token.
    pub ppl: f64,
    /// The running estimate after each chunk (what llama-perplexity prints
    /// as `[i]`); the last one is `ppl`.
    pub chunks: Vec<f64>,
    /// Tokens scored per chunk.
    pub scored_per_chunk: usize,
}

/// `-log softmax(row)[target]`, in f64 like llama-perplexity.
fn nll(row: &[f32], target: usize) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    sum.ln() - (row[target] as f64 - max)
}

impl Model {
    /// Scores `tokens` in chunks of `n_ctx` (at most the model's context,
    /// even, at least 4; the text must fill two chunks, as llama-perplexity
    /// requires). `on_chunk(i, running_ppl)` is called after each chunk.
    pub fn perplexity(
        &mut self,
        tokens: &[u32],
        n_ctx: usize,
        on_chunk: &mut dyn FnMut(usize, f64),
    ) -> Result<Perplexity> {
        if n_ctx < 4 || !n_ctx.is_multiple_of(2) || n_ctx > self.n_ctx() {
            return Err(Error::invalid(format!(
                "a perplexity context of {n_ctx}: it must be even, at least 4 and at most \
                 the loaded context ({})",
                self.n_ctx()
            )));
        }
        if tokens.len() < 2 * n_ctx {
            return Err(Error::invalid(format!(
                "{} tokens: perplexity with a context of {n_ctx} needs at least {}",
                tokens.len(),
                2 * n_ctx
            )));
        }
        let n_vocab = self.config().n_vocab;
        let first = n_ctx / 2;
        let (mut total, mut count) = (0.0f64, 0usize);
        let bos = self
            .tokenizer()
            .bos()
            .filter(|_| self.tokenizer().add_bos());
        let mut chunks = Vec::new();
        for (i, chunk) in tokens.chunks_exact(n_ctx).enumerate() {
            let mut chunk = chunk.to_vec();
            if let Some(bos) = bos {
                chunk[0] = bos;
            }
            // The context half needs no logits: only the cache it fills.
            self.eval(&chunk[..first], 0, false)?;
            let logits = self.eval(&chunk[first..], first, true)?;
            for pos in first..n_ctx - 1 {
                let row = &logits[(pos - first) * n_vocab..][..n_vocab];
                total += nll(row, chunk[pos + 1] as usize);
                count += 1;
            }
            let running = (total / count as f64).exp();
            on_chunk(i, running);
            chunks.push(running);
        }
        Ok(Perplexity {
            ppl: (total / count as f64).exp(),
            chunks,
            scored_per_chunk: n_ctx - 1 - first,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::nll;

    #[test]
    fn nll_is_minus_log_softmax() {
        let row = [1.0f32, 2.0, 3.0];
        let z: f64 = row.iter().map(|&v| (v as f64).exp()).sum();
        assert!((nll(&row, 2) - (z.ln() - 3.0)).abs() < 1e-12);
        assert!((nll(&[0.0; 4], 1) - 4f64.ln()).abs() < 1e-12);
    }
}
