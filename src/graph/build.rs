//! Builder functions: each checks its operands and appends one node, so a
//! model graph reads like the math (`let h = g.mul_mat(w, x)?`).

use super::{shape4, Graph, Op, RopeParams, TensorId};
use crate::tensor::{Layout, MAX_DIMS};
use crate::{DType, Error, Result};

fn float_type(g: &Graph, id: TensorId, op: &str) -> Result<DType> {
    match g.layout(id).dtype {
        t @ (DType::F32 | DType::F16) => Ok(t),
        t => Err(Error::shape(format!(
            "{op}: '{}' is {t}; f32 or f16 expected",
            g.node(id).name
        ))),
    }
}

/// A type that elementwise ops and copies read and write: the float
/// types, bf16 included.
fn elementwise_type(g: &Graph, id: TensorId, op: &str) -> Result<DType> {
    match g.layout(id).dtype {
        t @ (DType::F32 | DType::F16 | DType::BF16) => Ok(t),
        t => Err(Error::shape(format!(
            "{op}: '{}' is {t}; f32, f16 or bf16 expected",
            g.node(id).name
        ))),
    }
}

/// Checks that `a` can be copied into a tensor of type `to`: between the
/// elementwise types, between tensors of one block type, from a block
/// type to f32, or from an elementwise type to a 32-value block type.
fn copy_types(g: &Graph, a: TensorId, to: DType) -> Result<()> {
    let from = g.layout(a).dtype;
    let elementwise = |t: DType| matches!(t, DType::F32 | DType::F16 | DType::BF16);
    let blocks = from.is_quantized() && (to == from || to == DType::F32);
    // As llama.cpp's GPU backends: floats quantize to the 32-value block types.
    let quantizing = elementwise(from) && to.quantizes_by_copy();
    // As ggml: i32 values copy exactly, convert to f32, and f32 truncates to i32.
    let ints = matches!(
        (from, to),
        (DType::I32, DType::I32) | (DType::I32, DType::F32) | (DType::F32, DType::I32)
    );
    if (elementwise(from) && elementwise(to)) || blocks || quantizing || ints {
        return Ok(());
    }
    Err(Error::shape(format!(
        "cpy: '{}' from {from} to {to} is not supported (f32, f16 and bf16 convert, and \
         quantize to q4_0, q4_1, q5_0, q5_1 and q8_0; i32 copies to i32 and f32, and from \
         f32; a quantized tensor copies to its own type or to f32)",
        g.node(a).name
    )))
}

fn expect_type(g: &Graph, id: TensorId, want: DType, op: &str) -> Result<()> {
    let t = g.layout(id).dtype;
    if t != want {
        return Err(Error::shape(format!(
            "{op}: '{}' is {t}; {want} expected",
            g.node(id).name
        )));
    }
    Ok(())
}

/// Entries per chunk of the device sampler's top-k ([`Graph::sample_into`]):
/// one workgroup's share on a GPU.
pub const TOP_K_CHUNK: usize = 4096;

/// Most candidates [`Graph::sample_into`] keeps (top-k), so that a chunk's
/// pairs always shrink to one chunk.
pub const MAX_SAMPLE_TOP_K: usize = 64;

/// The rows of argmax's source: a 2-D f32 tensor of non-empty rows.
fn argmax_rows(g: &Graph, a: TensorId) -> Result<usize> {
    g.check_ids(&[a])?;
    expect_type(g, a, DType::F32, "argmax")?;
    let ne = g.layout(a).ne;
    if ne[0] == 0 || ne[2] != 1 || ne[3] != 1 {
        return Err(Error::shape(format!(
            "argmax: {ne:?} is not a 2-D tensor of non-empty rows"
        )));
    }
    Ok(ne[1])
}

impl Graph {
    fn op_node(
        &mut self,
        op: Op,
        src: Vec<TensorId>,
        dtype: DType,
        ne: [usize; MAX_DIMS],
    ) -> Result<TensorId> {
        let layout = Layout::contiguous(dtype, ne)?;
        let name = format!("{}-{}", op.name(), self.len());
        Ok(self.push(name, op, src, layout))
    }

