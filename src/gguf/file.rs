//! A memory-mapped GGUF file.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::{Gguf, TensorInfo};
use crate::{Error, Result};

/// A GGUF file mapped into memory: the parsed [`Gguf`] (reachable through
/// `Deref`) plus zero-copy access to tensor data.
///
/// The file must not be modified or truncated while it is open: like every
/// memory map, that would change (or invalidate) bytes that were checked.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    map: Mmap,
    gguf: Gguf,
}

impl GgufFile {
    /// Maps the file at `path` and parses it ([`Gguf::parse`]).
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the map is read-only and its bytes are treated as untrusted
        // input (every access is bounds-checked). Soundness additionally needs
        // that no one truncates or rewrites the file while it is mapped, which
        // is documented on the type; this is the usual contract of mmap.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let gguf = Gguf::parse(&map)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            map,
            gguf,
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed header, metadata and tensor infos.
    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The data of a tensor of this file, without copying. An info that is not
    /// from this file gives its range clamped to the file (possibly empty).
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        self.map.get(self.gguf.tensor_range(info)).unwrap_or(&[])
    }

    /// The info and data of the tensor called `name`, or an error naming it.
    pub fn tensor_by_name(&self, name: &str) -> Result<(&TensorInfo, &[u8])> {
        let info = self.gguf.require_tensor(name)?;
        Ok((info, self.tensor_data(info)))
    }
}

impl Deref for GgufFile {
    type Target = Gguf;

    fn deref(&self) -> &Gguf {
        &self.gguf
    }
}
