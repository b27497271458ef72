//! Writing GGUF version 3 files.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::types::GgmlType;
use super::{Array, Value};
use super::{DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_STRING_LEN};
use crate::{DType, Error, Result};

/// Writes the bytes of one tensor into the file.
type Producer<'a> = Box<dyn FnMut(&mut dyn Write) -> io::Result<()> + 'a>;

enum Source<'a> {
    Bytes(Cow<'a, [u8]>),
    Producer(Producer<'a>),
}

struct PendingTensor<'a> {
    name: String,
    ggml_type: u32,
    ne: Vec<u64>,
    size: u64,
    source: Source<'a>,
}

/// Builds a GGUF version 3 file: metadata in insertion order, then tensor
/// infos, then each tensor's data at an aligned offset, in insertion order.
///
/// Tensor data can be owned, borrowed (`'a`) or produced by a callback while
/// the file is written ([`GgufWriter::add_tensor_with`]), so a large model
/// never has to be held in memory twice. The alignment is
/// `general.alignment` if it is set (see [`GgufWriter::set_alignment`]),
/// else 32.
#[derive(Default)]
pub struct GgufWriter<'a> {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor<'a>>,
}

/// Counts what a producer writes and refuses to write past `limit`.
struct Limited<'w> {
    inner: &'w mut dyn Write,
    written: u64,
    limit: u64,
}

impl Write for Limited<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written.saturating_add(buf.len() as u64) > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "tensor producer wrote more bytes than the tensor holds",
            ));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) -> Result<()> {
    if s.len() > MAX_STRING_LEN {
        return Err(Error::invalid(format!(
            "string of {} bytes is longer than GGUF readers accept ({MAX_STRING_LEN})",
            s.len()
        )));
    }
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_value(out: &mut Vec<u8>, v: &Value, depth: usize) -> Result<()> {
    match v {
        Value::U8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_str(out, s)?,
        Value::Array(a) => put_array(out, a, depth + 1)?,
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
    Ok(())
}

fn put_array(out: &mut Vec<u8>, a: &Array, depth: usize) -> Result<()> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(Error::invalid(format!(
            "arrays nested more than {MAX_ARRAY_DEPTH} deep cannot be read back"
        )));
    }
    put_u32(out, a.elem_type().id());
    put_u64(out, a.len() as u64);
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => le!(v),
        Array::U16(v) => le!(v),
        Array::I16(v) => le!(v),
        Array::U32(v) => le!(v),
        Array::I32(v) => le!(v),
        Array::F32(v) => le!(v),
        Array::U64(v) => le!(v),
        Array::I64(v) => le!(v),
        Array::F64(v) => le!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => {
            for s in v {
                put_str(out, s)?;
            }
        }
        Array::Array(v) => {
            for inner in v {
                put_array(out, inner, depth + 1)?;
            }
        }
    }
    Ok(())
}

fn padding(n: u64, alignment: u64) -> u64 {
    (alignment - n % alignment) % alignment
}

fn write_zeros(w: &mut dyn Write, mut n: u64) -> io::Result<()> {
    const ZEROS: [u8; 256] = [0; 256];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        w.write_all(ZEROS.get(..k).unwrap_or(&[]))?;
        n -= k as u64;
    }
    Ok(())
}

impl<'a> GgufWriter<'a> {
    /// An empty writer.
    pub fn new() -> Self {
        GgufWriter::default()
    }

