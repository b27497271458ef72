//! Element types of tensors: float, integer and ggml's block-quantized formats.

use crate::{Error, Result};

/// The element type of a tensor.
///
/// Quantized types store `block_elems()` values in `block_bytes()` bytes; a row
/// of such a tensor is a whole number of blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// IEEE half float.
    F16,
    /// bfloat16: the top half of an f32 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// 32 values: f16 scale + 16 bytes of 4-bit values, offset 8.
    Q4_0,
    /// 32 values: f16 scale + f16 minimum + 16 bytes of 4-bit values.
    Q4_1,
    /// 32 values: f16 scale + 32 high bits + 16 bytes of low nibbles, offset 16.
    Q5_0,
    /// 32 values: f16 scale + f16 minimum + 32 high bits + 16 bytes of low nibbles.
    Q5_1,
    /// 32 values: f16 scale + 32 signed bytes.
    Q8_0,
    /// 256 values: 2-bit codes in 16 groups of 16, each with a 4-bit scale
    /// and minimum; f16 super-scale and super-minimum.
    Q2K,
    /// 256 values: 3-bit codes (2 low bits + a high-bit mask) in 16 groups
    /// of 16 with 6-bit signed scales; f16 super-scale.
    Q3K,
    /// 256 values: 4-bit codes in 8 groups of 32, each with a 6-bit scale
    /// and minimum; f16 super-scale and super-minimum.
    Q4K,
    /// 256 values: q4_K with a fifth bit per code.
    Q5K,
    /// 256 values: 6-bit values in 16 groups with 8-bit scales, f16 super-scale.
    Q6K,
    /// 32 values: f16 scale + 16 bytes of 4-bit indices into a fixed
    /// non-uniform table of 16 values.
    IQ4NL,
    /// 256 values: iq4_nl's indices in 8 groups of 32, each with a 6-bit
    /// signed scale; f16 super-scale.
    IQ4XS,
    /// 32-bit signed integer (token ids, positions, row indices).
    I32,
}

impl DType {
    /// Every type wginfer knows.
    pub const ALL: [DType; 16] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        // After the others, so that the type-derived parity cases before
        // them keep their seeds.
        DType::Q2K,
        DType::Q3K,
        DType::IQ4NL,
        DType::IQ4XS,
        DType::I32,
    ];

    /// Number of values in one block (1 for plain types).
    pub const fn block_elems(self) -> usize {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => 1,
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 | DType::IQ4NL => {
                32
            }
            DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K | DType::IQ4XS => 256,
        }
    }

    /// Bytes of one block.
    pub const fn block_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q8_0 => 34,
            DType::Q2K => 84,
            DType::Q3K => 110,
            DType::Q4K => 144,
            DType::Q5K => 176,
            DType::Q6K => 210,
            DType::IQ4NL => 18,
            DType::IQ4XS => 136,
        }
    }

    /// Whether values are stored in quantized blocks.
    pub const fn is_quantized(self) -> bool {
        self.block_elems() > 1
    }

    /// Whether a copy from f32, f16 or bf16 may quantize to this type: the
    /// 32-value block types, which llama.cpp's GPU backends quantize to
    /// in `cpy` (a quantized KV cache); K-quants need a row's statistics.
    pub const fn quantizes_by_copy(self) -> bool {
        matches!(
            self,
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0
        )
    }

    /// ggml's type id, as stored in GGUF tensor infos.
    pub const fn ggml_id(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::BF16 => 30,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q5_0 => 6,
            DType::Q5_1 => 7,
            DType::Q8_0 => 8,
            DType::Q2K => 10,
            DType::Q3K => 11,
            DType::Q4K => 12,
            DType::Q5K => 13,
            DType::Q6K => 14,
            DType::IQ4NL => 20,
            DType::IQ4XS => 23,
            DType::I32 => 26,
        }
    }

    /// The type for a ggml type id, or `None` if wginfer does not support it.
    pub fn from_ggml_id(id: u32) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.ggml_id() == id)
    }

    /// ggml's name for the type (`f32`, `q4_0`, `q6_K`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::Q8_0 => "q8_0",
            DType::Q2K => "q2_K",
            DType::Q3K => "q3_K",
            DType::Q4K => "q4_K",
            DType::Q5K => "q5_K",
            DType::Q6K => "q6_K",
            DType::IQ4NL => "iq4_nl",
            DType::IQ4XS => "iq4_xs",
            DType::I32 => "i32",
        }
    }

    /// The type called `name` (ggml's spelling, as [`DType::name`] gives it).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Bytes of a row of `n` values; an error if `n` is not a whole number of blocks.
    pub fn row_bytes(self, n: usize) -> Result<usize> {
        if !n.is_multiple_of(self.block_elems()) {
            return Err(Error::shape(format!(
                "a {} row of {n} values is not a whole number of {}-value blocks",
                self.name(),
                self.block_elems()
            )));
        }
        (n / self.block_elems())
            .checked_mul(self.block_bytes())
            .ok_or_else(|| Error::shape(format!("row of {n} {} values overflows", self.name())))
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_match_ggml() {
        for t in DType::ALL {
            assert_eq!(DType::from_ggml_id(t.ggml_id()), Some(t));
            assert_eq!(DType::from_name(t.name()), Some(t));
        }
        assert_eq!(DType::from_ggml_id(10), Some(DType::Q2K));
        assert_eq!(DType::from_ggml_id(15), None); // q8_K: not supported
        assert_eq!(DType::Q2K.row_bytes(512).unwrap(), 168);
        assert_eq!(DType::Q3K.row_bytes(256).unwrap(), 110);
        assert_eq!(DType::Q6K.row_bytes(512).unwrap(), 420);
        assert_eq!(DType::Q4K.row_bytes(512).unwrap(), 288);
        assert_eq!(DType::Q5_1.row_bytes(64).unwrap(), 48);
        assert!(DType::Q4_0.row_bytes(33).is_err());
    }
}
