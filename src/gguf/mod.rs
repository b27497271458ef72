//! GGUF model files: reading (bounded, checked, memory-mapped), metadata
//! values, ggml tensor types and writing.
//!
//! A GGUF file (versions 2 and 3, little-endian) is a header (`"GGUF"`, the
//! version, the tensor count and the metadata count), the metadata entries
//! (key, value type, value), the tensor infos (name, dimensions, ggml type,
//! data offset), padding to the alignment and the tensor data.
//!
//! [`Gguf::parse`] reads and checks everything in a byte slice; every problem
//! is an [`Error::Gguf`](crate::Error::Gguf) with the byte offset where it was found.
//! [`GgufFile::open`] memory-maps a file and hands out tensor data without
//! copying. [`GgufWriter`] writes version 3 files, streaming tensor data.
//!
//! ```no_run
//! # fn main() -> wginfer::Result<()> {
//! let file = wginfer::gguf::GgufFile::open("models/SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let layers = file.get_u32(&file.arch_key("block_count")?)?;
//! let embd = file.require_tensor("token_embd.weight")?;
//! let bytes: &[u8] = file.tensor_data(embd);
//! # let _ = (layers, bytes);
//! # Ok(())
//! # }
//! ```

mod array;
mod file;
mod read;
mod types;
mod value;
mod write;

use std::collections::HashMap;
use std::ops::Range;

pub use array::Array;
pub use file::GgufFile;
pub use types::{ggml_type_name, GgmlType, TensorInfo, GGML_TYPES};
pub use value::{Value, ValueType};
pub use write::GgufWriter;

use crate::Result;
use read::err;

/// The data alignment when a file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// The longest string (key, value, tensor name) the reader accepts.
pub const MAX_STRING_LEN: usize = 16 << 20;
/// How deeply arrays may nest (an array of scalars is depth 1).
pub const MAX_ARRAY_DEPTH: usize = 8;

/// One metadata entry, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataEntry {
    /// The key (`general.architecture`, `llama.block_count`, ...).
    pub key: String,
    /// The value.
    pub value: Value,
    /// Byte offset of the entry in the file.
    pub offset: u64,
}

/// The parsed header, metadata and tensor infos of a GGUF file (not the
/// tensor data: see [`GgufFile`] or [`Gguf::tensor_range`]).
#[derive(Clone, Debug)]
pub struct Gguf {
    version: u32,
    alignment: usize,
    metadata: Vec<MetadataEntry>,
    index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    metadata_end: usize,
    data_offset: usize,
    file_size: usize,
}

/// Shortens a value's display for error messages.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        let mut t: String = s.chars().take(57).collect();
        t.push_str("...");
        t
    } else {
        s
    }
}

impl Gguf {
    /// Parses and checks a whole GGUF file: header, metadata, tensor infos,
    /// and that every tensor's data lies inside `bytes` without overlapping
    /// another's.
    pub fn parse(bytes: &[u8]) -> Result<Gguf> {
        read::parse(bytes)
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Byte offset of the data section; tensor offsets are relative to it.
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// Size of the parsed file in bytes.
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// All metadata entries in file order.
    pub fn metadata(&self) -> &[MetadataEntry] {
        &self.metadata
    }

    /// All tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
    }

