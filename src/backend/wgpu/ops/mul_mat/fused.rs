//! The entry points of products fused with the nodes around them: what
//! a product's dispatch computes besides the product ([`Fusion`]), and
//! the encoders that the graph's fusion rules call.

use super::encode_product;
use crate::backend::wgpu::ops::OpEncoder;
use crate::backend::wgpu::plan::Dispatch;
use crate::graph::TensorId;
use crate::tensor::MAX_DIMS;
use crate::Result;

/// Nodes before a mat-vec that it computes as it loads its activations.
#[derive(Clone, Copy)]
pub(super) enum Activation {
    /// A soft_max node.
    SoftMax(TensorId),
    /// A norm node and the mul by its weight.
    Norm(TensorId, TensorId),
    /// A silu node (of the gate) and the mul by up.
    SiluMul(TensorId, TensorId),
    /// An rms_norm node run ahead by the mat-vec before (its product with
    /// the weight and the sums of squares in the device's scratch).
    Ahead(TensorId),
}

/// What a product's dispatch does besides the product ([`encode_product`]).
#[derive(Clone, Copy)]
pub(super) struct Fusion {
    /// A residual added to each sum.
    pub(super) residual: Option<TensorId>,
    /// Nodes before the product computed as it loads its activations.
    pub(super) activation: Option<Activation>,
    /// An rms_norm's weight (with a residual): the next rms_norm is run ahead.
    pub(super) ahead: Option<TensorId>,
    /// The destination's byte strides by the product's dims, where it is not
    /// the product itself but holds its elements (a permuted copy).
    pub(super) into: Option<[usize; MAX_DIMS]>,
}

/// The product alone.
pub(super) const NONE: Fusion = Fusion {
    residual: None,
    activation: None,
    ahead: None,
    into: None,
};

/// The product `mm` stored into `enc`'s node, which holds `mm`'s elements
/// at byte `strides` by `mm`'s dims (a contiguous copy of a permuted view
/// of `mm`).
pub fn encode_into(
    enc: &OpEncoder,
    mm: TensorId,
    strides: [usize; MAX_DIMS],
) -> Result<Vec<Dispatch>> {
    let into = Some(strides);
    encode_product(enc, mm, Fusion { into, ..NONE })
}

/// `enc`'s node: the mat-vec `mm` of `silu(gate) * up` (the silu node
/// `silu`, the mul `mul`), plus `residual` when given, in one dispatch;
/// see [`super::silu_mul_fits`].
pub fn encode_silu_mul(
    enc: &OpEncoder,
    silu: TensorId,
    mul: TensorId,
    mm: TensorId,
    residual: Option<TensorId>,
) -> Result<Vec<Dispatch>> {
    let activation = Some(Activation::SiluMul(silu, mul));
    encode_product(
        enc,
        mm,
        Fusion {
            residual,
            activation,
            ..NONE
        },
    )
}

/// The product `mm` plus `residual` into `enc`'s node (an `add`), in one
/// mat-vec dispatch; see [`super::residual_fits`].
pub fn encode_plus_residual(
    enc: &OpEncoder,
    mm: TensorId,
    residual: TensorId,
) -> Result<Vec<Dispatch>> {
    let residual = Some(residual);
    encode_product(enc, mm, Fusion { residual, ..NONE })
}

/// `enc`'s node, a mat-vec of `norm(x) * weight` (the norm node `norm` and
/// the mul `mul`), computed from `x` in one dispatch; see [`super::norm_fits`].
pub fn encode_normed(enc: &OpEncoder, norm: TensorId, mul: TensorId) -> Result<Vec<Dispatch>> {
    let activation = Some(Activation::Norm(norm, mul));
    encode_product(enc, enc.id, Fusion { activation, ..NONE })
}

/// `enc`'s node, a mat-vec of `soft_max(scores)` (the node `sm`),
/// computed from the scores in one dispatch; see [`super::softmax_fits`].
pub fn encode_softmaxed(enc: &OpEncoder, sm: TensorId) -> Result<Vec<Dispatch>> {
    let activation = Some(Activation::SoftMax(sm));
    encode_product(enc, enc.id, Fusion { activation, ..NONE })
}

/// `enc`'s node (the residual add after a mat-vec, which `producer`
/// computes) with the rms_norm after it run ahead for the mat-vec that
/// reads the norm times its weight (`[norm, mul, mm]`): two dispatches; see
/// [`super::ahead_fits`].
pub fn encode_norm_ahead(
    enc: &OpEncoder,
    producer: Producer,
    [norm, mul, mm]: [TensorId; 3],
) -> Result<Vec<Dispatch>> {
    let weight = enc.graph.node(mul).src[1];
    let residual = enc.src(1);
    let (product, activation) = match producer {
        Producer::Product(mm) => (mm, None),
        Producer::SiluMul { silu, mul, mm } => (mm, Some(Activation::SiluMul(silu, mul))),
    };
    let fusion = Fusion {
        residual: Some(residual),
        activation,
        ahead: Some(weight),
        into: None,
    };
    let mut out = encode_product(enc, product, fusion)?;
    let next = OpEncoder { id: mm, ..*enc };
    let activation = Some(Activation::Ahead(norm));
    out.extend(encode_product(&next, mm, Fusion { activation, ..NONE })?);
    Ok(out)
}

/// The mat-vec before the residual add that runs an rms_norm ahead.
#[derive(Clone, Copy)]
pub enum Producer {
    /// The product `mm`.
    Product(TensorId),
    /// The product `mm` of `silu(gate) * up` (the nodes `silu` and `mul`).
    SiluMul {
        silu: TensorId,
        mul: TensorId,
        mm: TensorId,
    },
}
