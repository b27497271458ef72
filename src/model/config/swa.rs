//! Sliding-window attention as llama.cpp reads it: the window
//! (`{arch}.attention.sliding_window`), which layers attend through it
//! (`{arch}.attention.sliding_window_pattern`: one bool per layer, or a
//! period whose last layer attends to everything; else the family's
//! period), and the rope of those layers.

use super::Family;
use crate::gguf::{Array, Gguf, Value};
use crate::graph::RopeParams;
use crate::{Error, Result};

/// Gemma 3: five sliding layers of every six (llama.cpp's
/// `load_swa_pattern(6)`), a rope base of their own (10,000 unless the file
/// names one); Gemma 2: every other layer (`load_swa_pattern(2)`), the
/// other layers' rope and a window of 4,096 where the file names none;
/// OLMo 3 (`olmo2` with a window): three of every four
/// (`load_swa_pattern(4)`), plain rope without YaRN scaling; EXAONE 4:
/// only its 64-layer shape has a window (llama.cpp's check; 4,096 where
/// the file names none), three layers of every four, roped as the others
/// (llama.cpp reads `rope.freq_base_swa` there but its graph ropes every
/// layer at the common base); Cohere 2: three of every four, a window the
/// file must name.
const GEMMA3_PERIOD: usize = 6;
const GEMMA3_FREQ_BASE: f32 = 10_000.0;
const GEMMA2_PERIOD: usize = 2;
const GEMMA2_WINDOW: usize = 4096;
const OLMO3_PERIOD: usize = 4;
const EXAONE4_PERIOD: usize = 4;
const EXAONE4_WINDOW: usize = 4096;
const EXAONE4_SWA_LAYERS: usize = 64;
const COHERE2_PERIOD: usize = 4;

/// A model's sliding window: `n_swa` 0 means none.
pub(super) struct SlidingWindow {
    pub n_swa: usize,
    /// Whether each layer attends through the window.
    pub layers: Vec<bool>,
    /// The rope of the sliding layers.
    pub rope: RopeParams,
}

pub(super) fn sliding_window(
    g: &Gguf,
    arch: &str,
    family: Family,
    n_layer: usize,
    rope: &RopeParams,
) -> Result<SlidingWindow> {
    let key = |k: &str| format!("{arch}.{k}");
    // Only these families' windows are read (llama.cpp turns Phi-3's off).
    let window = g.opt_usize(&key("attention.sliding_window"))?;
    let base_swa = g.opt_f32(&key("rope.freq_base_swa"))?;
    let mut swa_rope = *rope;
    let (n_swa, period) = match family {
        Family::Gemma3 => {
            swa_rope.freq_base = base_swa.unwrap_or(GEMMA3_FREQ_BASE);
            swa_rope.freq_scale = 1.0;
            (window.unwrap_or(0), GEMMA3_PERIOD)
        }
        Family::Gemma2 => {
            swa_rope.freq_base = base_swa.unwrap_or(rope.freq_base);
            (window.unwrap_or(GEMMA2_WINDOW), GEMMA2_PERIOD)
        }
        Family::Olmo2 => {
            // llama.cpp's olmo2 graph ropes the sliding layers at the
            // common base, unscaled and without YaRN's ramp or magnitude.
            swa_rope.freq_scale = 1.0;
            swa_rope.ext_factor = 0.0;
            swa_rope.attn_factor = 1.0;
            (window.unwrap_or(0), OLMO3_PERIOD)
        }
        Family::Exaone4 if n_layer == EXAONE4_SWA_LAYERS => {
            (window.unwrap_or(EXAONE4_WINDOW), EXAONE4_PERIOD)
        }
        // llama.cpp requires Cohere's window (and reads its own rope base
        // for the sliding layers, which its graph never uses).
        Family::Cohere2 => match window {
            Some(w) if w > 0 => (w, COHERE2_PERIOD),
            _ => {
                return Err(Error::invalid(format!(
                    "{arch}: {} is missing or 0",
                    key("attention.sliding_window")
                )))
            }
        },
        _ => (0, 1),
    };
    if n_swa == 0 {
        return Ok(SlidingWindow {
            n_swa,
            layers: vec![false; n_layer],
            rope: *rope,
        });
    }
    let pattern_key = key("attention.sliding_window_pattern");
    let layers = match g.get(&pattern_key) {
        None => periodic(period, n_layer),
        Some(Value::Array(Array::Bool(v))) if v.len() == n_layer => v.clone(),
        Some(v) => match v.as_usize() {
            Some(p) => periodic(p, n_layer),
            None => {
                return Err(Error::invalid(format!(
                    "{arch}: {pattern_key} is {}; a period or one bool for each of the {n_layer} layers expected",
                    v.type_description()
                )))
            }
        },
    };
    Ok(SlidingWindow {
        n_swa,
        layers,
        rope: swa_rope,
    })
}

/// llama.cpp's `set_swa_pattern(period)`: the last layer of each `period`
/// attends to everything, the others through the window; period 0 puts
/// every layer in the window.
fn periodic(period: usize, n_layer: usize) -> Vec<bool> {
    (0..n_layer)
        .map(|il| period == 0 || il % period < period - 1)
        .collect()
}
