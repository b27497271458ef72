//! The bounded GGUF reader: every length, count and offset is checked against
//! the bytes that are actually there before anything is allocated or sliced.

use std::collections::HashMap;

use super::types::{GgmlType, TensorInfo};
use super::{Array, Value, ValueType};
use super::{Gguf, MetadataEntry, DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_STRING_LEN};
use crate::{Error, Result};

/// Vectors of strings, arrays, metadata entries and tensor infos start with at
/// most this capacity and grow as elements are actually read, so a large
/// claimed count costs nothing until the bytes are there.
const PREALLOC_MAX: usize = 4096;

/// Smallest metadata entry: empty key (8), value type (4), a 1-byte value.
const MIN_KV_BYTES: u64 = 13;
/// Smallest tensor info: empty name (8), n_dims (4), one dim (8), type (4),
/// offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 32;

/// A GGUF format error at byte `offset`.
pub(super) fn err(offset: usize, msg: impl Into<String>) -> Error {
    Error::Gguf {
        offset: offset as u64,
        msg: msg.into(),
    }
}

/// Prefixes the message of a GGUF error with `ctx` (other errors pass through).
fn context(e: Error, ctx: impl FnOnce() -> String) -> Error {
    match e {
        Error::Gguf { offset, msg } => Error::Gguf {
            offset,
            msg: format!("{}: {msg}", ctx()),
        },
        other => other,
    }
}

