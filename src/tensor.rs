//! Tensor layouts with ggml's conventions.
//!
//! `ne[i]` is the number of elements along dimension `i` (dimension 0 is the
//! row, the fastest-moving one) and `nb[i]` the stride in bytes between two
//! consecutive indices of dimension `i`. For quantized types `nb[0]` is the
//! block size in bytes and a row is a whole number of blocks. Views,
//! reshapes, permutes and transposes only produce new layouts; no data moves.

use crate::{DType, Error, Result};

/// Number of dimensions every layout has (unused ones are 1).
pub const MAX_DIMS: usize = 4;

/// Checks that no dimension is 0 and that the element count fits `usize`
/// (strided views may repeat bytes, so their span does not bound it).
fn check_dims(ne: [usize; MAX_DIMS]) -> Result<()> {
    if ne.contains(&0) {
        return Err(Error::shape(format!("zero-sized dimension in {ne:?}")));
    }
    match ne.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) {
        Some(_) => Ok(()),
        None => Err(Error::shape(format!("{ne:?} has too many elements"))),
    }
}

/// The shape and strides of a tensor; where its bytes live is not part of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension.
    pub ne: [usize; MAX_DIMS],
    /// Bytes between consecutive indices of each dimension.
    pub nb: [usize; MAX_DIMS],
}

impl Layout {
    /// A contiguous (row-major in ggml's sense) layout.
    pub fn contiguous(dtype: DType, ne: [usize; MAX_DIMS]) -> Result<Layout> {
        check_dims(ne)?;
        let row = dtype.row_bytes(ne[0])?;
        let mut nb = [dtype.block_bytes(), row, 0, 0];
        for i in 2..MAX_DIMS {
            nb[i] = nb[i - 1]
                .checked_mul(ne[i - 1])
                .ok_or_else(|| Error::shape(format!("{ne:?} overflows")))?;
        }
        nb[3]
            .checked_mul(ne[3])
            .ok_or_else(|| Error::shape(format!("{ne:?} overflows")))?;
        Ok(Layout { dtype, ne, nb })
    }

