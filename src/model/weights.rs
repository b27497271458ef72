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
    buffers: Vec<BufferHandle>,
    tensors: HashMap<String, Weight>,
    bytes: usize,
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weights")
            .field("buffers", &self.buffers.len())
            .field("tensors", &self.tensors.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

fn round_up(n: usize, align: usize) -> usize {
    n.div_ceil(align) * align
}

impl Weights {
    /// Uploads every tensor of `file` to `backend`, calling `progress(done,
    /// total)` in bytes as it goes. A tensor of a type wginfer does not
    /// compute with is an error naming it, reported before anything is
    /// allocated.
    pub fn load(
        file: &GgufFile,
        backend: &dyn Backend,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Weights> {
        let align = backend.alignment().max(1);
        let cap = backend.max_buffer_size();
        // Pack in file order: (buffer index, offset) per tensor, and buffer sizes.
        let mut sizes: Vec<usize> = Vec::new();
        let mut tensors = HashMap::new();
        let mut order = Vec::new();
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
            tensors.insert(info.name.clone(), w.clone());
            order.push((info, w));
        }
        let buffers = sizes
            .iter()
            .map(|&s| backend.alloc_buffer(s.max(1), BufferUsage::Weights))
            .collect::<Result<Vec<_>>>()?;
        let total: usize = order.iter().map(|(i, _)| i.size).sum();
        let mut done = 0;
        progress(0, total);
        for (info, w) in order {
            let data = file.tensor_data(info);
            for (i, chunk) in data.chunks(UPLOAD_CHUNK).enumerate() {
                backend.write_buffer(&buffers[w.buffer], w.offset + i * UPLOAD_CHUNK, chunk)?;
                done += chunk.len();
                progress(done, total);
            }
        }
        backend.synchronize()?;
        Ok(Weights {
            buffers,
            tensors,
            bytes: total,
        })
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

    /// Adds `name` to `g` as an input bound to its bytes on the backend.
    pub fn input(&self, g: &mut Graph, name: &str) -> Result<TensorId> {
        let w = self.get(name)?;
        let ne = w.layout.ne;
        let id = g.input(name, w.layout.dtype, &ne)?;
        g.bind(
            id,
            TensorData {
                buffer: self.buffers[w.buffer].clone(),
                offset: w.offset,
            },
        )?;
        Ok(id)
    }
}