/// Decodes little-endian `N`-byte items.
fn decode<T, const N: usize>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .filter_map(|c| <[u8; N]>::try_from(c).ok())
        .map(f)
        .collect()
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let slice = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end));
        match slice {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(err(
                self.pos,
                format!(
                    "unexpected end of file reading {what}: needs {n} bytes, {} left",
                    self.remaining()
                ),
            )),
        }
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let at = self.pos;
        let s = self.take(N, what)?;
        <[u8; N]>::try_from(s).map_err(|_| err(at, format!("short read of {what}")))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.bytes(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.bytes(what).map(u64::from_le_bytes)
    }

    /// A count that must fit in the remaining bytes, each item taking at
    /// least `min_item` bytes.
    fn count(&mut self, min_item: u64, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.u64(what)?;
        let left = self.remaining();
        let fits = n
            .checked_mul(min_item)
            .is_some_and(|need| need <= left as u64);
        match usize::try_from(n) {
            Ok(n) if fits => Ok(n),
            _ => Err(err(
                at,
                format!(
                    "{what} {n} is impossible: each needs at least {min_item} bytes, \
                     and only {left} bytes are left in the file"
                ),
            )),
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let len = self.u64(what)?;
        let left = self.remaining();
        if len > MAX_STRING_LEN as u64 {
            return Err(err(
                at,
                format!("{what}: string length {len} exceeds the limit of {MAX_STRING_LEN} bytes"),
            ));
        }
        if len > left as u64 {
            return Err(err(
                at,
                format!(
                    "{what}: string length {len} runs past the end of the file ({left} bytes left)"
                ),
            ));
        }
        let bytes = self.take(len as usize, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(err(
                at + 8 + e.valid_up_to(),
                format!("{what}: string is not valid UTF-8"),
            )),
        }
    }

    fn value_type(&mut self, what: &str) -> Result<ValueType> {
        let at = self.pos;
        let id = self.u32(what)?;
        ValueType::from_id(id).ok_or_else(|| err(at, format!("unknown {what} {id}")))
    }

    /// A value of type `ty`; `depth` is how many arrays enclose it.
    fn value(&mut self, ty: ValueType, depth: usize) -> Result<Value> {
        let at = self.pos;
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.bytes("u8 value")?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.bytes("i8 value")?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.bytes("u16 value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.bytes("i16 value")?)),
            ValueType::U32 => Value::U32(self.u32("u32 value")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.bytes("i32 value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.bytes("f32 value")?)),
            ValueType::U64 => Value::U64(self.u64("u64 value")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.bytes("i64 value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.bytes("f64 value")?)),
            ValueType::Bool => match self.bytes::<1>("bool value")? {
                [0] => Value::Bool(false),
                [1] => Value::Bool(true),
                [b] => return Err(err(at, format!("bool value is {b}, not 0 or 1"))),
            },
            ValueType::String => Value::String(self.string("string value")?),
            ValueType::Array => Value::Array(self.array(depth + 1)?),
        })
    }

    /// An array (type, count, elements) that is the `depth`-th nested one.
    fn array(&mut self, depth: usize) -> Result<Array> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(err(
                self.pos,
                format!("arrays are nested more than {MAX_ARRAY_DEPTH} deep"),
            ));
        }
        let ty = self.value_type("array element type")?;
        let min = ty.min_encoded_size();
        let what = format!("array length (of {ty} elements)");
        let n = self.count(min as u64, &what)?;
        // Fixed-size elements: `n * min` bytes are known to be there.
        let fixed = |c: &mut Self| c.take(n.saturating_mul(min), "array elements");
        Ok(match ty {
            ValueType::U8 => Array::U8(fixed(self)?.to_vec()),
            ValueType::I8 => Array::I8(decode(fixed(self)?, i8::from_le_bytes)),
            ValueType::U16 => Array::U16(decode(fixed(self)?, u16::from_le_bytes)),
            ValueType::I16 => Array::I16(decode(fixed(self)?, i16::from_le_bytes)),
            ValueType::U32 => Array::U32(decode(fixed(self)?, u32::from_le_bytes)),
            ValueType::I32 => Array::I32(decode(fixed(self)?, i32::from_le_bytes)),
            ValueType::F32 => Array::F32(decode(fixed(self)?, f32::from_le_bytes)),
            ValueType::U64 => Array::U64(decode(fixed(self)?, u64::from_le_bytes)),
            ValueType::I64 => Array::I64(decode(fixed(self)?, i64::from_le_bytes)),
            ValueType::F64 => Array::F64(decode(fixed(self)?, f64::from_le_bytes)),
            ValueType::Bool => {
                let at = self.pos;
                let bytes = fixed(self)?;
                let mut out = Vec::with_capacity(n);
                for (i, &b) in bytes.iter().enumerate() {
                    match b {
                        0 => out.push(false),
                        1 => out.push(true),
                        _ => {
                            return Err(err(
                                at + i,
                                format!("bool array element {i} is {b}, not 0 or 1"),
                            ))
                        }
                    }
                }
                Array::Bool(out)
            }
            ValueType::String => {
                let mut out = Vec::with_capacity(n.min(PREALLOC_MAX));
                for i in 0..n {
                    let s = self
                        .string("string array element")
                        .map_err(|e| context(e, || format!("element {i} of {n}")))?;
                    out.push(s);
                }
                Array::String(out)
            }
            ValueType::Array => {
                let mut out = Vec::with_capacity(n.min(PREALLOC_MAX));
                for i in 0..n {
                    // Name the element index at the outermost level only.
                    let a = self.array(depth + 1).map_err(|e| match depth {
                        1 => context(e, || format!("element {i} of {n}")),
                        _ => e,
                    })?;
                    out.push(a);
                }
                Array::Array(out)
            }
        })
    }
}

/// Reads the header: magic, version and the two counts.
fn header(c: &mut Cursor<'_>) -> Result<(u32, usize, usize)> {
    let magic = c.bytes::<4>("magic")?;
    if magic != *b"GGUF" {
        return Err(err(
            0,
            format!(
                "bad magic {:?} (bytes {magic:02x?}); a GGUF file starts with \"GGUF\"",
                String::from_utf8_lossy(&magic)
            ),
        ));
    }
    let version = c.u32("version")?;
    if version != 0 && version & 0xffff == 0 {
        return Err(err(
            4,
            format!(
                "big-endian GGUF (version {} byte-swapped) is not supported; \
                 wginfer reads little-endian files",
                version.swap_bytes()
            ),
        ));
    }
    match version {
        2 | 3 => {}
        1 => {
            return Err(err(
                4,
                "GGUF version 1 is not supported (it has 32-bit counts); \
                 convert the model again with a current llama.cpp",
            ))
        }
        v => {
            return Err(err(
                4,
                format!("unsupported GGUF version {v}; wginfer reads versions 2 and 3"),
            ))
        }
    }
    let n_tensors = c.count(MIN_TENSOR_INFO_BYTES, "tensor count")?;
    let n_kv = c.count(MIN_KV_BYTES, "metadata entry count")?;
    Ok((version, n_tensors, n_kv))
}

/// The alignment that `general.alignment` sets, or the default.
fn alignment(metadata: &[MetadataEntry], index: &HashMap<String, usize>) -> Result<usize> {
    let Some(e) = index
        .get("general.alignment")
        .and_then(|&i| metadata.get(i))
    else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match e.value {
        Value::U32(a) if a.is_power_of_two() => Ok(a as usize),
        Value::U32(a) => Err(err(
            e.offset as usize,
            format!("general.alignment is {a}; it must be a non-zero power of two"),
        )),
        ref v => Err(err(
            e.offset as usize,
            format!(
                "general.alignment must be a u32, not {}",
                v.type_description()
            ),
        )),
    }
}

/// Reads one tensor info; `at_offset` receives the position of its offset
/// field (for later error messages).
fn tensor_info(c: &mut Cursor<'_>, alignment: usize, at_offset: &mut usize) -> Result<TensorInfo> {
    let name = c.string("tensor name")?;
    let ctx = |e| context(e, || format!("tensor '{name}'"));
    let dims_at = c.pos;
    let n_dims = c.u32("dimension count").map_err(ctx)?;
    if !(1..=4).contains(&n_dims) {
        return Err(err(
            dims_at,
            format!("tensor '{name}' has {n_dims} dimensions; GGUF tensors have 1 to 4"),
        ));
    }
    let mut ne = [1usize; 4];
    let mut n_elements: u64 = 1;
    for (d, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
        let at = c.pos;
        let v = c.u64("dimension").map_err(ctx)?;
        if v == 0 {
            return Err(err(at, format!("tensor '{name}' dimension {d} is 0")));
        }
        n_elements = n_elements
            .checked_mul(v)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| {
                err(
                    at,
                    format!("tensor '{name}' element count overflows at dimension {d} ({v})"),
                )
            })?;
        *slot = usize::try_from(v).map_err(|_| {
            err(
                at,
                format!("tensor '{name}' dimension {d} ({v}) is too large"),
            )
        })?;
    }
    let type_at = c.pos;
    let type_id = c.u32("type").map_err(ctx)?;
    let ty = GgmlType::from_id(type_id).ok_or_else(|| {
        err(
            type_at,
            format!("tensor '{name}' has unknown ggml type id {type_id}"),
        )
    })?;
    if ne[0] % ty.block_elems != 0 {
        return Err(err(
            type_at,
            format!(
                "tensor '{name}' has type {} ({}-value blocks) but its row length ne[0] = {} \
                 is not a multiple of the block size",
                ty.name, ty.block_elems, ne[0]
            ),
        ));
    }
    let size = ty
        .bytes_for(n_elements)
        .and_then(|s| usize::try_from(s).ok())
        .ok_or_else(|| err(type_at, format!("tensor '{name}' byte size overflows")))?;
    *at_offset = c.pos;
    let offset = c.u64("data offset").map_err(ctx)?;
    if offset % alignment as u64 != 0 {
        return Err(err(
            *at_offset,
            format!(
                "tensor '{name}' offset {offset} is not a multiple of the alignment {alignment}"
            ),
        ));
    }
    Ok(TensorInfo {
        name,
        n_dims: n_dims as usize,
        ne,
        ggml_type: type_id,
        offset,
        size,
    })
}

