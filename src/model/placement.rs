//! Which backend holds each tensor of a model, as llama.cpp decides it:
//! `n_gpu_layers` puts the last N layers (weights and KV cache) on the GPUs
//! and the others on the CPU; the token embedding and the output head go to
//! a GPU only when N exceeds the layer count (llama.cpp's "+1 for the
//! output"). Over several GPUs the split mode spreads the offloaded part:
//!
//! - `none`: everything on the main GPU;
//! - `layer`: whole layers, in proportion to each GPU's share;
//! - `row`: layers on the main GPU, every weight matrix cut by rows in
//!   proportion to the shares, its partial products gathered on the main GPU.
//!
//! GPUs are backends `0..n_gpus`; the CPU is backend `n_gpus`.

use std::ops::Range;

use crate::{Error, Result};

/// How a model is spread over several GPUs (llama.cpp's `llama_split_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SplitMode {
    /// The whole model on the main GPU.
    None,
    /// Layers and their KV cache spread over the GPUs.
    #[default]
    Layer,
    /// Each weight matrix split by rows over the GPUs.
    Row,
}

impl SplitMode {
    /// Parses `none`, `layer` or `row`.
    pub fn parse(s: &str) -> Result<SplitMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(SplitMode::None),
            "layer" => Ok(SplitMode::Layer),
            "row" => Ok(SplitMode::Row),
            other => Err(Error::invalid(format!(
                "split mode '{other}': expected none, layer or row"
            ))),
        }
    }
}

impl std::fmt::Display for SplitMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SplitMode::None => "none",
            SplitMode::Layer => "layer",
            SplitMode::Row => "row",
        })
    }
}

/// The split mode, the main GPU and each GPU's share, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSplit {
    mode: SplitMode,
    main: usize,
    /// One per GPU, summing to 1.
    shares: Vec<f64>,
}

impl GpuSplit {
    /// One GPU (or none): everything offloaded goes to GPU 0.
    pub fn single() -> GpuSplit {
        GpuSplit {
            mode: SplitMode::None,
            main: 0,
            shares: vec![1.0],
        }
    }

    /// Checks a split over `n_gpus` GPUs. `tensor_split` holds llama.cpp's
    /// proportions, one per GPU (missing ones are 0); when it is empty each
    /// GPU's share follows `capacity` (its memory), or is equal when a
    /// capacity is unknown. `none` gives the main GPU everything.
    pub fn new(
        mode: SplitMode,
        main: usize,
        tensor_split: &[f32],
        capacity: &[Option<usize>],
    ) -> Result<GpuSplit> {
        let n_gpus = capacity.len();
        if main >= n_gpus {
            return Err(Error::invalid(format!(
                "main GPU {main} is out of range: {n_gpus} device{} opened",
                if n_gpus == 1 { " is" } else { "s are" }
            )));
        }
        if tensor_split.len() > n_gpus {
            return Err(Error::invalid(format!(
                "a tensor split of {} entries for {n_gpus} device{}",
                tensor_split.len(),
                if n_gpus == 1 { "" } else { "s" }
            )));
        }
        if let Some(bad) = tensor_split.iter().find(|p| !p.is_finite() || **p < 0.0) {
            return Err(Error::invalid(format!(
                "tensor split proportion {bad}: proportions must be finite and not negative"
            )));
        }
        let weights: Vec<f64> = match (mode, tensor_split.is_empty()) {
            (SplitMode::None, _) => (0..n_gpus).map(|d| f64::from(d == main)).collect(),
            (_, false) => (0..n_gpus)
                .map(|d| tensor_split.get(d).map_or(0.0, |&p| f64::from(p)))
                .collect(),
            (_, true) if capacity.iter().all(Option::is_some) => {
                capacity.iter().flatten().map(|&c| c as f64).collect()
            }
            (_, true) => vec![1.0; n_gpus],
        };
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(Error::invalid(
                "the tensor split gives every device a share of zero",
            ));
        }
        Ok(GpuSplit {
            mode,
            main,
            shares: weights.iter().map(|w| w / total).collect(),
        })
    }

    /// The split mode.
    pub fn mode(&self) -> SplitMode {
        self.mode
    }

    /// The GPU that holds what is not split, and gathers row-split results.
    pub fn main(&self) -> usize {
        self.main
    }

    /// Each GPU's share, summing to 1.
    pub fn shares(&self) -> &[f64] {
        &self.shares
    }

    /// Where the cumulative shares end, one per GPU (the last is 1).
    fn bounds(&self) -> Vec<f64> {
        let mut sum = 0.0;
        self.shares
            .iter()
            .map(|s| {
                sum += s;
                sum
            })
            .collect()
    }
}

