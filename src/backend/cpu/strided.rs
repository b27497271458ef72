//! Reading strided tensors of any type and storing results into layouts.

use half::f16;

use crate::quant;
use crate::tensor::Layout;
use crate::{DType, Error, Result};

/// A source tensor: its bytes (starting at its first byte) and its layout.
/// Construction checks that the layout fits, so element reads are in bounds.
#[derive(Clone, Copy)]
pub struct Src<'a> {
    bytes: &'a [u8],
    /// Shape, strides and type.
    pub layout: Layout,
}

/// Reads the little-endian bytes at `at` as `N` bytes; callers checked the span.
fn le<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

impl<'a> Src<'a> {
    /// A view of `layout` starting `offset` bytes into `buffer`.
    pub fn new(buffer: &'a [u8], offset: usize, layout: Layout) -> Result<Src<'a>> {
        let end = offset.checked_add(layout.span_bytes());
        match end {
            Some(end) if end <= buffer.len() => Ok(Src {
                bytes: &buffer[offset..end],
                layout,
            }),
            _ => Err(Error::shape(format!(
                "tensor of {} bytes at offset {offset} is outside its {}-byte buffer",
                layout.span_bytes(),
                buffer.len()
            ))),
        }
    }

    /// Index `i2` of dimension 2 (one expert's matrix of a stack) as a
    /// tensor of its own.
    pub fn at_dim2(&self, i2: usize) -> Result<Src<'a>> {
        if i2 >= self.layout.ne[2] {
            return Err(Error::shape(format!(
                "index {i2} of dimension 2 is past {:?}",
                self.layout.ne
            )));
        }
        let layout = Layout {
            ne: [self.layout.ne[0], self.layout.ne[1], 1, self.layout.ne[3]],
            ..self.layout
        };
        Src::new(self.bytes, i2 * self.layout.nb[2], layout)
    }

    /// Shape.
    pub fn ne(&self) -> [usize; 4] {
        self.layout.ne
    }

    /// Element `i` of an f32 or f16 tensor, as f32.
    pub fn f32_at(&self, i: [usize; 4]) -> f32 {
        let at = self.layout.offset_of(i);
        match self.layout.dtype {
            DType::F16 => f16::from_le_bytes(le(self.bytes, at)).to_f32(),
            DType::BF16 => half::bf16::from_le_bytes(le(self.bytes, at)).to_f32(),
            DType::I32 => i32::from_le_bytes(le(self.bytes, at)) as f32,
            _ => f32::from_le_bytes(le(self.bytes, at)),
        }
    }

    /// The values of a contiguous f32 tensor, borrowed (`None` for other
    /// layouts and types, or bytes not aligned for f32).
    pub fn f32_slice(&self) -> Option<&'a [f32]> {
        let plain = self.layout.dtype == DType::F32 && self.layout.is_contiguous();
        (plain && cfg!(target_endian = "little"))
            .then(|| bytemuck::try_cast_slice(self.bytes).ok())
            .flatten()
    }

    /// Element `i` of an i32 tensor.
    pub fn i32_at(&self, i: [usize; 4]) -> i32 {
        i32::from_le_bytes(le(self.bytes, self.layout.offset_of(i)))
    }

    /// All elements of an i32 tensor, in logical order.
    pub fn i32_in_order(&self) -> Vec<i32> {
        let mut out = Vec::with_capacity(self.layout.n_elements());
        for_each_index(self.ne(), |i| out.push(self.i32_at(i)));
        out
    }

    /// The bytes of row `(i1, i2, i3)`; rows are dense for every type but
    /// strided f32/f16 views, which [`Src::row_f32`] handles.
    pub fn row_bytes(&self, i1: usize, i2: usize, i3: usize) -> Option<&'a [u8]> {
        if !self.layout.rows_contiguous() {
            return None;
        }
        let at = self.layout.offset_of([0, i1, i2, i3]);
        Some(&self.bytes[at..at + self.layout.row_bytes()])
    }

    /// The bytes of `count` consecutive rows from `(i1, i2, i3)`, when
    /// they are packed one after another (a weight matrix); `None` for
    /// other layouts.
    pub fn packed_rows(&self, i1: usize, count: usize, i2: usize, i3: usize) -> Option<&'a [u8]> {
        let row = self.layout.row_bytes();
        let packed = self.layout.rows_contiguous() && (count <= 1 || self.layout.nb[1] == row);
        if !packed || i1 + count > self.layout.ne[1] {
            return None;
        }
        let at = self.layout.offset_of([0, i1, i2, i3]);
        Some(&self.bytes[at..at + count * row])
    }

    /// Row `(i1, i2, i3)` as f32 values, dequantized if needed.
    pub fn row_f32(&self, i1: usize, i2: usize, i3: usize, out: &mut [f32]) -> Result<()> {
        match self.row_bytes(i1, i2, i3) {
            Some(bytes) if self.layout.dtype == DType::I32 => {
                for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32;
                }
                Ok(())
            }
            Some(bytes) => quant::dequantize_row(self.layout.dtype, bytes, out),
            None => {
                // Strided f32/f16/bf16/i32 rows: one offset, then steps.
                let (base, step) = (self.layout.offset_of([0, i1, i2, i3]), self.layout.nb[0]);
                let at = |i0: usize| base + i0 * step;
                match self.layout.dtype {
                    DType::F16 => out.iter_mut().enumerate().for_each(|(i0, v)| {
                        *v = f16::from_le_bytes(le(self.bytes, at(i0))).to_f32()
                    }),
                    DType::F32 => out
                        .iter_mut()
                        .enumerate()
                        .for_each(|(i0, v)| *v = f32::from_le_bytes(le(self.bytes, at(i0)))),
                    _ => out
                        .iter_mut()
                        .enumerate()
                        .for_each(|(i0, v)| *v = self.f32_at([i0, i1, i2, i3])),
                }
                Ok(())
            }
        }
    }

    /// The blocks of a quantized tensor in logical order, as bytes.
    pub fn blocks_in_order(&self) -> Result<Vec<u8>> {
        let [_, n1, n2, n3] = self.ne();
        let mut out = Vec::with_capacity(n1 * n2 * n3 * self.layout.row_bytes());
        for i3 in 0..n3 {
            for i2 in 0..n2 {
                for i1 in 0..n1 {
                    let row = self.row_bytes(i1, i2, i3).ok_or_else(|| {
                        Error::shape(format!("{} rows are not dense", self.layout.dtype))
                    })?;
                    out.extend_from_slice(row);
                }
            }
        }
        Ok(out)
    }

    /// All elements as f32, in logical order (dimension 0 fastest).
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        let [n0, n1, n2, n3] = self.ne();
        let mut out = vec![0.0; self.layout.n_elements()];
        let mut rows = out.chunks_exact_mut(n0);
        for i3 in 0..n3 {
            for i2 in 0..n2 {
                for i1 in 0..n1 {
                    if let Some(row) = rows.next() {
                        self.row_f32(i1, i2, i3, row)?;
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Calls `f(i)` for every index of shape `ne`, dimension 0 fastest.
pub fn for_each_index(ne: [usize; 4], mut f: impl FnMut([usize; 4])) {
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    f([i0, i1, i2, i3]);
                }
            }
        }
    }
}