    fn view_node(&mut self, src: TensorId, layout: Layout, offset: usize) -> Result<TensorId> {
        let parent = self.layout(src);
        let end = offset.checked_add(layout.span_bytes());
        if end.is_none_or(|end| end > parent.span_bytes()) {
            return Err(Error::shape(format!(
                "view of {} bytes at offset {offset} runs past the {} bytes of '{}'",
                layout.span_bytes(),
                parent.span_bytes(),
                self.node(src).name
            )));
        }
        let name = format!("{} (view)", self.node(src).name);
        let id = self.push(name, Op::View, vec![src], layout);
        self.node_mut(id).view_of = Some((src, offset));
        Ok(id)
    }

    /// A strided window of `a`: shape `ne`, byte strides `nb[1..]`, starting `offset` bytes in.
    pub fn view(
        &mut self,
        a: TensorId,
        ne: &[usize],
        nb: &[usize],
        offset: usize,
    ) -> Result<TensorId> {
        self.check_ids(&[a])?;
        let ne = shape4(ne)?;
        let dtype = self.layout(a).dtype;
        let mut strides = [dtype.block_bytes(), 0, 0, 0];
        for i in 1..MAX_DIMS {
            strides[i] = match nb.get(i - 1) {
                Some(&s) => s,
                None => {
                    let n = match i {
                        1 => ne[0] / dtype.block_elems(),
                        _ => ne[i - 1],
                    };
                    strides[i - 1].checked_mul(n).ok_or_else(|| {
                        Error::shape(format!("view {ne:?} with strides {nb:?} overflows"))
                    })?
                }
            };
        }
        let layout = Layout::strided(dtype, ne, strides)?;
        self.view_node(a, layout, offset)
    }

    /// The same contiguous bytes with another shape.
    pub fn reshape(&mut self, a: TensorId, ne: &[usize]) -> Result<TensorId> {
        self.check_ids(&[a])?;
        let layout = self.layout(a).reshape(shape4(ne)?)?;
        self.view_node(a, layout, 0)
    }

    /// ggml_permute: dimension `i` of `a` becomes dimension `axes[i]`.
    pub fn permute(&mut self, a: TensorId, axes: [usize; MAX_DIMS]) -> Result<TensorId> {
        self.check_ids(&[a])?;
        let layout = self.layout(a).permute(axes)?;
        self.view_node(a, layout, 0)
    }

