//! Which backend holds each layer, as llama.cpp's `n_gpu_layers`: the last
//! N layers (weights and KV cache) on the GPU, the others on the CPU. The
//! token embedding and the output head go to the GPU only when N exceeds the
//! layer count (llama.cpp's "+1 for the output"); then the whole model is
//! one GPU split.

/// Backend indices for the tensors of a model: the GPU is backend 0, the
/// CPU the last one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerPlacement {
    first_offloaded: usize,
    n_layer: usize,
    io_offloaded: bool,
    host: usize,
}

impl LayerPlacement {
    /// `n_gpu_layers` of `None` offloads everything; with one backend
    /// everything is on it.
    pub fn new(n_layer: usize, n_gpu_layers: Option<usize>, n_backends: usize) -> LayerPlacement {
        let host = n_backends.saturating_sub(1);
        let n = match host {
            0 => n_layer + 1,
            _ => n_gpu_layers.map_or(n_layer + 1, |n| n.min(n_layer + 1)),
        };
        LayerPlacement {
            first_offloaded: n_layer - n.min(n_layer),
            n_layer,
            io_offloaded: n > n_layer,
            host,
        }
    }

    /// Layers on the GPU (none when there is only one backend).
    pub fn offloaded_layers(&self) -> usize {
        match self.host {
            0 => 0,
            _ => self.n_layer - self.first_offloaded,
        }
    }

    /// The backend of layer `il`.
    pub fn layer(&self, il: usize) -> usize {
        if il >= self.first_offloaded {
            0
        } else {
            self.host
        }
    }

    /// The backend of the tensor called `name`: `blk.N.*` follows layer N,
    /// anything else (embedding, output) the input/output placement.
    pub fn tensor(&self, name: &str) -> usize {
        let layer = name
            .strip_prefix("blk.")
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse::<usize>().ok());
        match layer {
            Some(il) => self.layer(il),
            None if self.io_offloaded => 0,
            None => self.host,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_layers_go_to_the_gpu() {
        let p = LayerPlacement::new(30, Some(10), 2);
        assert_eq!(p.offloaded_layers(), 10);
        assert_eq!(p.tensor("blk.19.attn_q.weight"), 1);
        assert_eq!(p.tensor("blk.20.attn_q.weight"), 0);
        assert_eq!(p.tensor("token_embd.weight"), 1);
        assert_eq!(p.tensor("output_norm.weight"), 1);

        let all_layers = LayerPlacement::new(30, Some(30), 2);
        assert_eq!(all_layers.tensor("blk.0.ffn_up.weight"), 0);
        assert_eq!(all_layers.tensor("token_embd.weight"), 1);

        for everything in [
            LayerPlacement::new(30, Some(99), 2),
            LayerPlacement::new(30, None, 2),
        ] {
            assert_eq!(everything.offloaded_layers(), 30);
            assert_eq!(everything.tensor("token_embd.weight"), 0);
        }
        let none = LayerPlacement::new(30, Some(0), 2);
        assert_eq!(none.offloaded_layers(), 0);
        assert_eq!(none.tensor("blk.29.ffn_up.weight"), 1);
        let cpu_only = LayerPlacement::new(30, Some(5), 1);
        assert_eq!(cpu_only.tensor("blk.0.ffn_up.weight"), 0);
        assert_eq!(cpu_only.offloaded_layers(), 0);
    }
}
