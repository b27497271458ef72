//! Model weights on a backend: every tensor of the file, packed into as few
//! `Weights` buffers as the backend's buffer limit allows, uploaded straight
//! from the memory map in bounded chunks.

use std::collections::HashMap;
use std::sync::Arc;

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

/// One weight buffer: the backend (an index into the backends the weights
/// were planned for) and its size.
#[derive(Clone, Copy, Debug)]
struct Slot {
    backend: usize,
    size: usize,
}

/// All tensors of a model file, resident on one or more backends.
pub struct Weights {
    /// Empty until [`Weights::upload`].
    buffers: Vec<BufferHandle>,
    slots: Vec<Slot>,
    tensors: HashMap<String, Weight>,
    bytes: usize,
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weights")
            .field("buffers", &self.slots)
            .field("tensors", &self.tensors.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

fn round_up(n: usize, align: usize) -> usize {
    n.div_ceil(align) * align
}

impl Weights {
    /// Places every tensor of `file` on the backend `place(name)` picks (an
    /// index into `backends`), packed into buffers of at most that backend's
    /// buffer size, without allocating anything. A tensor larger than its
    /// backend's buffer limit goes to the last backend (the CPU) instead. A
    /// tensor of a type wginfer does not compute with is an error naming it.
    pub fn plan(
        file: &GgufFile,
        backends: &[Arc<dyn Backend>],
        place: &dyn Fn(&str) -> usize,
    ) -> Result<Weights> {
        let fallback = backends
            .len()
            .checked_sub(1)
            .ok_or_else(|| Error::invalid("weights need a backend to live on"))?;
        let mut slots: Vec<Slot> = Vec::new();
        let mut open: Vec<Option<usize>> = vec![None; backends.len()];
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
            let mut b = place(&info.name).min(fallback);
            if info.size > backends[b].max_buffer_size() && b != fallback {
                log::warn!(
                    "tensor '{}' ({} bytes) exceeds the buffer limit of {}; it stays on {}",
                    info.name,
                    info.size,
                    backends[b].name(),
                    backends[fallback].name()
                );
                b = fallback;
            }
            let (align, cap) = (
                backends[b].alignment().max(1),
                backends[b].max_buffer_size(),
            );
            if info.size > cap {
                return Err(Error::OutOfMemory(format!(
                    "tensor '{}' ({} bytes) exceeds the {}-byte buffer limit of {}",
                    info.name,
                    info.size,
                    cap,
                    backends[b].name()
                )));
            }
            let buffer = match open[b] {
                Some(i) if round_up(slots[i].size, align) + info.size <= cap => i,
                _ => {
                    slots.push(Slot {
                        backend: b,
                        size: 0,
                    });
                    open[b] = Some(slots.len() - 1);
                    slots.len() - 1
                }
            };
            let offset = round_up(slots[buffer].size, align);
            slots[buffer].size = offset + info.size;
            let w = Weight {
                buffer,
                offset,
                layout,
            };
            tensors.insert(info.name.clone(), w);
        }
        Ok(Weights {
            buffers: Vec::new(),
            slots,
            tensors,
            bytes: file.tensors().iter().map(|i| i.size).sum(),
        })
    }

    /// Bytes of weights planned for each backend, by index.
    pub fn bytes_per_backend(&self, n_backends: usize) -> Vec<usize> {
        let mut out = vec![0; n_backends];
        for s in &self.slots {
            if let Some(o) = out.get_mut(s.backend) {
                *o += s.size;
            }
        }
        out
    }

    /// Allocates the planned buffers and uploads every tensor of `file`
    /// (the file this plan was made from) to its backend, calling
    /// `progress(done, total)` in bytes as it goes.
    pub fn upload(
        mut self,
        file: &GgufFile,
        backends: &[Arc<dyn Backend>],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Weights> {
        let backend = |slot: &Slot| {
            backends
                .get(slot.backend)
                .ok_or_else(|| Error::invalid("the weights were planned for other backends"))
        };
        self.buffers = self
            .slots
            .iter()
            .map(|s| backend(s)?.alloc_buffer(s.size.max(1), BufferUsage::Weights))
            .collect::<Result<Vec<_>>>()?;
        let (total, mut done) = (self.bytes, 0);
        progress(0, total);
        for info in file.tensors() {
            let w = self.get(&info.name)?;
            let buffer = self.buffer(w)?;
            let to = backend(&self.slots[w.buffer])?;
            for (i, chunk) in file.tensor_data(info).chunks(UPLOAD_CHUNK).enumerate() {
                to.write_buffer(buffer, w.offset + i * UPLOAD_CHUNK, chunk)?;
                done += chunk.len();
                progress(done, total);
            }
        }
        for b in backends {
            b.synchronize()?;
        }
        Ok(self)
    }

    /// Every tensor on `backend`: [`Weights::plan`] then [`Weights::upload`].
    pub fn load(
        file: &GgufFile,
        backend: Arc<dyn Backend>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Weights> {
        let backends = [backend];
        Weights::plan(file, &backends, &|_| 0)?.upload(file, &backends, progress)
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
        let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
        let a: Vec<u8> = (0..3 * 4).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..5 * 2).map(|i| 100 + i as u8).collect();
        let mut w = GgufWriter::new();
        w.add_tensor("a", DType::F32, &[3], a.clone()).unwrap();
        w.add_tensor("b", DType::F16, &[5], b.clone()).unwrap();
        let path = write("ok", &mut w);
        let file = GgufFile::open(&path).unwrap();
        let mut seen = Vec::new();
        let weights = Weights::load(&file, cpu.clone(), &mut |d, t| seen.push((d, t))).unwrap();
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
        let e = Weights::plan(&file, &[cpu], &|_| 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tensor 'blk.0.odd' has type q5_K"), "{e}");
        drop(file);
        let _ = std::fs::remove_file(path);
    }
}