    /// Swaps dimensions 0 and 1.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.permute(a, [1, 0, 2, 3])
    }

    /// Copies `a` into `b`'s bytes (converting between f32, f16 and bf16,
    /// moving blocks between tensors of one quantized type, dequantizing to
    /// f32, or quantizing floats to q4_0, q4_1, q5_0, q5_1 or q8_0, as the
    /// CPU reference's `quant::quantize_row` does); the result is `b` after
    /// the copy.
    pub fn cpy(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.check_ids(&[a, b])?;
        copy_types(self, a, self.layout(b).dtype)?;
        let (la, lb) = (*self.layout(a), *self.layout(b));
        if la.n_elements() != lb.n_elements() {
            return Err(Error::shape(format!(
                "cpy: {:?} and {:?} differ in element count",
                la.ne, lb.ne
            )));
        }
        let name = format!("cpy-{}", self.len());
        let id = self.push(name, Op::Cpy, vec![a], lb);
        self.node_mut(id).view_of = Some((b, 0));
        Ok(id)
    }

    /// Copies the rows of `src` into rows `idx` (i32) of the 2-D tensor `dst`
    /// (converting f32/f16); the result is `dst` after the copy. `src`'s
    /// elements, in order (any strides), make rows of `dst`'s row length,
    /// one per index.
    pub fn set_rows(&mut self, dst: TensorId, src: TensorId, idx: TensorId) -> Result<TensorId> {
        self.check_ids(&[dst, src, idx])?;
        float_type(self, src, "set_rows source")?;
        float_type(self, dst, "set_rows destination")?;
        expect_type(self, idx, DType::I32, "set_rows indices")?;
        let (ld, ls, li) = (*self.layout(dst), *self.layout(src), *self.layout(idx));
        if ld.ne[2] != 1 || ld.ne[3] != 1 || ld.nb[0] != ld.dtype.block_bytes() {
            return Err(Error::shape(format!(
                "set_rows: the destination {:?} must be 2-D with dense rows",
                ld.ne
            )));
        }
        if !li.is_contiguous() || ls.n_elements() != ld.ne[0] * li.n_elements() {
            return Err(Error::shape(format!(
                "set_rows: {} contiguous indices {:?} need a source of {} rows of {}, got {:?}",
                li.n_elements(),
                li.ne,
                li.n_elements(),
                ld.ne[0],
                ls.ne
            )));
        }
        let name = format!("set_rows-{}", self.len());
        let id = self.push(name, Op::SetRows, vec![src, idx], ld);
        self.node_mut(id).view_of = Some((dst, 0));
        Ok(id)
    }

    /// Attention of queries `q` `[D, n_q, n_head]` over keys `k` `[D, n_kv,
    /// n_head_kv]` and values `v` `[Dv, n_kv, n_head_kv]` (any strides;
    /// f32 or f16 K and V), with an optional additive `mask` `[n_kv, >= n_q]`:
    /// `[Dv, n_head, n_q]` (see [`Op::FlashAttn`]).
    pub fn flash_attn(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        scale: f32,
    ) -> Result<TensorId> {
        self.check_ids(&[q, k, v])?;
        self.check_ids(mask.as_slice())?;
        expect_type(self, q, DType::F32, "flash_attn q")?;
        float_type(self, k, "flash_attn k")?;
        float_type(self, v, "flash_attn v")?;
        let (nq, nk, nv) = (self.layout(q).ne, self.layout(k).ne, self.layout(v).ne);
        let fits = nq[0] == nk[0]
            && nk[1] == nv[1]
            && nk[2] == nv[2]
            && nk[2] > 0
            && nq[2] % nk[2] == 0
            && nq[3] == 1
            && nk[3] == 1
            && nv[3] == 1;
        if !fits {
            return Err(Error::shape(format!(
                "flash_attn: q {nq:?}, k {nk:?}, v {nv:?} do not fit"
            )));
        }
        let mut src = vec![q, k, v];
        if let Some(m) = mask {
            float_type(self, m, "flash_attn mask")?;
            let nm = self.layout(m).ne;
            if nm[0] != nk[1] || nm[1] < nq[1] || nm[2] * nm[3] != 1 {
                return Err(Error::shape(format!(
                    "flash_attn: mask {nm:?} does not fit {} keys and {} queries",
                    nk[1], nq[1]
                )));
            }
            src.push(m);
        }
        self.op_node(
            Op::FlashAttn { scale },
            src,
            DType::F32,
            [nv[0], nq[2], nq[1], 1],
        )
    }

    /// `a` converted to `dtype` in a new contiguous tensor.
    pub fn cast(&mut self, a: TensorId, dtype: DType) -> Result<TensorId> {
        self.check_ids(&[a])?;
        copy_types(self, a, dtype)?;
        let ne = self.layout(a).ne;
        self.op_node(Op::Cpy, vec![a], dtype, ne)
    }

    /// `a` copied into a new contiguous tensor of the same type.
    pub fn cont(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        let dtype = self.layout(a).dtype;
        self.cast(a, dtype)
    }

    fn binary(&mut self, op: Op, a: TensorId, b: TensorId) -> Result<TensorId> {
        let ta = elementwise_type(self, a, op.name())?;
        elementwise_type(self, b, op.name())?;
        let (na, nb) = (self.layout(a).ne, self.layout(b).ne);
        if (0..MAX_DIMS).any(|i| na[i] % nb[i] != 0) {
            return Err(Error::shape(format!(
                "{}: {nb:?} does not broadcast to {na:?}",
                op.name()
            )));
        }
        self.op_node(op, vec![a, b], ta, na)
    }

    /// `a + b`, `b` broadcast (repeated) over `a`.
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.check_ids(&[a, b])?;
        self.binary(Op::Add, a, b)
    }

    /// `a * b`, `b` broadcast (repeated) over `a`.
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.check_ids(&[a, b])?;
        self.binary(Op::Mul, a, b)
    }

    fn unary(&mut self, op: Op, a: TensorId) -> Result<TensorId> {
        let t = elementwise_type(self, a, op.name())?;
        let ne = self.layout(a).ne;
        self.op_node(op, vec![a], t, ne)
    }

    /// `a * s`.
    pub fn scale(&mut self, a: TensorId, s: f32) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.unary(Op::Scale(s), a)
    }

    /// `x * sigmoid(x)`.
    pub fn silu(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.unary(Op::Silu, a)
    }

    /// `max(x, 0)`.
    pub fn relu(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.unary(Op::Relu, a)
    }

    /// GELU (tanh approximation).
    pub fn gelu(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.unary(Op::Gelu, a)
    }

    /// `tanh(x)`.
    pub fn tanh(&mut self, a: TensorId) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.unary(Op::Tanh, a)
    }

    fn row_op(&mut self, op: Op, a: TensorId) -> Result<TensorId> {
        expect_type(self, a, DType::F32, op.name())?;
        let ne = self.layout(a).ne;
        self.op_node(op, vec![a], DType::F32, ne)
    }

    /// Layer normalization without weights.
    pub fn norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.row_op(Op::Norm { eps }, a)
    }

    /// RMS normalization without weights.
    pub fn rms_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.row_op(Op::RmsNorm { eps }, a)
    }

    /// Causal mask: -inf above the diagonal shifted by `n_past`.
    pub fn diag_mask_inf(&mut self, a: TensorId, n_past: usize) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.row_op(Op::DiagMaskInf { n_past }, a)
    }

    /// Row softmax of `a * scale + mask`; the mask has `a`'s row length, at least
    /// as many rows, and is broadcast over dims 2 and 3.
    pub fn soft_max(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        scale: f32,
    ) -> Result<TensorId> {
        self.check_ids(&[a])?;
        self.check_ids(mask.as_slice())?;
        expect_type(self, a, DType::F32, "soft_max")?;
        let na = self.layout(a).ne;
        let mut src = vec![a];
        if let Some(m) = mask {
            float_type(self, m, "soft_max mask")?;
            let nm = self.layout(m).ne;
            if nm[0] != na[0]
                || nm[1] < na[1]
                || !na[2].is_multiple_of(nm[2])
                || !na[3].is_multiple_of(nm[3])
            {
                return Err(Error::shape(format!(
                    "soft_max: mask {nm:?} does not fit {na:?}"
                )));
            }
            src.push(m);
        }
        self.op_node(Op::SoftMax { scale }, src, DType::F32, na)
    }

    /// ggml mul_mat: `a` `[K, M, A2, A3]` (weights) times `b` `[K, N, B2, B3]`
    /// (f32, f16 or bf16, computed in f32) gives f32 `[M, N, B2, B3]`; `a`
    /// is broadcast when `B2 % A2 == 0 && B3 % A3 == 0`.
    pub fn mul_mat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.check_ids(&[a, b])?;
        elementwise_type(self, b, "mul_mat")?;
        if self.layout(a).dtype == DType::I32 {
            return Err(Error::shape("mul_mat: i32 weights are not supported"));
        }
        let (na, nb) = (self.layout(a).ne, self.layout(b).ne);
        if na[0] != nb[0] || nb[2] % na[2] != 0 || nb[3] % na[3] != 0 {
            return Err(Error::shape(format!("mul_mat: {na:?} x {nb:?} do not fit")));
        }
        self.op_node(
            Op::MulMat,
            vec![a, b],
            DType::F32,
            [na[1], nb[1], nb[2], nb[3]],
        )
    }

    /// [`Op::MulMatId`]: expert matrices `experts` `[K, M, n_expert]`
    /// times activations `b` `[K, X, T]` (X is 1 or `n_used`), each column
    /// by the expert that the i32 `ids` `[n_used, T]` name; gives f32 `[M,
    /// n_used, T]`.
    pub fn mul_mat_id(
        &mut self,
        experts: TensorId,
        b: TensorId,
        ids: TensorId,
    ) -> Result<TensorId> {
        self.check_ids(&[experts, b, ids])?;
        elementwise_type(self, b, "mul_mat_id")?;
        expect_type(self, ids, DType::I32, "mul_mat_id expert ids")?;
        if self.layout(experts).dtype == DType::I32 {
            return Err(Error::shape("mul_mat_id: i32 experts are not supported"));
        }
        let (ne, nb, ni) = (
            self.layout(experts).ne,
            self.layout(b).ne,
            self.layout(ids).ne,
        );
        let [n_used, t] = [ni[0], ni[1]];
        let fits = ne[0] == nb[0]
            && ne[3] == 1
            && (nb[1] == 1 || nb[1] == n_used)
            && nb[2] == t
            && nb[3] == 1
            && ni[2] == 1
            && ni[3] == 1;
        if !fits {
            return Err(Error::shape(format!(
                "mul_mat_id: experts {ne:?}, activations {nb:?} and ids {ni:?} do not fit"
            )));
        }
        self.op_node(
            Op::MulMatId,
            vec![experts, b, ids],
            DType::F32,
            [ne[1], n_used, t, 1],
        )
    }

    /// ggml_argmax: the index of the largest value of each row of the 2-D
    /// f32 `a` `[n, rows]`, as i32 `[rows]`.
    pub fn argmax(&mut self, a: TensorId) -> Result<TensorId> {
        let rows = argmax_rows(self, a)?;
        self.op_node(Op::Argmax, vec![a], DType::I32, [rows, 1, 1, 1])
    }

    /// [`Graph::argmax`] written into `dst`, a contiguous i32 tensor of one
    /// element per row (such as a bound buffer that the next graph reads
    /// its token from); the result is `dst` after the write.
    pub fn argmax_into(&mut self, a: TensorId, dst: TensorId) -> Result<TensorId> {
        self.check_ids(&[dst])?;
        let rows = argmax_rows(self, a)?;
        expect_type(self, dst, DType::I32, "argmax destination")?;
        let ld = *self.layout(dst);
        if !ld.is_contiguous() || ld.n_elements() != rows {
            return Err(Error::shape(format!(
                "argmax: {rows} indices do not fill the destination {:?}",
                ld.ne
            )));
        }
        let name = format!("argmax-{}", self.len());
        let id = self.push(name, Op::Argmax, vec![a], ld);
        self.node_mut(id).view_of = Some((dst, 0));
        Ok(id)
    }

    /// [`Op::TopK`]: the `k` best entries of each chunk of `chunk` entries
    /// of the f32 row `a` `[n, 1]`, or of each row of `a` `[chunk, rows]`
    /// (indices within the row), or, with `pairs`, of an earlier top-k's
    /// pairs `[2, m, c]`; gives f32 `[2, k, chunks]`.
    pub fn top_k(&mut self, a: TensorId, k: usize, chunk: usize, pairs: bool) -> Result<TensorId> {
        self.check_ids(&[a])?;
        expect_type(self, a, DType::F32, "top_k")?;
        let l = self.layout(a);
        let entries = if pairs {
            (l.ne[0] == 2 && l.ne[3] == 1).then(|| l.ne[1] * l.ne[2])
        } else {
            match l.ne {
                [n, 1, 1, 1] => Some(n),
                [n, rows, 1, 1] if n == chunk => Some(n * rows),
                _ => None,
            }
        };
        let entries = entries
            .filter(|&n| n > 0 && l.is_contiguous())
            .ok_or_else(|| {
                Error::shape(format!(
                    "top_k: {:?} is not a contiguous row, rows of {chunk} or a top-k's pairs",
                    l.ne
                ))
            })?;
        if k == 0 || k > chunk / 2 {
            return Err(Error::shape(format!(
                "top_k: k {k} must be at least 1 and at most half the chunk of {chunk}"
            )));
        }
        let chunks = entries.div_ceil(chunk);
        self.op_node(
            Op::TopK { k, chunk, pairs },
            vec![a],
            DType::F32,
            [2, k, chunks, 1],
        )
    }

    /// The sampler on the device: top-k of the f32 row `logits` `[n, 1]`
    /// (chunks of [`TOP_K_CHUNK`] merged until one is left), then
    /// [`Op::SampleTopK`] with the f32 `[4]` `settings`, written into `dst`,
    /// a contiguous i32 tensor of one element; the result is `dst` after the write.
    pub fn sample_into(
        &mut self,
        logits: TensorId,
        k: usize,
        settings: TensorId,
        dst: TensorId,
    ) -> Result<TensorId> {
        self.check_ids(&[logits, settings, dst])?;
        expect_type(self, settings, DType::F32, "sample settings")?;
        expect_type(self, dst, DType::I32, "sample destination")?;
        let (ls, ld) = (*self.layout(settings), *self.layout(dst));
        if ls.n_elements() != 4
            || !ls.is_contiguous()
            || ld.n_elements() != 1
            || !ld.is_contiguous()
        {
            return Err(Error::shape(format!(
                "sample: settings {:?} must hold 4 values and the destination {:?} one",
                ls.ne, ld.ne
            )));
        }
        if k > MAX_SAMPLE_TOP_K {
            return Err(Error::shape(format!(
                "sample: top-k {k} is above the device sampler's {MAX_SAMPLE_TOP_K}"
            )));
        }
        let mut cands = self.top_k(logits, k, TOP_K_CHUNK, false)?;
        while self.layout(cands).ne[2] > 1 {
            cands = self.top_k(cands, k, TOP_K_CHUNK, true)?;
        }
        let name = format!("sample_top_k-{}", self.len());
        let id = self.push(name, Op::SampleTopK, vec![cands, settings], ld);
        self.node_mut(id).view_of = Some((dst, 0));
        Ok(id)
    }

    /// Rows of `a` `[n, m, A2, A3]` picked by i32 `idx` `[r, A2, A3]`; gives f32 `[n, r, A2, A3]`.
    pub fn get_rows(&mut self, a: TensorId, idx: TensorId) -> Result<TensorId> {
        self.check_ids(&[a, idx])?;
        expect_type(self, idx, DType::I32, "get_rows indices")?;
        if self.layout(a).dtype == DType::I32 {
            return Err(Error::shape("get_rows: i32 tables are not supported"));
        }
        let (na, ni) = (self.layout(a).ne, self.layout(idx).ne);
        if ni[1] != na[2] || ni[2] != na[3] || ni[3] != 1 {
            return Err(Error::shape(format!(
                "get_rows: indices {ni:?} do not fit table {na:?}"
            )));
        }
        self.op_node(
            Op::GetRows,
            vec![a, idx],
            DType::F32,
            [na[0], ni[0], ni[1], ni[2]],
        )
    }

    /// Rotary embedding of `a` `[head_dim, heads, tokens, 1]` at i32 positions `pos` `[tokens]`.
    pub fn rope(&mut self, a: TensorId, pos: TensorId, p: RopeParams) -> Result<TensorId> {
        self.rope_ext(a, pos, None, p)
    }

    /// [`Graph::rope`] whose pair `i` turns `factors[i]` times slower
    /// (ggml_rope_ext's frequency factors: Llama 3's long-context scaling,
    /// the file's `rope_freqs.weight`), `factors` a dense f32 vector of at
    /// least `n_dims / 2` values.
    pub fn rope_ext(
        &mut self,
        a: TensorId,
        pos: TensorId,
        factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        self.check_ids(&[a, pos])?;
        let t = float_type(self, a, "rope")?;
        expect_type(self, pos, DType::I32, "rope positions")?;
        let (na, np) = (self.layout(a).ne, self.layout(pos).ne);
        if np != [na[2], 1, 1, 1] {
            return Err(Error::shape(format!(
                "rope: positions {np:?} for {na:?}; one per dim-2 index"
            )));
        }
        if p.n_dims == 0 || !p.n_dims.is_multiple_of(2) || p.n_dims > na[0] {
            return Err(Error::shape(format!(
                "rope: n_dims {} for rows of {}",
                p.n_dims, na[0]
            )));
        }
        let mut src = vec![a, pos];
        if let Some(f) = factors {
            self.check_ids(&[f])?;
            expect_type(self, f, DType::F32, "rope frequency factors")?;
            let lf = self.layout(f);
            if !lf.is_contiguous() || lf.n_elements() != lf.ne[0] || lf.ne[0] < p.n_dims / 2 {
                return Err(Error::shape(format!(
                    "rope: frequency factors {:?} for n_dims {}; a dense vector of n_dims / 2 or more expected",
                    lf.ne, p.n_dims
                )));
            }
            src.push(f);
        }
        self.op_node(Op::Rope(p), src, t, na)
    }

    /// [`Graph::rope`] written over `a` itself (ggml_rope_inplace): the
    /// result is `a`'s bytes after the rotation.
    pub fn rope_inplace(&mut self, a: TensorId, pos: TensorId, p: RopeParams) -> Result<TensorId> {
        self.rope_ext_inplace(a, pos, None, p)
    }

    /// [`Graph::rope_ext`] written over `a` itself.
    pub fn rope_ext_inplace(
        &mut self,
        a: TensorId,
        pos: TensorId,
        factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        let id = self.rope_ext(a, pos, factors, p)?;
        let layout = *self.layout(a);
        let node = self.node_mut(id);
        node.layout = layout;
        node.view_of = Some((a, 0));
        Ok(id)
    }
}

#[cfg(test)]
mod tests;