    /// Sets metadata `key` to `value`: a new key goes last, an existing key
    /// keeps its place and gets the new value.
    pub fn add(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        let key = key.into();
        let value = value.into();
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key, value)),
        }
        self
    }

    /// Sets `general.alignment`; it must be a power of two that fits u32.
    pub fn set_alignment(&mut self, alignment: usize) -> Result<&mut Self> {
        match u32::try_from(alignment) {
            Ok(a) if a.is_power_of_two() => Ok(self.add("general.alignment", Value::U32(a))),
            _ => Err(Error::invalid(format!(
                "GGUF alignment {alignment} is not a power of two that fits u32"
            ))),
        }
    }

    /// The alignment the file will use.
    pub fn alignment(&self) -> Result<usize> {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => Ok(DEFAULT_ALIGNMENT),
            Some((_, Value::U32(a))) if a.is_power_of_two() => Ok(*a as usize),
            Some((_, v)) => Err(Error::invalid(format!(
                "general.alignment must be a u32 power of two, not {} {v}",
                v.type_description()
            ))),
        }
    }

    fn check_tensor(&self, name: &str, ggml_type: u32, ne: &[usize]) -> Result<(Vec<u64>, u64)> {
        let bad = |msg: String| Error::invalid(format!("tensor '{name}': {msg}"));
        if name.len() > MAX_STRING_LEN {
            return Err(bad("name is too long".into()));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(bad("a tensor of that name was already added".into()));
        }
        let ty = GgmlType::from_id(ggml_type)
            .ok_or_else(|| bad(format!("unknown ggml type id {ggml_type}")))?;
        if !(1..=4).contains(&ne.len()) || ne.contains(&0) {
            return Err(bad(format!(
                "shape {ne:?} must have 1 to 4 dimensions, each at least 1"
            )));
        }
        let ne: Vec<u64> = ne.iter().map(|&d| d as u64).collect();
        let n = ne
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| bad(format!("element count of shape {ne:?} overflows")))?;
        let size = ty
            .bytes_for(n)
            .filter(|_| ne.first().is_some_and(|&r| r % ty.block_elems as u64 == 0))
            .ok_or_else(|| {
                bad(format!(
                    "row length {} is not a multiple of the {} block size {}",
                    ne.first().copied().unwrap_or(0),
                    ty.name,
                    ty.block_elems
                ))
            })?;
        Ok((ne, size))
    }

    /// Adds a tensor of a type wginfer computes with; `ne` is in ggml order
    /// (`ne[0]` is the row length) and `data` must hold exactly its bytes.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        ne: &[usize],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        self.add_tensor_raw(name, dtype.ggml_id(), ne, data)
    }

    /// Adds a tensor of any ggml type in [`GGML_TYPES`](super::GGML_TYPES).
    pub fn add_tensor_raw(
        &mut self,
        name: impl Into<String>,
        ggml_type: u32,
        ne: &[usize],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        let name = name.into();
        let data = data.into();
        let (ne, size) = self.check_tensor(&name, ggml_type, ne)?;
        if data.len() as u64 != size {
            return Err(Error::invalid(format!(
                "tensor '{name}' of type {} and shape {ne:?} needs {size} bytes, got {}",
                super::ggml_type_name(ggml_type),
                data.len()
            )));
        }
        self.tensors.push(PendingTensor {
            name,
            ggml_type,
            ne,
            size,
            source: Source::Bytes(data),
        });
        Ok(self)
    }

    /// Adds a tensor whose data `produce` writes when the file is written; it
    /// must write exactly the tensor's byte size (an error otherwise).
    pub fn add_tensor_with(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        ne: &[usize],
        produce: impl FnMut(&mut dyn Write) -> io::Result<()> + 'a,
    ) -> Result<&mut Self> {
        let name = name.into();
        let (ne, size) = self.check_tensor(&name, dtype.ggml_id(), ne)?;
        self.tensors.push(PendingTensor {
            name,
            ggml_type: dtype.ggml_id(),
            ne,
            size,
            source: Source::Producer(Box::new(produce)),
        });
        Ok(self)
    }

    /// Number of tensors added.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// Header, metadata and tensor infos, unpadded.
    fn header(&self, alignment: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        put_u32(&mut out, 3);
        put_u64(&mut out, self.tensors.len() as u64);
        put_u64(&mut out, self.metadata.len() as u64);
        for (key, value) in &self.metadata {
            put_str(&mut out, key)?;
            put_u32(&mut out, value.value_type().id());
            put_value(&mut out, value, 0)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name)?;
            put_u32(&mut out, t.ne.len() as u32);
            for &d in &t.ne {
                put_u64(&mut out, d);
            }
            put_u32(&mut out, t.ggml_type);
            put_u64(&mut out, offset);
            offset = offset
                .checked_add(t.size)
                .and_then(|o| o.checked_add(padding(t.size, alignment)))
                .ok_or_else(|| Error::invalid("GGUF data section size overflows"))?;
        }
        Ok(out)
    }

    /// The size in bytes of the file [`GgufWriter::write_to`] would write.
    pub fn file_size(&self) -> Result<u64> {
        let alignment = self.alignment()? as u64;
        let header = self.header(alignment)?.len() as u64;
        let mut n = header + padding(header, alignment);
        for t in &self.tensors {
            n = n
                .checked_add(t.size + padding(t.size, alignment))
                .ok_or_else(|| Error::invalid("GGUF file size overflows"))?;
        }
        Ok(n)
    }

    /// Writes the file to `w` (calling the producers of
    /// [`GgufWriter::add_tensor_with`] in tensor order).
    pub fn write_to(&mut self, mut w: impl Write) -> Result<()> {
        let alignment = self.alignment()? as u64;
        let header = self.header(alignment)?;
        w.write_all(&header)?;
        write_zeros(&mut w, padding(header.len() as u64, alignment))?;
        for t in &mut self.tensors {
            match &mut t.source {
                Source::Bytes(data) => w.write_all(data)?,
                Source::Producer(produce) => {
                    let mut lim = Limited {
                        inner: &mut w,
                        written: 0,
                        limit: t.size,
                    };
                    produce(&mut lim)?;
                    if lim.written != t.size {
                        return Err(Error::invalid(format!(
                            "tensor '{}' producer wrote {} bytes, the tensor holds {}",
                            t.name, lim.written, t.size
                        )));
                    }
                }
            }
            write_zeros(&mut w, padding(t.size, alignment))?;
        }
        w.flush()?;
        Ok(())
    }

    /// Writes the file to `path` (created or truncated), buffered.
    pub fn write_file(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let with_path = |e: Error| match e {
            Error::Io { path: None, source } => Error::io(path, source),
            other => other,
        };
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        self.write_to(&mut w).map_err(with_path)?;
        w.into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
        Ok(())
    }
}
