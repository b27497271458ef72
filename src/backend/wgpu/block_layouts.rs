//! The byte layouts of the quantized blocks as WGSL constants, taken from
//! the Rust block structs (`src/quant`): `Q4_K_BYTES` is a block's size and
//! `Q4_K_QS` the offset of its `qs` field. Every kernel gets them, so the
//! decoders (`wgsl/quant.wgsl`, `ops/decoders.rs`) never restate a size or
//! an offset.

use std::fmt::Write;
use std::mem::{offset_of, size_of};
use std::sync::OnceLock;

use crate::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0, IQ4_VALUES,
};

// q5_K shares q4_K's head, read by the same decoder (`k_sub_head`).
const _: () = assert!(
    offset_of!(BlockQ4K, d) == offset_of!(BlockQ5K, d)
        && offset_of!(BlockQ4K, dmin) == offset_of!(BlockQ5K, dmin)
        && offset_of!(BlockQ4K, scales) == offset_of!(BlockQ5K, scales)
);

/// The constants, one `const NAME: u32 = value;` line each.
pub fn wgsl() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut s = String::new();
        macro_rules! layout {
            ($name:literal, $block:ty, [$($field:ident),*]) => {
                let _ = writeln!(s, "const {}_BYTES: u32 = {}u;", $name, size_of::<$block>());
                $(let _ = writeln!(
                    s,
                    "const {}_{}: u32 = {}u;",
                    $name,
                    stringify!($field).to_uppercase(),
                    offset_of!($block, $field)
                );)*
            };
        }
        layout!("Q4_0", BlockQ4_0, [d, qs]);
        layout!("Q4_1", BlockQ4_1, [d, m, qs]);
        layout!("Q5_0", BlockQ5_0, [d, qh, qs]);
        layout!("Q5_1", BlockQ5_1, [d, m, qh, qs]);
        layout!("Q8_0", BlockQ8_0, [d, qs]);
        layout!("Q2_K", BlockQ2K, [scales, qs, d, dmin]);
        layout!("Q3_K", BlockQ3K, [hmask, qs, scales, d]);
        layout!("Q4_K", BlockQ4K, [d, dmin, scales, qs]);
        layout!("Q5_K", BlockQ5K, [d, dmin, scales, qh, qs]);
        layout!("Q6_K", BlockQ6K, [ql, qh, scales, d]);
        layout!("IQ4_NL", BlockIQ4NL, [d, qs]);
        layout!("IQ4_XS", BlockIQ4XS, [d, scales_h, scales_l, qs]);
        // The iq4 table as signed bytes, four to a word.
        let words: Vec<String> = IQ4_VALUES
            .as_chunks::<4>()
            .0
            .iter()
            .map(|b| format!("{:#010x}u", u32::from_le_bytes(b.map(|v| v as u8))))
            .collect();
        let _ = writeln!(
            s,
            "const IQ4_TABLE: vec4<u32> = vec4<u32>({});",
            words.join(", ")
        );
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    /// Each type's size constant is its block size, by ggml's name.
    #[test]
    fn sizes_are_the_block_sizes() {
        for t in DType::ALL.into_iter().filter(|t| t.is_quantized()) {
            let line = format!(
                "const {}_BYTES: u32 = {}u;",
                t.name().to_uppercase(),
                t.block_bytes()
            );
            assert!(wgsl().contains(&line), "{line}");
        }
        assert!(wgsl().contains("const Q6_K_D: u32 = 208u;"));
        // -127, -104, -83, -65 as bytes 0x81, 0x98, 0xad, 0xbf.
        assert!(wgsl().contains("const IQ4_TABLE: vec4<u32> = vec4<u32>(0xbfad9881u,"));
    }
}
