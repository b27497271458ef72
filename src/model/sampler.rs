//! Picking the next token from logits: greedy, or llama.cpp's chain
//! top-k → top-p → min-p → temperature → a seeded draw.

use super::llama_graph::Pick;
use crate::graph::MAX_SAMPLE_TOP_K;
use crate::rng::Rng;
use crate::{Error, Result};

/// How to sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerOptions {
    /// Temperature; `<= 0` is greedy (argmax).
    pub temp: f32,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities add up to `top_p` (1: all).
    pub top_p: f32,
    /// Keep the tokens at least `min_p` times as likely as the most likely
    /// one (0: all).
    pub min_p: f32,
    /// Seed of the random draws: the same seed gives the same tokens.
    pub seed: u64,
}

impl Default for SamplerOptions {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05.
    fn default() -> Self {
        SamplerOptions {
            temp: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed: 42,
        }
    }
}

/// A sampler with its random state.
#[derive(Debug)]
pub struct Sampler {
    opts: SamplerOptions,
    rng: RngState,
}

/// `rng::Rng` has no `Debug`; keep the seed for it.
struct RngState(Rng, u64);

impl std::fmt::Debug for RngState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rng(seed {})", self.1)
    }
}

/// Index of the largest value; the lowest index wins a tie (as llama.cpp).
pub fn argmax(logits: &[f32]) -> Option<usize> {
    crate::backend::cpu::row_argmax(logits)
}

impl Sampler {
    /// A sampler; top-p must lie in `(0, 1]`, min-p in `[0, 1]` and the
    /// temperature be finite.
    pub fn new(opts: SamplerOptions) -> Result<Sampler> {
        if !(0.0..=1.0).contains(&opts.min_p) {
            return Err(Error::invalid(format!(
                "min-p {} is outside [0, 1]",
                opts.min_p
            )));
        }
        if !(opts.top_p > 0.0 && opts.top_p <= 1.0) {
            return Err(Error::invalid(format!(
                "top-p {} is outside (0, 1]",
                opts.top_p
            )));
        }
        if !opts.temp.is_finite() {
            return Err(Error::invalid(format!(
                "temperature {} is not finite",
                opts.temp
            )));
        }
        Ok(Sampler {
            opts,
            rng: RngState(Rng::new(opts.seed), opts.seed),
        })
    }

    /// The options in use.
    pub fn options(&self) -> &SamplerOptions {
        &self.opts
    }

    /// Whether sampling is greedy.
    pub fn is_greedy(&self) -> bool {
        self.opts.temp <= 0.0
    }

    /// How a pipelined step picks this sampler's tokens on the device: the
    /// argmax when greedy, the device sampler (top-k, top-p, min-p,
    /// temperature, a draw, as [`Sampler::sample`] computes them, in f32)
    /// when top-k keeps 1 to [`MAX_SAMPLE_TOP_K`] tokens; `None` where only
    /// the host can sample.
    pub fn device_pick(&self) -> Option<Pick> {
        match self.opts.top_k {
            _ if self.is_greedy() => Some(Pick::Greedy),
            k @ 1..=MAX_SAMPLE_TOP_K => Some(Pick::TopK(k)),
            _ => None,
        }
    }

    /// The settings of the device sampler's next draw: temperature,
    /// top-p, ln min-p (-inf: off) and the uniform draw, taken from the
    /// seeded state as [`Sampler::sample`] takes it (greedy sampling draws
    /// nothing).
    pub fn next_device_settings(&mut self) -> [f32; 4] {
        if self.is_greedy() {
            return [0.0; 4];
        }
        let ln_min_p = match self.opts.min_p {
            m if m > 0.0 => m.ln(),
            _ => f32::NEG_INFINITY,
        };
        [
            self.opts.temp,
            self.opts.top_p,
            ln_min_p,
            self.uniform() as f32,
        ]
    }

    /// A uniform draw in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        (self.rng.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next token for `logits` (one value per vocabulary entry).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        let empty = || Error::invalid("no logits to sample from");
        if self.is_greedy() {
            return argmax(logits).map(|i| i as u32).ok_or_else(empty);
        }
        let mut cand: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(|(i, &v)| (i as u32, v))
            .collect();
        if cand.is_empty() {
            return Err(empty());
        }
        // Larger first, the lower index on a tie (+0 and -0 tie, as on the device).
        let desc = |a: &(u32, f32), b: &(u32, f32)| {
            b.1.partial_cmp(&a.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.0.cmp(&b.0))
        };
        let k = self.opts.top_k;
        if k > 0 && k < cand.len() {
            cand.select_nth_unstable_by(k - 1, desc);
            cand.truncate(k);
        }
        cand.sort_unstable_by(desc);