    /// Total number of elements (it fits `usize` for every layout the
    /// constructors make: they check).
    pub fn n_elements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Number of rows (all dimensions but the first).
    pub fn n_rows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.ne[0] / self.dtype.block_elems() * self.dtype.block_bytes()
    }

    /// Bytes from the first to one past the last byte the layout touches.
    pub fn span_bytes(&self) -> usize {
        self.checked_span().unwrap_or(usize::MAX)
    }

    fn checked_span(&self) -> Option<usize> {
        let blocks = [
            self.ne[0] / self.dtype.block_elems(),
            self.ne[1],
            self.ne[2],
            self.ne[3],
        ];
        (0..MAX_DIMS).try_fold(self.dtype.block_bytes(), |acc, i| {
            blocks[i]
                .checked_sub(1)?
                .checked_mul(self.nb[i])?
                .checked_add(acc)
        })
    }

    /// Whether the elements are packed densely in the natural order.
    pub fn is_contiguous(&self) -> bool {
        Layout::contiguous(self.dtype, self.ne).is_ok_and(|c| c.nb == self.nb)
    }

    /// Whether each row is dense (the rows themselves may be strided).
    pub fn rows_contiguous(&self) -> bool {
        self.nb[0] == self.dtype.block_bytes()
    }

    /// Byte offset of element `(i0, i1, i2, i3)`; `i0` must start a block.
    pub fn offset_of(&self, i: [usize; MAX_DIMS]) -> usize {
        i[0] / self.dtype.block_elems() * self.nb[0]
            + i[1] * self.nb[1]
            + i[2] * self.nb[2]
            + i[3] * self.nb[3]
    }

    /// The same bytes seen with another shape; only contiguous layouts can be reshaped.
    pub fn reshape(&self, ne: [usize; MAX_DIMS]) -> Result<Layout> {
        if !self.is_contiguous() {
            return Err(Error::shape(
                "reshape needs a contiguous tensor (use cont first)",
            ));
        }
        check_dims(ne)?;
        if ne.iter().product::<usize>() != self.n_elements() {
            return Err(Error::shape(format!(
                "cannot reshape {:?} to {ne:?}",
                self.ne
            )));
        }
        Layout::contiguous(self.dtype, ne)
    }

    /// ggml_permute: source dimension `i` becomes dimension `axes[i]`.
    pub fn permute(&self, axes: [usize; MAX_DIMS]) -> Result<Layout> {
        let mut seen = [false; MAX_DIMS];
        for &a in &axes {
            if a >= MAX_DIMS || std::mem::replace(&mut seen[a], true) {
                return Err(Error::shape(format!(
                    "{axes:?} is not a permutation of 0..4"
                )));
            }
        }
        if self.dtype.is_quantized() && axes[0] != 0 {
            return Err(Error::shape(
                "a quantized tensor cannot move its row dimension",
            ));
        }
        let mut out = *self;
        for (i, &a) in axes.iter().enumerate() {
            out.ne[a] = self.ne[i];
            out.nb[a] = self.nb[i];
        }
        Ok(out)
    }

    /// Swaps dimensions 0 and 1.
    pub fn transpose(&self) -> Result<Layout> {
        self.permute([1, 0, 2, 3])
    }

    /// An arbitrary strided window; the caller checks it stays inside the source.
    pub fn strided(dtype: DType, ne: [usize; MAX_DIMS], nb: [usize; MAX_DIMS]) -> Result<Layout> {
        check_dims(ne)?;
        dtype.row_bytes(ne[0])?;
        if dtype.is_quantized() && nb[0] != dtype.block_bytes() {
            return Err(Error::shape("quantized rows must be dense"));
        }
        let layout = Layout { dtype, ne, nb };
        match layout.checked_span() {
            Some(_) => Ok(layout),
            None => Err(Error::shape(format!(
                "{ne:?} with strides {nb:?} overflows"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_follow_ggml() {
        let l = Layout::contiguous(DType::F32, [4, 3, 2, 1]).unwrap();
        assert_eq!(l.nb, [4, 16, 48, 96]);
        assert_eq!(l.span_bytes(), 96);
        let q = Layout::contiguous(DType::Q4_0, [64, 2, 1, 1]).unwrap();
        assert_eq!(q.nb, [18, 36, 72, 72]);
        assert!(Layout::contiguous(DType::Q4_0, [16, 1, 1, 1]).is_err());
    }

    #[test]
    fn permute_moves_dims_and_strides() {
        let l = Layout::contiguous(DType::F32, [4, 3, 2, 1]).unwrap();
        let p = l.permute([0, 2, 1, 3]).unwrap();
        assert_eq!(p.ne, [4, 2, 3, 1]);
        assert_eq!(p.nb, [4, 48, 16, 96]);
        assert!(!p.is_contiguous());
        assert_eq!(p.span_bytes(), l.span_bytes());
        let t = l.transpose().unwrap();
        assert_eq!((t.ne, t.nb), ([3, 4, 2, 1], [16, 4, 48, 96]));
        assert!(l.permute([0, 0, 1, 2]).is_err());
        assert!(p.reshape([24, 1, 1, 1]).is_err());
    }

    /// Element counts that overflow are errors, also where zero strides
    /// keep the byte span small (n_elements() may then never overflow).
    #[test]
    fn element_count_overflow_is_an_error() {
        let big = 1 << (usize::BITS / 2);
        let e = Layout::strided(DType::F32, [1, big, big, 2], [4, 0, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("too many elements"), "{e}");
        assert!(Layout::strided(DType::F32, [1, big, big - 1, 1], [4, 0, 0, 0]).is_ok());
        let l = Layout::contiguous(DType::F32, [4, 1, 1, 1]).unwrap();
        assert!(l.reshape([big, big, 2, 2]).is_err());
    }
}
