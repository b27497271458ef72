//! Which `wgsl/quant.wgsl` decoder each weight type uses: the one place a
//! type's blocks are decoded, and the only type-specific part of mul_mat's
//! mat-vec, tiled and cooperative kernels and of get_rows.

use crate::DType;

/// Invocations that cover every 8-value unit of a row of `k` values, for
/// any decoder: `n_units(k)` of float rows (rounded up to 64 values), at
/// least that of block rows (k / 8); kernels return past `n_units`.
pub fn units_per_row(k: usize) -> usize {
    k.div_ceil(64) * 64 / 8
}

/// The decoder of `a`'s type: `unit_w(row, u)` gives unit `u` of a row as
/// 8 weights, `x_elem(u, i)` the row element of weight `i` and `n_units(k)`
/// the units of a row of `k` values (for the tiled kernels and get_rows); `load_quad(row, q)`
/// reads quad `q` (units 4q..4q+4 of block types, unit q of float rows) in
/// the mat-vec kernel's form, whose `chunk_unit(chunk)` and
/// `chunk_head(chunk)` give each unit; `HAS_OFFSET` says whether heads
/// carry an offset and `ROWS_EXACT` whether units cover a row exactly
/// (quant.wgsl).
pub fn defs(t: DType) -> Option<&'static str> {
    macro_rules! decoder {
        // Float rows: one unit per quad, no offset, rows rounded up to 64.
        ($unit:literal, $elem:literal) => {
            decoder!(
                $unit,
                $elem,
                "float_units(k)",
                "Unit",
                "float_quad(row, q)",
                "plain",
                false,
                false
            )
        };
        ($unit:literal, $elem:literal, $units:literal, $chunk_type:literal, $quad:literal,
         $form:literal, $offset:literal, $exact:literal) => {
            concat!(
                "fn unit_w(row: u32, u: u32) -> Unit { return ",
                $unit,
                "; }\n",
                "fn x_elem(u: u32, i: u32) -> u32 { return ",
                $elem,
                "(u, i); }\n",
                "fn n_units(k: u32) -> u32 { return ",
                $units,
                "; }\n",
                "alias Chunk = ",
                $chunk_type,
                ";\n",
                "alias Quad = ",
                $chunk_type,
                "Quad;\n",
                "fn load_quad(row: u32, q: u32) -> Quad { return ",
                $quad,
                "; }\n",
                "fn chunk_unit(ch: Chunk) -> Unit { return ",
                $form,
                "_unit(ch); }\n",
                "fn chunk_head(ch: Chunk) -> vec2<f32> { return ",
                $chunk_type,
                "_head(ch); }\n",
                "const HAS_OFFSET: bool = ",
                $offset,
                ";\n",
                "const ROWS_EXACT: bool = ",
                $exact,
                ";\n",
                // Block types also group a unit's weights in fours of
                // consecutive elements, which the mat-vec loads as vec4s.
                "const X_QUADS: bool = ",
                $exact,
                ";\n"
            )
        };
    }
    Some(match t {
        DType::F32 => decoder!("dq_f32(row, u)", "x_elem_f32"),
        DType::F16 => decoder!("dq_f16(row, u)", "x_elem_f16"),
        DType::BF16 => decoder!("dq_bf16(row, u)", "x_elem_f16"),
        DType::Q4_0 => decoder!(
            "dq_q4_0(row + Q4_0_BYTES * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u",
            "QChunk",
            "q4_0_quad(row + Q4_0_BYTES * q)",
            "q4",
            true,
            true
        ),
        DType::Q4_1 => decoder!(
            "dq_q4_1(row + Q4_1_BYTES * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u",
            "QChunk",
            "q4_1_quad(row + Q4_1_BYTES * q)",
            "q4",
            true,
            true
        ),
        DType::Q5_0 => decoder!(
            "dq_q5_0(row + Q5_0_BYTES * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u",
            "Unit",
            "q5_0_quad(row + Q5_0_BYTES * q)",
            "plain",
            false,
            true
        ),
        DType::Q5_1 => decoder!(
            "dq_q5_1(row + Q5_1_BYTES * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u",
            "Unit",
            "q5_1_quad(row + Q5_1_BYTES * q)",
            "plain",
            false,
            true
        ),
        DType::Q4K => decoder!(
            "dq_q4_k(row + Q4_K_BYTES * (u >> 5u), u & 31u)",
            "x_elem_k",
            "k / 8u",
            "QChunk",
            "q4_k_quad(row + Q4_K_BYTES * (q >> 3u), q & 7u)",
            "q4_k",
            true,
            true
        ),
        DType::Q5K => decoder!(
            "dq_q5_k(row + Q5_K_BYTES * (u >> 5u), u & 31u)",
            "x_elem_k",
            "k / 8u",
            "Unit",
            "q5_k_quad(row + Q5_K_BYTES * (q >> 3u), q & 7u)",
            "plain",
            false,
            true
        ),
        DType::Q8_0 => decoder!(
            "dq_q8_0(row + Q8_0_BYTES * (u >> 2u), u & 3u)",
            "x_elem_linear",
            "k / 8u",
            "QChunk",
            "q8_0_quad(row + Q8_0_BYTES * q)",
            "q8_0",
            true,
            true
        ),
        DType::Q6K => decoder!(
            "dq_q6_k(row + Q6_K_BYTES * (u >> 5u), u & 31u)",
            "x_elem_q6_k",
            "k / 8u",
            "Unit",
            "q6_k_quad(row + Q6_K_BYTES * (q >> 3u), q & 7u)",
            "plain",
            false,
            true
        ),
        DType::Q2K => decoder!(
            "dq_q2_k(row + Q2_K_BYTES * (u >> 5u), u & 31u)",
            "x_elem_linear",
            "k / 8u",
            "QChunk",
            "q2_k_quad(row + Q2_K_BYTES * (q >> 3u), q & 7u)",
            "q4_k",
            true,
            true
        ),
        DType::Q3K => decoder!(
            "dq_q3_k(row + Q3_K_BYTES * (u >> 5u), u & 31u)",
            "x_elem_linear",
            "k / 8u",
            "QChunk",
            "q3_k_quad(row + Q3_K_BYTES * (q >> 3u), q & 7u)",
            "q4_k",
            true,
            true
        ),
        DType::IQ4NL => decoder!(
            "dq_iq4_nl(row + IQ4_NL_BYTES * (u >> 2u), u & 3u)",
            "x_elem_q4",
            "k / 8u",
            "Unit",
            "iq4_nl_quad(row + IQ4_NL_BYTES * q)",
            "plain",
            false,
            true
        ),
        DType::IQ4XS => decoder!(
            "dq_iq4_xs(row + IQ4_XS_BYTES * (u >> 5u), u & 31u)",
            "x_elem_q4",
            "k / 8u",
            "Unit",
            "iq4_xs_quad(row + IQ4_XS_BYTES * (q >> 3u), q & 7u)",
            "plain",
            false,
            true
        ),
        DType::I32 => return None,
    })
}