        if self.opts.top_p < 1.0 {
            let probs = softmax(cand.iter().map(|c| c.1), 1.0);
            let mut sum = 0.0;
            let mut keep = cand.len();
            for (i, p) in probs.iter().enumerate() {
                sum += p;
                if sum >= self.opts.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            cand.truncate(keep.max(1));
        }

        if self.opts.min_p > 0.0 {
            // p_i >= min_p * p_max, in logits (llama.cpp's min-p sampler).
            let floor = cand[0].1 + self.opts.min_p.ln();
            let keep = cand.iter().take_while(|c| c.1 >= floor).count();
            cand.truncate(keep.max(1));
        }

        let probs = softmax(cand.iter().map(|c| c.1), self.opts.temp);
        let r = self.uniform();
        let mut acc = 0.0;
        for (c, p) in cand.iter().zip(&probs) {
            acc += p;
            if r < acc {
                return Ok(c.0);
            }
        }
        // Rounding left `acc` just below 1: the last candidate takes the rest.
        cand.last().map(|c| c.0).ok_or_else(empty)
    }
}

/// Probabilities of `logits / temp`, in f64 so long tails keep their mass.
fn softmax(logits: impl Iterator<Item = f32> + Clone, temp: f32) -> Vec<f64> {
    let t = temp as f64;
    let max = logits.clone().fold(f32::NEG_INFINITY, f32::max) as f64;
    let exps: Vec<f64> = logits.map(|v| ((v as f64 - max) / t).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(temp: f32, top_k: usize, top_p: f32, seed: u64) -> SamplerOptions {
        SamplerOptions {
            temp,
            top_k,
            top_p,
            min_p: 0.0,
            seed,
        }
    }

    #[test]
    fn min_p_keeps_tokens_near_the_most_likely() {
        // Token 3 is 1/e as likely as token 0; the others e^-10.
        let logits = [10.0, 0.0, 0.0, 9.0, 0.0];
        let draw = |min_p: f32| {
            let mut s = Sampler::new(SamplerOptions {
                min_p,
                ..opts(1.0, 0, 1.0, 5)
            })
            .unwrap();
            (0..200)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        // min-p 0.3 (< 1/e) keeps 0 and 3; 0.5 keeps only 0.
        assert!(draw(0.3).iter().all(|&t| t == 0 || t == 3));
        assert!(draw(0.3).contains(&3));
        assert!(draw(0.5).iter().all(|&t| t == 0));
        assert!(Sampler::new(SamplerOptions {
            min_p: 1.5,
            ..opts(1.0, 0, 1.0, 1)
        })
        .is_err());
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        let mut s = Sampler::new(opts(0.0, 0, 1.0, 1)).unwrap();
        assert_eq!(s.sample(&[0.5, 2.0, 2.0, -1.0]).unwrap(), 1);
        assert!(s.sample(&[]).is_err());
    }

    #[test]
    fn top_k_one_is_greedy_and_seeds_repeat() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 101) as f32 / 10.0).collect();
        let mut s = Sampler::new(opts(1.0, 1, 1.0, 7)).unwrap();
        let best = argmax(&logits).unwrap() as u32;
        assert!((0..20).all(|_| s.sample(&logits).unwrap() == best));
        let draw = |seed| {
            let mut s = Sampler::new(opts(1.5, 0, 1.0, seed)).unwrap();
            (0..50)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    fn top_p_and_top_k_restrict_the_candidates() {
        // One token has nearly all the mass: top-p 0.5 keeps only it.
        let mut logits = vec![0.0f32; 50];
        logits[17] = 20.0;
        let mut s = Sampler::new(opts(5.0, 0, 0.5, 9)).unwrap();
        assert!((0..50).all(|_| s.sample(&logits).unwrap() == 17));
        // top-k 3 of a flat distribution stays among the three largest ids.
        let flat: Vec<f32> = (0..50).map(|i| i as f32 * 1e-3).collect();
        let mut s = Sampler::new(opts(1.0, 3, 1.0, 9)).unwrap();
        assert!((0..50).all(|_| s.sample(&flat).unwrap() >= 47));
        assert!(Sampler::new(opts(1.0, 0, 0.0, 1)).is_err());
        assert!(Sampler::new(opts(f32::NAN, 0, 1.0, 1)).is_err());
    }
}
