//! set_rows cases (llama.cpp's SET_ROWS, f32/f16 into f32/f16): rows of
//! several lengths into a taller destination, the source as a 3-D tensor
//! read as rows (a K cache store), rows of one value (a transposed V cache
//! store), and a strided source (V as a view of a joined product). Indices are distinct: repeated ones would race on a GPU.

use crate::parity::{Case, CaseBuilder, NMSE_DEFAULT};
use crate::{DType, Result};

pub fn cases() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for dst_type in [DType::F32, DType::F16] {
        for src_type in [DType::F32, DType::F16] {
            for (src_shape, row, n_rows) in [
                (&[64, 5][..], 64, 16),
                (&[33, 2][..], 33, 7),
                (&[64, 3, 4][..], 192, 20),
                (&[1, 96][..], 1, 300),
            ] {
                let n: usize = src_shape.iter().product::<usize>() / row;
                let mut b = CaseBuilder::new(cases.len() as u64 + 2100);
                let dst = b.uniform(dst_type, &[row, n_rows], -1.0, 1.0)?;
                let src = b.uniform(src_type, src_shape, -2.0, 2.0)?;
                let idx = b.distinct_indices(n, n_rows)?;
                let out = b.g.set_rows(dst, src, idx)?;
                let name = format!(
                    "SET_ROWS(type_src={src_type},type_dst={dst_type},ne={src_shape:?},nr={n_rows})"
                );
                cases.push(b.case("set_rows", name, out, NMSE_DEFAULT));
            }
            // The source a strided view: V of a joined q/k/v product.
            let mut b = CaseBuilder::new(cases.len() as u64 + 2100);
            let dst = b.uniform(dst_type, &[1, 200], -1.0, 1.0)?;
            let qkv = b.uniform(src_type, &[40, 3], -2.0, 2.0)?;
            let row = b.g.layout(qkv).nb[1];
            let v =
                b.g.view(qkv, &[16, 3], &[row], 24 * src_type.block_bytes())?;
            let idx = b.distinct_indices(48, 200)?;
            let out = b.g.set_rows(dst, v, idx)?;
            let name = format!("SET_ROWS(type_src={src_type},type_dst={dst_type},strided)");
            cases.push(b.case("set_rows", name, out, NMSE_DEFAULT));
        }
    }
    Ok(cases)
}