/// Stores `values` (logical order) into `layout` at `offset` in `buffer`.
pub fn store(layout: &Layout, buffer: &mut [u8], offset: usize, values: &[f32]) -> Result<()> {
    let fits = offset
        .checked_add(layout.span_bytes())
        .is_some_and(|end| end <= buffer.len());
    if !fits || values.len() != layout.n_elements() {
        return Err(Error::shape(format!(
            "result of {} values does not fit its {:?} tensor at offset {offset}",
            values.len(),
            layout.ne
        )));
    }
    let bytes = &mut buffer[offset..];
    // A dense f32 result is one copy.
    if layout.dtype == DType::F32 && layout.is_contiguous() && cfg!(target_endian = "little") {
        let src: &[u8] = bytemuck::cast_slice(values);
        bytes[..src.len()].copy_from_slice(src);
        return Ok(());
    }
    let mut next = values.iter();
    let mut write = |at: usize, v: f32| match layout.dtype {
        DType::F16 => bytes[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes()),
        // Rounded to nearest even, NaN kept quiet: ggml's conversion.
        DType::BF16 => bytes[at..at + 2].copy_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
        DType::I32 => bytes[at..at + 4].copy_from_slice(&(v as i32).to_le_bytes()),
        _ => bytes[at..at + 4].copy_from_slice(&v.to_le_bytes()),
    };
    match layout.dtype {
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => {}
        t => {
            return Err(Error::UnsupportedType(format!(
                "cpu results are f32, f16, bf16 or i32, not {t}"
            )))
        }
    }
    // Row by row: one offset per row, then steps of nb[0].
    let n0 = layout.ne[0];
    for_each_index([1, layout.ne[1], layout.ne[2], layout.ne[3]], |i| {
        let base = layout.offset_of(i);
        for (i0, &v) in next.by_ref().take(n0).enumerate() {
            write(base + i0 * layout.nb[0], v);
        }
    });
    Ok(())
}

/// Stores i32 `values` (in logical order) into `layout` at `offset`.
pub fn store_i32(layout: &Layout, buffer: &mut [u8], offset: usize, values: &[i32]) -> Result<()> {
    let fits = offset
        .checked_add(layout.span_bytes())
        .is_some_and(|end| end <= buffer.len());
    if !fits || layout.dtype != DType::I32 || values.len() != layout.n_elements() {
        return Err(Error::shape(format!(
            "{} i32 values do not fit a {:?} {} tensor at offset {offset}",
            values.len(),
            layout.ne,
            layout.dtype
        )));
    }
    let mut next = values.iter();
    for_each_index(layout.ne, |i| {
        if let Some(v) = next.next() {
            let at = offset + layout.offset_of(i);
            buffer[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    });
    Ok(())
}

/// Stores `blocks` (a quantized tensor's blocks in logical order, as
/// [`Src::blocks_in_order`] gives them) into `layout` at `offset`.
pub fn store_blocks(
    layout: &Layout,
    buffer: &mut [u8],
    offset: usize,
    blocks: &[u8],
) -> Result<()> {
    let row = layout.row_bytes();
    let rows = layout.ne[1] * layout.ne[2] * layout.ne[3];
    let fits = offset
        .checked_add(layout.span_bytes())
        .is_some_and(|end| end <= buffer.len());
    if !fits || !layout.rows_contiguous() || blocks.len() != rows * row {
        return Err(Error::shape(format!(
            "{} bytes of blocks do not fit a {:?} {} tensor at offset {offset}",
            blocks.len(),
            layout.ne,
            layout.dtype
        )));
    }
    let mut next = blocks.chunks_exact(row.max(1));
    for_each_index([1, layout.ne[1], layout.ne[2], layout.ne[3]], |i| {
        if let Some(src) = next.next() {
            let at = offset + layout.offset_of(i);
            buffer[at..at + row].copy_from_slice(src);
        }
    });
    Ok(())
}
