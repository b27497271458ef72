//! (placeholder until the quant branch lands)
#![allow(missing_docs)]
use crate::{DType, Error, Result};
use half::f16;
pub fn dequantize_row(dtype: DType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    match dtype {
        DType::F32 => { for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) { *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]); } Ok(()) }
        DType::F16 => { for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) { *o = f16::from_le_bytes([c[0], c[1]]).to_f32(); } Ok(()) }
        t => Err(Error::UnsupportedType(t.to_string())),
    }
}
pub fn quantize_row(dtype: DType, values: &[f32]) -> Result<Vec<u8>> {
    match dtype {
        DType::F32 => Ok(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        DType::F16 => Ok(values.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect()),
        t => Err(Error::UnsupportedType(t.to_string())),
    }
}
pub fn dot_row(dtype: DType, bytes: &[u8], x: &[f32]) -> Result<f32> {
    let mut v = vec![0.0; x.len()];
    dequantize_row(dtype, bytes, &mut v)?;
    Ok(v.iter().zip(x).map(|(a, b)| a * b).sum())
}
