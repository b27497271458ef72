//! Model weights on a backend: every tensor of the file, packed into as few
//! `Weights` buffers as the backend's buffer limit allows, uploaded straight
//! from the memory map in bounded chunks.

use std::collections::HashMap;

use crate::backend::{Backend, BufferHandle, BufferUsage};
use crate::gguf::GgufFile;
use crate::graph::{Graph, TensorData, TensorId};
use crate::tensor::Layout;
use crate::{Error, Result};

/// Bytes per upload call: small enough for a smooth progress bar, a multiple
/// of 4 so every chunk but a tensor's last stays word-aligned for GPU copies.
const UPLOAD_CHUNK: usize = 4 << 20;

/// Where one weight lives.
#[derive(Clone, Debug)]
pub struct Weight {
    /// Index into [`Weights::buffers`].
    pub buffer: usize,
    /// Byte offset in that buffer (a multiple of the backend's alignment).
    pub offset: usize,
    /// Type and shape, as in the file.
    pub layout: Layout,
}

/// All tensors of a model file, resident on one backend.
pub struct Weights {
    /// Empty until [`Weights::upload`].
    buffers: Vec<BufferHandle>,
    sizes: Vec<usize>,
    tensors: HashMap<String, Weight>,
    bytes: usize,
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weights")
            .field("buffers", &self.sizes)
            .field("tensors", &self.tensors.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

fn round_up(n: usize, align: usize) -> usize {
    n.div_ceil(align) * align
}

impl Weights {
    /// Places every tensor of `file` in buffers of at most the backend's
    /// buffer size without allocating anything: graphs built from the result
    /// have the real layouts but unbound weights (enough to ask a backend
    /// which ops it supports). A tensor of a type wginfer does not compute
    /// with is an error naming it.
    pub fn plan(file: &GgufFile, backend: &dyn Backend) -> Result<Weights> {
        let align = backend.alignment().max(1);
        let cap = backend.max_buffer_size();
        let mut sizes: Vec<usize> = Vec::new();
        let mut tensors = HashMap::new();
        for info in file.tensors() {
            let layout = Layout::contiguous(info.dtype()?, info.ne)?;
            if layout.span_bytes() != info.size {
                return Err(Error::invalid(format!(
                    "tensor '{}': {} bytes in the file, {} expected for {:?} {}",
                    info.name,
                    info.size,
                    layout.span_bytes(),
                    info.shape(),
                    info.type_name()
                )));
            }
            if info.size > cap {
                return Err(Error::OutOfMemory(format!(
                    "tensor '{}' ({} bytes) exceeds the {}-byte buffer limit of {}",
                    info.name,
                    info.size,
                    cap,
                    backend.name()
                )));
            }
            let fits = sizes
                .last()
                .is_some_and(|&used| round_up(used, align) + info.size <= cap);
            if !fits {
                sizes.push(0);
            }
            let buffer = sizes.len() - 1;
            let offset = round_up(sizes[buffer], align);
            sizes[buffer] = offset + info.size;
            let w = Weight {
                buffer,
                offset,
                layout,
            };
            tensors.insert(info.name.clone(), w);
        }
        Ok(Weights {
            buffers: Vec::new(),
            sizes,
            tensors,
            bytes: file.tensors().iter().map(|i| i.size).sum(),
        })
    }

    /// Allocates the planned buffers and uploads every tensor of `file`
    /// (the file this plan was made from) to `backend`, calling
    /// `progress(done, total)` in bytes as it goes.
    pub fn upload(
        mut self,
        file: &GgufFile,
        backend: &dyn Backend,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Weights> {
        self.buffers = self
            .sizes
            .iter()
            .map(|&s| backend.alloc_buffer(s.max(1), BufferUsage::Weights))
            .collect::<Result<Vec<_>>>()?;
        let (total, mut done) = (self.bytes, 0);
        progress(0, total);
        for info in file.tensors() {
            let w = self.get(&info.name)?;
            let buffer = self.buffer(w)?;
            for (i, chunk) in file.tensor_data(info).chunks(UPLOAD_CHUNK).enumerate() {
                backend.write_buffer(buffer, w.offset + i * UPLOAD_CHUNK, chunk)?;
                done += chunk.len();
                progress(done, total);
            }
        }
        backend.synchronize()?;
        Ok(self)
    }

    /// [`Weights::plan`] then [`Weights::upload`].
    pub fn load(
        file: &GgufFile,
        backend: &dyn Backend,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Weights> {
        Weights::plan(file, backend)?.upload(file, backend, progress)
    }

    fn buffer(&self, w: &Weight) -> Result<&BufferHandle> {
        self.buffers
            .get(w.buffer)
            .ok_or_else(|| Error::invalid("the weights are planned but not uploaded"))
    }

    /// The buffers holding the weights.
    pub fn buffers(&self) -> &[BufferHandle] {
        &self.buffers
    }

    /// Total bytes of tensor data.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The weight called `name`, or an error naming it.
    pub fn get(&self, name: &str) -> Result<&Weight> {
        self.tensors
            .get(name)
            .ok_or_else(|| Error::invalid(format!("the model has no tensor '{name}'")))
    }

    /// Checks that `name` exists with shape `ne` (ggml order, padded with ones).
    pub fn expect_shape(&self, name: &str, ne: &[usize]) -> Result<()> {
        let have = self.get(name)?.layout.ne;
        let want = crate::graph::shape4(ne)?;
        if have != want {
            return Err(Error::shape(format!(
                "tensor '{name}' has shape {have:?}; the model's hyperparameters need {want:?}"
            )));
        }
        Ok(())
    }

    /// Adds `name` to `g` as an input bound to its bytes on the backend
    /// (unbound when the weights are only planned).
    pub fn input(&self, g: &mut Graph, name: &str) -> Result<TensorId> {
        let w = self.get(name)?;
        let ne = w.layout.ne;
        let id = g.input(name, w.layout.dtype, &ne)?;
        if let Some(buffer) = self.buffers.get(w.buffer) {
            let data = TensorData {
                buffer: buffer.clone(),
                offset: w.offset,
            };
            g.bind(id, data)?;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::CpuBackend;
    use crate::gguf::GgufWriter;
    use crate::DType;

    fn write(name: &str, w: &mut GgufWriter) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("wginfer-{}-{name}.gguf", std::process::id()));
        w.write_file(&path).unwrap();
        path
    }

    #[test]
    fn uploads_aligned_and_names_unsupported_tensors() {
        let cpu = CpuBackend::with_threads(1);
        let a: Vec<u8> = (0..3 * 4).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..5 * 2).map(|i| 100 + i as u8).collect();
        let mut w = GgufWriter::new();
        w.add_tensor("a", DType::F32, &[3], a.clone()).unwrap();
        w.add_tensor("b", DType::F16, &[5], b.clone()).unwrap();
        let path = write("ok", &mut w);
        let file = GgufFile::open(&path).unwrap();
        let mut seen = Vec::new();
        let weights = Weights::load(&file, &cpu, &mut |d, t| seen.push((d, t))).unwrap();
        assert_eq!(seen.first(), Some(&(0, 22)));
        assert_eq!(seen.last(), Some(&(22, 22)));
        let wb = weights.get("b").unwrap();
        assert_eq!(wb.offset % cpu.alignment(), 0);
        let mut out = vec![0u8; b.len()];
        cpu.read_buffer(&weights.buffers()[wb.buffer], wb.offset, &mut out)
            .unwrap();
        assert_eq!(out, b);
        assert!(weights.expect_shape("a", &[3]).is_ok());
        assert!(weights.expect_shape("a", &[4]).is_err());
        assert!(weights.get("c").is_err());
        drop(file);
        let _ = std::fs::remove_file(path);

        let mut w = GgufWriter::new();
        w.add_tensor_raw("blk.0.odd", 13, &[256], vec![0u8; 176])
            .unwrap(); // q5_K
        let path = write("bad", &mut w);
        let file = GgufFile::open(&path).unwrap();
        let e = Weights::plan(&file, &cpu).unwrap_err().to_string();
        assert!(e.contains("tensor 'blk.0.odd' has type q5_K"), "{e}");
        drop(file);
        let _ = std::fs::remove_file(path);
    }
}
