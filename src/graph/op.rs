//! The operations a graph node can perform, each with its parameters.
//!
//! Parameters live here and nowhere else: the CPU reference and every GPU
//! kernel read them from the node, so no constant is repeated in a kernel.

/// How rope pairs up the values it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Adjacent values `(x[2i], x[2i+1])` form a pair (llama).
    Normal,
    /// Values `i` and `i + n_dims/2` form a pair (GPT-NeoX).
    Neox,
}

/// Rotary position embedding parameters, with YaRN context extension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Pairing of the rotated values.
    pub mode: RopeMode,
    /// Leading values of each row that are rotated (the rest pass through).
    pub n_dims: usize,
    /// Base of the rotation frequencies (theta).
    pub freq_base: f32,
    /// Position scale: 1 / (context extension factor).
    pub freq_scale: f32,
    /// YaRN: mix of extrapolated and interpolated angles (0 disables YaRN).
    pub ext_factor: f32,
    /// YaRN: magnitude scale of the rotated values.
    pub attn_factor: f32,
    /// YaRN: rotations per context below which dims are interpolated.
    pub beta_fast: f32,
    /// YaRN: rotations per context above which dims are extrapolated.
    pub beta_slow: f32,
    /// Context length the model was trained with.
    pub n_ctx_orig: usize,
}

impl RopeParams {
    /// Plain rope (no YaRN): the values llama-family models use.
    pub fn new(mode: RopeMode, n_dims: usize, freq_base: f32) -> RopeParams {
        RopeParams {
            mode,
            n_dims,
            freq_base,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            n_ctx_orig: 0,
        }
    }

    /// First and last dimension of YaRN's ramp between extrapolation and
    /// interpolation (ggml_rope_yarn_corr_dims).
    pub fn yarn_corr_dims(&self) -> [f32; 2] {
        // The dimension at which a frequency makes `n_rot` rotations over the
        // original context.
        let corr_dim = |n_rot: f32| {
            self.n_dims as f32
                * (self.n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * self.freq_base.ln())
        };
        let start = corr_dim(self.beta_fast).floor();
        let end = corr_dim(self.beta_slow).ceil();
        [start.max(0.0), end.min(self.n_dims as f32 - 1.0)]
    }

    /// YaRN's magnitude scale of the rotated values.
    pub fn yarn_mscale(&self) -> f32 {
        if self.ext_factor != 0.0 {
            self.attn_factor * (1.0 + 0.1 * (1.0 / self.freq_scale).ln())
        } else {
            self.attn_factor
        }
    }
}

