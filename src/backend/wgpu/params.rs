//! Op parameters as the kernels see them: one `#[repr(C)]` layout shared by
//! every kernel (`wgsl/common.wgsl` declares the same), sent as immediates
//! where the device has them, else through a uniform buffer.

use bytemuck::{Pod, Zeroable};

use crate::tensor::Layout;

/// A tensor as a kernel addresses it: shape, byte strides, byte offset into its binding.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct TensorParams {
    /// Elements per dimension.
    pub ne: [u32; 4],
    /// Byte strides.
    pub nb: [u32; 4],
    /// Byte offset of element 0 from the start of the binding.
    pub offset: u32,
    /// Padding to the uniform layout's 16-byte alignment.
    pub pad: [u32; 3],
}

impl TensorParams {
    /// Parameters of `layout` starting `offset` bytes into its binding; `None`
    /// when a number does not fit the kernels' 32-bit arithmetic.
    pub fn new(layout: &Layout, offset: usize) -> Option<TensorParams> {
        let narrow = |v: [usize; 4]| -> Option<[u32; 4]> {
            Some([
                u32::try_from(v[0]).ok()?,
                u32::try_from(v[1]).ok()?,
                u32::try_from(v[2]).ok()?,
                u32::try_from(v[3]).ok()?,
            ])
        };
        u32::try_from(offset.checked_add(layout.span_bytes())?).ok()?;
        Some(TensorParams {
            ne: narrow(layout.ne)?,
            nb: narrow(layout.nb)?,
            offset: u32::try_from(offset).ok()?,
            pad: [0; 3],
        })
    }
}

/// Everything one dispatch needs: up to two sources, the destination and
/// twelve op-specific words (f32 values travel as their bits).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Params {
    /// First source.
    pub a: TensorParams,
    /// Second source (unused by one-source kernels).
    pub b: TensorParams,
    /// Destination.
    pub d: TensorParams,
    /// Op-specific words.
    pub x: [u32; 4],
    /// More op-specific words.
    pub y: [u32; 4],
    /// Words of fused kernels that need more than `x` and `y`.
    pub z: [u32; 4],
}

/// Size of [`Params`] in bytes.
pub const PARAMS_SIZE: u32 = std::mem::size_of::<Params>() as u32;

const _: () = assert!(std::mem::size_of::<Params>() == 192);