/// Row-split boundaries are rounded to this many rows, so no GPU gets a
/// sliver of a matrix.
const ROW_ALIGN: usize = 16;

/// Where one weight lives: whole on a backend, or rows cut over several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// The whole tensor on this backend.
    On(usize),
    /// Row ranges (of dimension 1), each on its backend, in row order.
    Rows(Vec<(usize, Range<usize>)>),
}

/// The backend of every layer, the embedding and the output head.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerPlacement {
    layers: Vec<usize>,
    input: usize,
    output: usize,
    io_offloaded: bool,
    n_offloaded: usize,
    /// Row mode: the GPUs' cumulative shares.
    row_bounds: Option<Vec<f64>>,
    /// The CPU's backend index.
    host: usize,
}

/// A mixture-of-experts layer's stacked expert matrices (`ffn_*_exps`).
fn is_expert_stack(name: &str) -> bool {
    name.ends_with("_exps.weight")
}

/// Weights that row mode cuts: the matrices every layer multiplies by, and
/// an untied output head.
fn is_row_split_matrix(name: &str) -> bool {
    const MATRICES: [&str; 7] = [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ];
    name == "output.weight"
        || name
            .strip_suffix(".weight")
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(_, m)| MATRICES.contains(&m))
}

/// The layer number of a `blk.N.*` tensor.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

impl LayerPlacement {
    /// Places `n_layer` layers over `n_gpus` GPUs and the CPU. `n_gpu_layers`
    /// of `None` offloads everything. With no GPU everything is on backend 0.
    pub fn new(
        n_layer: usize,
        n_gpu_layers: Option<usize>,
        tied_output: bool,
        n_gpus: usize,
        split: &GpuSplit,
    ) -> LayerPlacement {
        let host = n_gpus;
        let n = match n_gpus {
            0 => 0,
            _ => n_gpu_layers.map_or(n_layer + 1, |n| n.min(n_layer + 1)),
        };
        let n_offloaded = n.min(n_layer);
        let first = n_layer - n_offloaded;
        let bounds = split.bounds();
        let last_gpu = split.shares.iter().rposition(|&s| s > 0.0).unwrap_or(0);
        // llama.cpp: a layer goes to the first GPU whose cumulative share
        // exceeds the layer's position among the offloaded layers.
        let gpu_of = |i: usize| match split.mode {
            SplitMode::Row => split.main,
            _ => {
                let at = i as f64 / n_offloaded.max(1) as f64;
                bounds.iter().position(|&b| b > at).unwrap_or(last_gpu)
            }
        };
        let layers: Vec<usize> = (0..n_layer)
            .map(|il| {
                if il >= first {
                    gpu_of(il - first)
                } else {
                    host
                }
            })
            .collect();
        let io_offloaded = n > n_layer;
        let output = match (io_offloaded, split.mode) {
            (false, _) => host,
            (true, SplitMode::Row) => split.main,
            (true, _) => last_gpu,
        };
        // The embedding stays with the output it is tied to, else with the
        // first layer.
        let input = match (io_offloaded, tied_output) {
            (false, _) => host,
            (true, true) => output,
            (true, false) => layers.first().copied().unwrap_or(output),
        };
        LayerPlacement {
            layers,
            input,
            output,
            io_offloaded,
            n_offloaded: if n_gpus == 0 { 0 } else { n_offloaded },
            row_bounds: (split.mode == SplitMode::Row && n_gpus > 1).then_some(bounds),
            host,
        }
    }

    /// Layers on a GPU.
    pub fn offloaded_layers(&self) -> usize {
        self.n_offloaded
    }

    /// The backend of layer `il` (and of its KV cache).
    pub fn layer(&self, il: usize) -> usize {
        self.layers.get(il).copied().unwrap_or(self.output)
    }

    /// Where the tensor called `name`, of `bytes` bytes, lives: as
    /// [`LayerPlacement::tensor`] says, but an expert stack larger than
    /// its backend's ops can read stays with the CPU, which multiplies it
    /// there (llama.cpp's `--cpu-moe`), instead of being copied to it for
    /// every product.
    pub fn sized_tensor(
        &self,
        name: &str,
        n_rows: usize,
        bytes: usize,
        max_tensor: &dyn Fn(usize) -> usize,
    ) -> Home {
        match self.tensor(name, n_rows) {
            Home::On(b) if is_expert_stack(name) && bytes > max_tensor(b) => Home::On(self.host),
            home => home,
        }
    }