/// One operation of a graph node; sources are in [`super::Node::src`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// A leaf whose bytes are set from outside (weights, token ids, caches).
    Input,
    /// A window into `src[0]`'s bytes: view, reshape, permute, transpose. Costs nothing.
    View,
    /// Uninitialised storage that later ops fill through views of it (`cpy`
    /// into a window), like `ggml_new_tensor`. Computes nothing; unlike an
    /// input its bytes are reused once its last reader has run.
    Empty,
    /// A copy of `src[0]`'s bytes (same layout) on another backend: the
    /// scheduler fills it before the split that reads it; backends compute nothing.
    Transfer,
    /// `src[0] + src[1]`, `src[1]` repeated (broadcast) to `src[0]`'s shape.
    Add,
    /// `src[0] * src[1]`, broadcast like [`Op::Add`].
    Mul,
    /// `src[0] * s`.
    Scale(f32),
    /// `x * sigmoid(x)`.
    Silu,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation.
    Gelu,
    /// `tanh(x)`.
    Tanh,
    /// Row softmax of `src[0] * scale (+ src[1])`; the optional mask `src[1]` is
    /// broadcast over dims 2 and 3.
    SoftMax {
        /// Applied to the input before the mask is added.
        scale: f32,
    },
    /// `(x - mean) / sqrt(var + eps)` per row.
    Norm {
        /// Added to the variance.
        eps: f32,
    },
    /// `x / sqrt(mean(x^2) + eps)` per row.
    RmsNorm {
        /// Added to the mean square.
        eps: f32,
    },
    /// Sets element `(i0, i1)` to -inf where `i0 > n_past + i1` (causal mask).
    DiagMaskInf {
        /// Number of positions already in the cache.
        n_past: usize,
    },
    /// ggml mul_mat: `src[0]` `[K, M, ..]` times `src[1]` `[K, N, ..]` gives `[M, N, ..]`;
    /// `src[0]` is broadcast over dims 2 and 3 of `src[1]`.
    MulMat,
    /// ggml mul_mat_id, the experts of a mixture-of-experts layer: expert
    /// matrices `src[0]` `[K, M, n_expert]`, activations `src[1]` `[K, X,
    /// T]` and the i32 expert ids `src[2]` `[n_used, T]` give f32 `[M,
    /// n_used, T]`, column `(s, t)` the product of expert `src[2][s, t]`
    /// with activation column `(s % X, t)` (X is 1, every slot reading the
    /// token's one column, or `n_used`).
    MulMatId,
    /// Rows of `src[0]` picked by the i32 indices in `src[1]`, as f32.
    GetRows,
    /// Rotary embedding of `src[0]` at the i32 positions `src[1]` (one per
    /// dim-2 index); pair `i`'s angle divided by `src[2][i]` where the
    /// optional frequency factors `src[2]` are given.
    Rope(RopeParams),
    /// Copies `src[0]`'s elements, in order, into this node's layout, converting
    /// the type (cpy, cont and cast).
    Cpy,
    /// ggml_set_rows: row `i` of `src[0]` (its elements in order, taken as
    /// rows of the destination's row length) is copied, converting the type, into row
    /// `src[1][i]` (i32) of the 2-D tensor this node writes (its `view_of`);
    /// other rows keep their bytes. The KV cache is written this way, so a
    /// decode graph does not change with the position.
    SetRows,
    /// Attention in one op (ggml_flash_attn_ext without ALiBi or softcap):
    /// `softmax(scale * K^T q + mask) V` per query and head, for q `src[0]`
    /// `[D, n_q, n_head, 1]`, K `src[1]` `[D, n_kv, n_head_kv, 1]`, V
    /// `src[2]` `[Dv, n_kv, n_head_kv, 1]` (query head `h` reads KV head
    /// `h / (n_head / n_head_kv)`) and an optional mask `src[3]` `[n_kv, >=
    /// n_q]`; the result is `[Dv, n_head, n_q, 1]`, heads side by side.
    FlashAttn {
        /// Applied to the scores before the mask is added.
        scale: f32,
    },
    /// ggml_argmax: the index of the largest value of each row of `src[0]`
    /// (f32 `[n, rows]`) as i32 `[rows]`; the lowest index wins a tie, as
    /// in the greedy sampler.
    Argmax,
    /// The `k` best entries of each chunk of `chunk` entries of `src[0]`,
    /// best first, as f32 `(value, index)` pairs `[2, k, chunks]`: the
    /// sampler's top-k on the device. Entries are the values of a row `[n,
    /// 1]` or of rows `[chunk, rows]` (indices are positions in the row)
    /// or, with `pairs`, the pairs of an
    /// earlier `TopK` (those with a negative index are padding). Larger
    /// values come first, the lower index on a tie (+0 and -0 tie); NaN is
    /// never picked; a chunk with fewer than `k` entries is padded with
    /// `(-inf, -1)`.
    TopK {
        /// Entries kept per chunk.
        k: usize,
        /// Entries per chunk.
        chunk: usize,
        /// Whether the entries are pairs of an earlier `TopK`.
        pairs: bool,
    },
    /// A token drawn from `TopK`'s best-first pairs `src[0]` `[2, k]` with
    /// the settings `src[1]`, f32 `[4]`: temperature (> 0), top-p, ln min-p
    /// (-inf: off) and a uniform draw in `[0, 1)`, through llama.cpp's chain
    /// top-p → min-p → temperature → draw, in f32; i32 `[1]`.
    SampleTopK,
}

impl Op {
    /// A short lower-case name, as ggml prints ops.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input => "input",
            Op::View => "view",
            Op::Empty => "empty",
            Op::Transfer => "transfer",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Scale(_) => "scale",
            Op::Silu => "silu",
            Op::Relu => "relu",
            Op::Gelu => "gelu",
            Op::Tanh => "tanh",
            Op::SoftMax { .. } => "soft_max",
            Op::Norm { .. } => "norm",
            Op::RmsNorm { .. } => "rms_norm",
            Op::DiagMaskInf { .. } => "diag_mask_inf",
            Op::MulMat => "mul_mat",
            Op::MulMatId => "mul_mat_id",
            Op::GetRows => "get_rows",
            Op::Rope(_) => "rope",
            Op::Cpy => "cpy",
            Op::SetRows => "set_rows",
            Op::FlashAttn { .. } => "flash_attn_ext",
            Op::Argmax => "argmax",
            Op::TopK { .. } => "top_k",
            Op::SampleTopK => "sample_top_k",
        }
    }

    /// Whether the node computes nothing (its bytes come from elsewhere).
    pub fn is_passive(&self) -> bool {
        matches!(self, Op::Input | Op::View | Op::Empty | Op::Transfer)
    }
}