/// Parses and checks a whole GGUF file held in `buf`.
pub(super) fn parse(buf: &[u8]) -> Result<Gguf> {
    let mut c = Cursor { buf, pos: 0 };
    let (version, n_tensors, n_kv) = header(&mut c)?;

    let mut metadata: Vec<MetadataEntry> = Vec::with_capacity(n_kv.min(PREALLOC_MAX));
    let mut index = HashMap::with_capacity(n_kv.min(PREALLOC_MAX));
    for i in 0..n_kv {
        let at = c.pos;
        let key = c
            .string("metadata key")
            .map_err(|e| context(e, || format!("metadata entry {i}")))?;
        if index.contains_key(&key) {
            return Err(err(at, format!("duplicate metadata key '{key}'")));
        }
        let value = c
            .value_type("value type")
            .and_then(|ty| c.value(ty, 0))
            .map_err(|e| context(e, || format!("metadata '{key}'")))?;
        index.insert(key.clone(), metadata.len());
        metadata.push(MetadataEntry {
            key,
            value,
            offset: at as u64,
        });
    }
    let metadata_end = c.pos;
    let alignment = alignment(&metadata, &index)?;

    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors.min(PREALLOC_MAX));
    let mut offset_fields = Vec::with_capacity(n_tensors.min(PREALLOC_MAX));
    let mut tensor_index = HashMap::with_capacity(n_tensors.min(PREALLOC_MAX));
    for i in 0..n_tensors {
        let at = c.pos;
        let mut at_offset = at;
        let info = tensor_info(&mut c, alignment, &mut at_offset)
            .map_err(|e| context(e, || format!("tensor info {i}")))?;
        if tensor_index.contains_key(&info.name) {
            return Err(err(at, format!("duplicate tensor name '{}'", info.name)));
        }
        tensor_index.insert(info.name.clone(), tensors.len());
        tensors.push(info);
        offset_fields.push(at_offset);
    }

    let data_offset = c
        .pos
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| err(c.pos, "data section offset overflows"))?;
    let file_size = buf.len();
    let mut ranges = Vec::with_capacity(tensors.len());
    for (t, &at) in tensors.iter().zip(&offset_fields) {
        let start = (data_offset as u64).checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.size as u64));
        match (start, end) {
            (Some(start), Some(end)) if end <= file_size as u64 => ranges.push((start, end, at)),
            _ => {
                return Err(err(
                    at,
                    format!(
                    "tensor '{}' data [{}..{}) runs past the end of the file (size {file_size})",
                    t.name,
                    start.map_or("overflow".into(), |s| s.to_string()),
                    end.map_or("overflow".into(), |e| e.to_string()),
                ),
                ))
            }
        }
    }
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges.get(i).map_or(0, |r| r.0));
    for w in order.windows(2) {
        if let [a, b] = *w {
            if let (Some(ra), Some(rb), Some(ta), Some(tb)) =
                (ranges.get(a), ranges.get(b), tensors.get(a), tensors.get(b))
            {
                if rb.0 < ra.1 {
                    return Err(err(
                        rb.2,
                        format!(
                            "tensor '{}' data [{}..{}) overlaps tensor '{}' data [{}..{})",
                            tb.name, rb.0, rb.1, ta.name, ra.0, ra.1
                        ),
                    ));
                }
            }
        }
    }

    Ok(Gguf {
        version,
        alignment,
        metadata,
        index,
        tensors,
        tensor_index,
        metadata_end,
        data_offset,
        file_size,
    })
}