    /// The tensor called `name`, or an error naming it.
    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor(name).ok_or_else(|| {
            err(
                self.metadata_end,
                format!("the file has no tensor '{name}'"),
            )
        })
    }

    /// The absolute byte range of a tensor's data in the file. For an info of
    /// this file it always lies inside the file; for a foreign info it is
    /// clamped to the file size.
    pub fn tensor_range(&self, info: &TensorInfo) -> Range<usize> {
        let start = usize::try_from(info.offset)
            .ok()
            .and_then(|o| o.checked_add(self.data_offset))
            .unwrap_or(usize::MAX)
            .min(self.file_size);
        let end = start.saturating_add(info.size).min(self.file_size);
        start..end
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entry(key).map(|e| &e.value)
    }

    /// The entry of `key`.
    pub fn entry(&self, key: &str) -> Option<&MetadataEntry> {
        self.index.get(key).and_then(|&i| self.metadata.get(i))
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &str,
        f: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        let Some(e) = self.entry(key) else {
            return Ok(None);
        };
        match f(&e.value) {
            Some(v) => Ok(Some(v)),
            None => Err(err(
                e.offset as usize,
                format!(
                    "metadata '{key}' is {} {}, expected {expected}",
                    e.value.type_description(),
                    short(&e.value)
                ),
            )),
        }
    }

    fn required<T>(&self, key: &str, v: Result<Option<T>>) -> Result<T> {
        v?.ok_or_else(|| {
            err(
                self.metadata_end,
                format!("required metadata key '{key}' is missing"),
            )
        })
    }

    /// An integer that fits `u32`; `None` if `key` is absent, an error if it
    /// has another type or does not fit.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.typed(key, "an integer that fits u32", Value::as_u32)
    }

    /// An integer that fits `u64` (see [`Gguf::opt_u32`]).
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.typed(key, "an integer that fits u64", Value::as_u64)
    }

    /// An integer that fits `usize` (see [`Gguf::opt_u32`]).
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.typed(key, "an integer that fits usize", Value::as_usize)
    }

    /// An integer that fits `i32` (see [`Gguf::opt_u32`]).
    pub fn opt_i32(&self, key: &str) -> Result<Option<i32>> {
        self.typed(key, "an integer that fits i32", Value::as_i32)
    }

    /// An `f32` or `f64` as `f32` (see [`Gguf::opt_u32`]).
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        self.typed(key, "a float", Value::as_f32)
    }

    /// A bool (see [`Gguf::opt_u32`]).
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "a bool", Value::as_bool)
    }

    /// A string (see [`Gguf::opt_u32`]).
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "a string", Value::as_str)
    }

    /// An array of any type (see [`Gguf::opt_u32`]).
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>> {
        self.typed(key, "an array", Value::as_array)
    }

    /// An array of strings (see [`Gguf::opt_u32`]).
    pub fn opt_str_array(&self, key: &str) -> Result<Option<&[String]>> {
        self.typed(key, "an array of strings", |v| v.as_array()?.as_strs())
    }

    /// An array of `f32` or `f64` as `f32` (see [`Gguf::opt_u32`]).
    pub fn opt_f32_array(&self, key: &str) -> Result<Option<Vec<f32>>> {
        self.typed(key, "an array of floats", |v| v.as_array()?.to_f32_vec())
    }

    /// An array of integers as `i64` (see [`Gguf::opt_u32`]).
    pub fn opt_i64_array(&self, key: &str) -> Result<Option<Vec<i64>>> {
        self.typed(key, "an array of integers", |v| v.as_array()?.to_i64_vec())
    }

    /// An integer that fits `u32`; an error naming `key` if it is missing,
    /// has another type or does not fit.
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.required(key, self.opt_u32(key))
    }

    /// An integer that fits `u64` (see [`Gguf::get_u32`]).
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.required(key, self.opt_u64(key))
    }

    /// An integer that fits `usize` (see [`Gguf::get_u32`]).
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        self.required(key, self.opt_usize(key))
    }

    /// An integer that fits `i32` (see [`Gguf::get_u32`]).
    pub fn get_i32(&self, key: &str) -> Result<i32> {
        self.required(key, self.opt_i32(key))
    }

    /// An `f32` or `f64` as `f32` (see [`Gguf::get_u32`]).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.required(key, self.opt_f32(key))
    }

    /// A bool (see [`Gguf::get_u32`]).
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.required(key, self.opt_bool(key))
    }

    /// A string (see [`Gguf::get_u32`]).
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.required(key, self.opt_str(key))
    }

    /// An array of any type (see [`Gguf::get_u32`]).
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        self.required(key, self.opt_array(key))
    }

    /// An array of strings (see [`Gguf::get_u32`]).
    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        self.required(key, self.opt_str_array(key))
    }

    /// An array of `f32` or `f64` as `f32` (see [`Gguf::get_u32`]).
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>> {
        self.required(key, self.opt_f32_array(key))
    }

    /// An array of integers as `i64` (see [`Gguf::get_u32`]).
    pub fn get_i64_array(&self, key: &str) -> Result<Vec<i64>> {
        self.required(key, self.opt_i64_array(key))
    }

    /// `general.architecture` (`llama`, `qwen2`, ...).
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    /// `"{architecture}.{suffix}"`, the key of an architecture parameter such
    /// as `llama.context_length`.
    pub fn arch_key(&self, suffix: &str) -> Result<String> {
        Ok(format!("{}.{suffix}", self.architecture()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getters_report_keys_and_types() {
        let mut w = GgufWriter::new();
        w.add("general.architecture", "llama")
            .add("llama.block_count", Value::I64(30))
            .add("neg", Value::I32(-3))
            .add("eps", Value::F64(1e-5))
            .add("toks", vec!["a", "b"]);
        let mut bytes = Vec::new();
        w.write_to(&mut bytes).unwrap();
        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.architecture().unwrap(), "llama");
        assert_eq!(g.get_u32(&g.arch_key("block_count").unwrap()).unwrap(), 30);
        assert_eq!(g.get_f32("eps").unwrap(), 1e-5);
        assert_eq!(g.get_str_array("toks").unwrap(), ["a", "b"]);
        assert_eq!(g.opt_u32("nope").unwrap(), None);
        let e = g.get_u32("nope").unwrap_err().to_string();
        assert!(e.contains("'nope' is missing"), "{e}");
        let e = g.get_u32("neg").unwrap_err().to_string();
        assert!(
            e.contains("'neg' is i32 -3, expected an integer that fits u32"),
            "{e}"
        );
        assert!(g.get_str("eps").is_err());
        assert!(g.require_tensor("x").is_err());
    }
}