    /// Where the tensor called `name`, with `n_rows` rows, lives: `blk.N.*`
    /// follows layer N (its matrices cut by rows in row mode), the token
    /// embedding and the output head their own placement.
    pub fn tensor(&self, name: &str, n_rows: usize) -> Home {
        let (backend, offloaded) = match layer_of(name) {
            // A file may name any layer number (`blk.18446744073709551615.x`).
            Some(il) => (
                self.layer(il),
                il.saturating_add(self.n_offloaded) >= self.layers.len(),
            ),
            None if name == "token_embd.weight" => (self.input, false),
            None => (self.output, self.io_offloaded),
        };
        match &self.row_bounds {
            Some(bounds) if offloaded && is_row_split_matrix(name) => {
                Home::Rows(row_ranges(bounds, n_rows))
            }
            _ => Home::On(backend),
        }
    }
}

/// `n_rows` cut at the cumulative shares (rounded to [`ROW_ALIGN`]); GPUs
/// whose range is empty get nothing.
fn row_ranges(bounds: &[f64], n_rows: usize) -> Vec<(usize, Range<usize>)> {
    let mut start = 0;
    let mut out = Vec::new();
    for (gpu, &b) in bounds.iter().enumerate() {
        let end = if gpu + 1 == bounds.len() {
            n_rows
        } else {
            let aligned = (b * n_rows as f64 / ROW_ALIGN as f64).round() as usize * ROW_ALIGN;
            aligned.clamp(start, n_rows)
        };
        if end > start {
            out.push((gpu, start..end));
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(n_layer: usize, ngl: Option<usize>, n_gpus: usize) -> LayerPlacement {
        LayerPlacement::new(n_layer, ngl, true, n_gpus, &GpuSplit::single())
    }

    fn on(p: &LayerPlacement, name: &str) -> usize {
        match p.tensor(name, 64) {
            Home::On(b) => b,
            rows => panic!("{name} is split: {rows:?}"),
        }
    }

    #[test]
    fn expert_stacks_too_large_for_a_gpu_stay_on_the_cpu() {
        let p = single(4, None, 1);
        let limit = |b: usize| if b == 0 { 1000 } else { usize::MAX };
        let home = |name: &str, bytes: usize| match p.sized_tensor(name, 64, bytes, &limit) {
            Home::On(b) => b,
            rows => panic!("{name} is split: {rows:?}"),
        };
        assert_eq!(home("blk.3.ffn_up_exps.weight", 1000), 0);
        assert_eq!(home("blk.3.ffn_up_exps.weight", 1001), 1);
        assert_eq!(home("blk.3.ffn_up.weight", 1001), 0);
    }

    #[test]
    fn last_layers_go_to_the_gpu() {
        let p = single(30, Some(10), 1);
        assert_eq!(p.offloaded_layers(), 10);
        assert_eq!(on(&p, "blk.19.attn_q.weight"), 1);
        assert_eq!(on(&p, "blk.20.attn_q.weight"), 0);
        assert_eq!(on(&p, "token_embd.weight"), 1);
        assert_eq!(on(&p, "output_norm.weight"), 1);

        let all_layers = single(30, Some(30), 1);
        assert_eq!(on(&all_layers, "blk.0.ffn_up.weight"), 0);
        assert_eq!(on(&all_layers, "token_embd.weight"), 1);

        for everything in [single(30, Some(99), 1), single(30, None, 1)] {
            assert_eq!(everything.offloaded_layers(), 30);
            assert_eq!(on(&everything, "token_embd.weight"), 0);
        }
        let none = single(30, Some(0), 1);
        assert_eq!(none.offloaded_layers(), 0);
        assert_eq!(on(&none, "blk.29.ffn_up.weight"), 1);
        let cpu_only = single(30, Some(5), 0);
        assert_eq!(on(&cpu_only, "blk.0.ffn_up.weight"), 0);
        assert_eq!(cpu_only.offloaded_layers(), 0);
    }

    /// Layer numbers in tensor names come from the file: the largest one
    /// is placed like any layer past the model's, without overflowing.
    #[test]
    fn any_layer_number_places_without_overflow() {
        let split = GpuSplit::new(SplitMode::Row, 0, &[1.0, 1.0], &[None, None]).unwrap();
        let p = LayerPlacement::new(4, Some(2), false, 2, &split);
        let huge = format!("blk.{}.attn_q.weight", usize::MAX);
        assert_eq!(p.tensor(&huge, 64), p.tensor("blk.99.attn_q.weight", 64));
        assert!(matches!(p.tensor(&huge, 64), Home::Rows(_)));
    }

    #[test]
    fn layer_mode_follows_the_tensor_split() {
        let split = GpuSplit::new(SplitMode::Layer, 0, &[3.0, 1.0], &[None, None]).unwrap();
        let p = LayerPlacement::new(8, None, false, 2, &split);
        let layers: Vec<usize> = (0..8).map(|il| p.layer(il)).collect();
        assert_eq!(layers, [0, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(on(&p, "token_embd.weight"), 0);
        assert_eq!(on(&p, "output.weight"), 1);

        // Offloading 4 of 8 layers spreads those 4; the rest stay on the CPU (2).
        let p = LayerPlacement::new(8, Some(4), false, 2, &split);
        let layers: Vec<usize> = (0..8).map(|il| p.layer(il)).collect();
        assert_eq!(layers, [2, 2, 2, 2, 0, 0, 0, 1]);
        assert_eq!(on(&p, "output.weight"), 2);

        // Without a tensor split, shares follow memory; a zero share gets nothing.
        let by_memory = GpuSplit::new(SplitMode::Layer, 0, &[], &[Some(100), Some(300)]).unwrap();
        assert_eq!(by_memory.shares(), [0.25, 0.75]);
        let skip = GpuSplit::new(SplitMode::Layer, 0, &[0.0, 1.0], &[None, None]).unwrap();
        let p = LayerPlacement::new(4, None, true, 2, &skip);
        assert!((0..4).all(|il| p.layer(il) == 1));
        assert_eq!(on(&p, "token_embd.weight"), 1);
    }

    #[test]
    fn none_mode_uses_the_main_gpu_only() {
        let split = GpuSplit::new(SplitMode::None, 1, &[3.0, 1.0], &[None, None]).unwrap();
        let p = LayerPlacement::new(6, None, true, 2, &split);
        assert!((0..6).all(|il| p.layer(il) == 1));
        assert_eq!(on(&p, "token_embd.weight"), 1);
        assert_eq!(on(&p, "blk.3.ffn_down.weight"), 1);
    }

    #[test]
    fn row_mode_cuts_matrices_and_keeps_the_rest_on_the_main_gpu() {
        let split = GpuSplit::new(SplitMode::Row, 1, &[3.0, 1.0], &[None, None]).unwrap();
        let p = LayerPlacement::new(4, None, false, 2, &split);
        assert!((0..4).all(|il| p.layer(il) == 1));
        assert_eq!(
            p.tensor("blk.2.ffn_up.weight", 1536),
            Home::Rows(vec![(0, 0..1152), (1, 1152..1536)])
        );
        assert_eq!(
            p.tensor("output.weight", 100),
            Home::Rows(vec![(0, 0..80), (1, 80..100)])
        );
        assert_eq!(on(&p, "blk.2.attn_norm.weight"), 1);
        assert_eq!(on(&p, "token_embd.weight"), 1);
        // A layer left on the CPU is not cut.
        let p = LayerPlacement::new(4, Some(2), false, 2, &split);
        assert_eq!(on(&p, "blk.0.attn_q.weight"), 2);
        assert!(matches!(p.tensor("blk.3.attn_q.weight", 64), Home::Rows(_)));
        // A share too small for one aligned block of rows gets no part.
        assert_eq!(row_ranges(&[0.99, 1.0], 64), vec![(0, 0..64)]);
    }

    #[test]
    fn bad_splits_are_errors() {
        let two = [None, None];
        let err = |r: Result<GpuSplit>| r.unwrap_err().to_string();
        assert!(
            err(GpuSplit::new(SplitMode::Layer, 0, &[1.0, 1.0, 1.0], &two))
                .contains("3 entries for 2 devices")
        );
        assert!(
            err(GpuSplit::new(SplitMode::Layer, 0, &[1.0, -1.0], &two)).contains("not negative")
        );
        assert!(err(GpuSplit::new(SplitMode::Row, 0, &[0.0, 0.0], &two)).contains("zero"));
        assert!(err(GpuSplit::new(SplitMode::Layer, 2, &[], &two)).contains("main GPU 2"));
        assert!(GpuSplit::new(SplitMode::Layer, 0, &[f32::NAN], &two).is_err());
    }
}
