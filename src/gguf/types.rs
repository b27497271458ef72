//! ggml's tensor types (the ones GGUF files may hold) and tensor infos.

use crate::{DType, Error, Result};

/// One of ggml's tensor types: its id in GGUF files, its name and its block
/// layout. wginfer computes with only some of them (see [`DType`]), but it
/// can list and skip them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// ggml's type id (`enum ggml_type`).
    pub id: u32,
    /// ggml's name (`f32`, `q4_K`, `iq2_xxs`, ...).
    pub name: &'static str,
    /// Values per block (1 for plain types).
    pub block_elems: usize,
    /// Bytes per block.
    pub block_bytes: usize,
}

const fn t(id: u32, name: &'static str, block_elems: usize, block_bytes: usize) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elems,
        block_bytes,
    }
}

/// Every tensor type ggml can store in a GGUF file, by id. Ids 4, 5 (old
/// q4_2/q4_3) and 31..=33, 36..=38 (repacked layouts) were removed from ggml
/// and are not accepted.
///
/// Sizes are ggml's `type_traits` (`ggml-common.h` block structs). Note that
/// `q8_1` is 36 bytes in ggml (two f16 + 32 bytes); gguf-py's table still
/// lists 40 from an older layout with f32 scales.
pub const GGML_TYPES: [GgmlType; 32] = [
    t(0, "f32", 1, 4),
    t(1, "f16", 1, 2),
    t(2, "q4_0", 32, 18),
    t(3, "q4_1", 32, 20),
    t(6, "q5_0", 32, 22),
    t(7, "q5_1", 32, 24),
    t(8, "q8_0", 32, 34),
    t(9, "q8_1", 32, 36),
    t(10, "q2_K", 256, 84),
    t(11, "q3_K", 256, 110),
    t(12, "q4_K", 256, 144),
    t(13, "q5_K", 256, 176),
    t(14, "q6_K", 256, 210),
    t(15, "q8_K", 256, 292),
    t(16, "iq2_xxs", 256, 66),
    t(17, "iq2_xs", 256, 74),
    t(18, "iq3_xxs", 256, 98),
    t(19, "iq1_s", 256, 50),
    t(20, "iq4_nl", 32, 18),
    t(21, "iq3_s", 256, 110),
    t(22, "iq2_s", 256, 82),
    t(23, "iq4_xs", 256, 136),
    t(24, "i8", 1, 1),
    t(25, "i16", 1, 2),
    t(26, "i32", 1, 4),
    t(27, "i64", 1, 8),
    t(28, "f64", 1, 8),
    t(29, "iq1_m", 256, 56),
    t(30, "bf16", 1, 2),
    t(34, "tq1_0", 256, 54),
    t(35, "tq2_0", 256, 66),
    t(39, "mxfp4", 32, 17),
];

impl GgmlType {
    /// The type with ggml id `id`, `None` if there is no such type.
    pub fn from_id(id: u32) -> Option<&'static GgmlType> {
        GGML_TYPES.iter().find(|t| t.id == id)
    }

    /// The type called `name` (ggml's spelling, e.g. `q6_K`).
    pub fn from_name(name: &str) -> Option<&'static GgmlType> {
        GGML_TYPES.iter().find(|t| t.name == name)
    }

    /// Whether the type stores values in multi-value blocks.
    pub const fn is_quantized(&self) -> bool {
        self.block_elems > 1
    }

    /// Bytes of `n_elements` values, `None` if `n_elements` is not a whole
    /// number of blocks or the size overflows.
    pub fn bytes_for(&self, n_elements: u64) -> Option<u64> {
        let be = u64::try_from(self.block_elems).ok()?;
        let bb = u64::try_from(self.block_bytes).ok()?;
        if be == 0 || !n_elements.is_multiple_of(be) {
            return None;
        }
        (n_elements / be).checked_mul(bb)
    }
}

/// ggml's name for type id `id`, or `"unknown"`.
pub fn ggml_type_name(id: u32) -> &'static str {
    GgmlType::from_id(id).map_or("unknown", |t| t.name)
}

/// Where and how one tensor is stored in a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (`token_embd.weight`, `blk.0.attn_q.weight`, ...).
    pub name: String,
    /// Number of dimensions stored in the file, 1..=4.
    pub n_dims: usize,
    /// Sizes in ggml order (`ne[0]` is the contiguous row length), padded
    /// with 1 past `n_dims`.
    pub ne: [usize; 4],
    /// ggml type id; always one of [`GGML_TYPES`] for a parsed file.
    pub ggml_type: u32,
    /// Offset of the data from the start of the file's data section.
    pub offset: u64,
    /// Bytes of data.
    pub size: usize,
}

impl TensorInfo {
    /// The sizes as stored: `&ne[..n_dims]`.
    pub fn shape(&self) -> &[usize] {
        self.ne.get(..self.n_dims).unwrap_or(&self.ne)
    }

    /// Number of values (saturating; a parsed file's count never overflows).
    pub fn n_elements(&self) -> usize {
        self.ne.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    /// The tensor's ggml type, `None` only for a hand-made info with a bad id.
    pub fn ggml_type_info(&self) -> Option<&'static GgmlType> {
        GgmlType::from_id(self.ggml_type)
    }

    /// ggml's name of the tensor's type.
    pub fn type_name(&self) -> &'static str {
        ggml_type_name(self.ggml_type)
    }

    /// The element type for computing, or [`Error::UnsupportedType`] for a
    /// ggml type that wginfer does not compute with.
    pub fn dtype(&self) -> Result<DType> {
        DType::from_ggml_id(self.ggml_type).ok_or_else(|| {
            let supported: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            Error::UnsupportedType(format!(
                "tensor '{}' has type {}; wginfer supports {}",
                self.name,
                self.type_name(),
                supported.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_dtype_and_is_unique() {
        for d in DType::ALL {
            let t = GgmlType::from_id(d.ggml_id()).expect("dtype in table");
            assert_eq!(t.name, d.name());
            assert_eq!(t.block_elems, d.block_elems());
            assert_eq!(t.block_bytes, d.block_bytes());
        }
        for (i, a) in GGML_TYPES.iter().enumerate() {
            for b in &GGML_TYPES[i + 1..] {
                assert_ne!(a.id, b.id);
                assert_ne!(a.name, b.name);
            }
            assert_eq!(GgmlType::from_name(a.name), Some(a));
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 40] {
            assert_eq!(GgmlType::from_id(removed), None);
        }
        let q4k = GgmlType::from_name("q4_K").unwrap();
        assert_eq!(q4k.bytes_for(512), Some(288));
        assert_eq!(q4k.bytes_for(100), None);
    }

    #[test]
    fn unsupported_dtype_message() {
        let info = TensorInfo {
            name: "x".into(),
            n_dims: 1,
            ne: [256, 1, 1, 1],
            ggml_type: 21,
            offset: 0,
            size: 110,
        };
        let e = info.dtype().unwrap_err().to_string();
        assert!(
            e.contains("tensor 'x' has type iq3_s; wginfer supports f32, f16"),
            "{e}"
        );
        assert_eq!(info.shape(), &[256]);
    }
}
