//! Model weights on a backend: every tensor of the file, packed into as few
//! `Weights` buffers as the backend's buffer limit allows, uploaded straight
//! from the memory map in bounded chunks.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use super::placement::Home;
use crate::backend::{Backend, BufferHandle, BufferUsage};
use crate::gguf::{GgufFile, TensorInfo};
use crate::graph::{Graph, TensorData, TensorId};
use crate::tensor::Layout;
use crate::{Error, Result};

/// Bytes per upload call: small enough for a smooth progress bar, a multiple
/// of 4 so every chunk but a tensor's last stays word-aligned for GPU copies.
const UPLOAD_CHUNK: usize = 4 << 20;

/// One piece of a weight on one backend: rows `rows` (of dimension 1) of
/// the tensor, all of them unless row mode cut it.
#[derive(Clone, Debug)]
pub struct WeightPart {
    /// Index into [`Weights::buffers`].
    pub buffer: usize,
    /// Byte offset in that buffer (a multiple of the backend's alignment).
    pub offset: usize,
    /// The rows this part holds.
    pub rows: Range<usize>,
}

/// Where one weight lives.
#[derive(Clone, Debug)]
pub struct Weight {
    /// Type and shape of the whole tensor, as in the file.
    pub layout: Layout,
    /// Its pieces, in row order: one unless it is split by rows.
    pub parts: Vec<WeightPart>,
}

impl Weight {
    /// The layout of one part: the whole tensor's, with its rows only.
    pub fn part_layout(&self, part: &WeightPart) -> Result<Layout> {
        if self.parts.len() == 1 {
            return Ok(self.layout);
        }
        let mut ne = self.layout.ne;
        ne[1] = part.rows.len();
        Layout::contiguous(self.layout.dtype, ne)
    }

    /// The file bytes of `part`.
    fn part_bytes(&self, part: &WeightPart) -> Range<usize> {
        match self.parts.len() {
            1 => 0..self.layout.span_bytes(),
            _ => {
                let row = self.layout.nb[1];
                part.rows.start * row..part.rows.end * row
            }
        }
    }
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

/// A tensor's layout, checked against its size in the file.
fn checked_layout(info: &TensorInfo) -> Result<Layout> {
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
    Ok(layout)
}

/// How tensors stored one after another read as one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// Matrices of one row length: their rows, stacked.
    Rows,
    /// Vectors (e.g. the q/k/v biases): their values, one run after another.
    Values,
}

/// How tensors of sizes `ne` (ggml order) stack, if they do.
fn stacking<'a>(ne: impl Iterator<Item = &'a [usize; 4]> + Clone) -> Option<Stack> {
    let first = ne.clone().next()?;
    if ne.clone().all(|n| n[1] * n[2] * n[3] == 1) {
        return Some(Stack::Values);
    }
    let mut same_rows = ne;
    same_rows
        .all(|n| n[0] == first[0] && n[2] * n[3] == 1)
        .then_some(Stack::Rows)
}

/// The group's names and backend when its tensors can be stored as one
/// matrix or vector: all present, whole on one backend (within its buffer
/// limit), of one type and [`stacking`] as one.
fn joinable(
    group: &[String],
    infos: &HashMap<&str, &TensorInfo>,
    place: &dyn Fn(&str, usize) -> Home,
    backends: &[Arc<dyn Backend>],
    fallback: usize,
) -> Option<(Vec<String>, usize)> {
    let members = group
        .iter()
        .map(|n| infos.get(n.as_str()).copied())
        .collect::<Option<Vec<_>>>()?;
    let first = members.first()?;
    let b = match place(&first.name, first.ne[1]) {
        Home::On(b) => b.min(fallback),
        Home::Rows(_) => return None,
    };
    let same = members.iter().all(|i| {
        matches!(place(&i.name, i.ne[1]), Home::On(x) if x.min(fallback) == b)
            && i.ggml_type == first.ggml_type
    }) && stacking(members.iter().map(|i| &i.ne)).is_some();
    let total: usize = members.iter().map(|i| i.size).sum();
    (same && total <= backends[b].max_buffer_size()).then(|| (group.to_vec(), b))
}

/// Packs pieces into buffers, one open buffer per backend.
struct Packer<'a> {
    backends: &'a [Arc<dyn Backend>],
    slots: Vec<Slot>,
    open: Vec<Option<usize>>,
}

impl Packer<'_> {
    /// A buffer index and offset for `size` bytes of tensor `name` on backend `b`.
    fn place(&mut self, name: &str, b: usize, size: usize) -> Result<(usize, usize)> {
        let backend = &self.backends[b];
        let (align, cap) = (backend.alignment().max(1), backend.max_buffer_size());
        if size > cap {
            return Err(Error::OutOfMemory(format!(
                "tensor '{name}' ({size} bytes) exceeds the {cap}-byte buffer limit of {}",
                backend.name()
            )));
        }
        let buffer = match self.open[b] {
            Some(i) if round_up(self.slots[i].size, align) + size <= cap => i,
            _ => {
                self.slots.push(Slot {
                    backend: b,
                    size: 0,
                });
                self.open[b] = Some(self.slots.len() - 1);
                self.slots.len() - 1
            }
        };
        let offset = round_up(self.slots[buffer].size, align);
        self.slots[buffer].size = offset + size;
        Ok((buffer, offset))
    }
}

impl Weights {
    /// Places every tensor of `file` where `place(name, rows)` says (backend
    /// indices into `backends`, whole or cut by rows), packed into buffers of
    /// at most each backend's buffer size, without allocating anything. A
    /// piece larger than its backend's buffer limit goes to the last backend
    /// (the CPU) instead. A tensor of a type wginfer does not compute with
    /// is an error naming it.
    ///
    /// Each group of `adjacent` names (matrices read by one product, such
    /// as a layer's q, k and v) whose tensors all stay whole on one backend
    /// with one type and row length is placed back to back, so that
    /// [`Weights::joined_input`] can multiply them as one matrix.
    pub fn plan(
        file: &GgufFile,
        backends: &[Arc<dyn Backend>],
        place: &dyn Fn(&str, usize) -> Home,
        adjacent: &[Vec<String>],
    ) -> Result<Weights> {
        let fallback = backends
            .len()
            .checked_sub(1)
            .ok_or_else(|| Error::invalid("weights need a backend to live on"))?;
        let mut packer = Packer {
            backends,
            slots: Vec::new(),
            open: vec![None; backends.len()],
        };
        let infos: HashMap<&str, &TensorInfo> = file
            .tensors()
            .iter()
            .map(|i| (i.name.as_str(), i))
            .collect();
        let mut tensors = HashMap::new();
        for info in file.tensors() {
            if tensors.contains_key(&info.name) {
                continue; // placed with its group
            }
            let layout = checked_layout(info)?;
            let home = place(&info.name, info.ne[1]);
            let group = adjacent
                .iter()
                .find(|g| g.contains(&info.name))
                .and_then(|g| joinable(g, &infos, place, backends, fallback));
            if let Some((names, b)) = group {
                let layouts = names
                    .iter()
                    .map(|n| checked_layout(infos[n.as_str()]))
                    .collect::<Result<Vec<_>>>()?;
                let total = layouts.iter().map(|l| l.span_bytes()).sum();
                let (buffer, mut offset) = packer.place(&names[0], b, total)?;
                for (name, layout) in names.iter().zip(layouts) {
                    let part = WeightPart {
                        buffer,
                        offset,
                        rows: 0..layout.ne[1],
                    };
                    offset += layout.span_bytes();
                    let parts = vec![part];
                    tensors.insert(name.clone(), Weight { layout, parts });
                }
                continue;
            }
            let pieces = match home {
                Home::On(b) => vec![(b, 0..info.ne[1])],
                Home::Rows(_) if info.ne[2] * info.ne[3] != 1 => {
                    return Err(Error::invalid(format!(
                        "tensor '{}' of shape {:?} cannot be split by rows: it is not a matrix",
                        info.name,
                        info.shape()
                    )))
                }
                Home::Rows(rows) => rows,
            };
            let (row_bytes, whole) = (layout.nb[1], pieces.len() == 1);
            let mut weight = Weight {
                layout,
                parts: Vec::with_capacity(pieces.len()),
            };
            for (b, rows) in pieces {
                let size = if whole {
                    info.size
                } else {
                    rows.len() * row_bytes
                };
                let mut b = b.min(fallback);
                if size > backends[b].max_buffer_size() && b != fallback {
                    log::warn!(
                        "tensor '{}' ({size} bytes) exceeds the buffer limit of {}; it stays on {}",
                        info.name,
                        backends[b].name(),
                        backends[fallback].name()
                    );
                    b = fallback;
                }
                let (buffer, offset) = packer.place(&info.name, b, size)?;
                weight.parts.push(WeightPart {
                    buffer,
                    offset,
                    rows,
                });
            }
            tensors.insert(info.name.clone(), weight);
        }
        Ok(Weights {
            buffers: Vec::new(),
            slots: packer.slots,
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
            let data = file.tensor_data(info);
            for part in &w.parts {
                let buffer = self.buffer(part)?;
                let to = backend(&self.slots[part.buffer])?;
                let bytes = data.get(w.part_bytes(part)).ok_or_else(|| {
                    Error::invalid(format!("tensor '{}' is shorter than its rows", info.name))
                })?;
                for (i, chunk) in bytes.chunks(UPLOAD_CHUNK).enumerate() {
                    to.write_buffer(buffer, part.offset + i * UPLOAD_CHUNK, chunk)?;
                    done += chunk.len();
                    progress(done, total);
                }
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
        Weights::plan(file, &backends, &|_, _| Home::On(0), &[])?.upload(file, &backends, progress)
    }

    fn buffer(&self, part: &WeightPart) -> Result<&BufferHandle> {
        self.buffers
            .get(part.buffer)
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

    /// The backend (an index into the planned backends) of one part.
    pub fn part_backend(&self, part: &WeightPart) -> Result<usize> {
        self.slots
            .get(part.buffer)
            .map(|s| s.backend)
            .ok_or_else(|| Error::invalid("a weight part names no buffer"))
    }

    /// The backend of the tensor `name` (of its first part, if it is split).
    pub fn home(&self, name: &str) -> Result<usize> {
        let part =
            self.get(name)?.parts.first().ok_or_else(|| {
                Error::invalid(format!("tensor '{name}' has no part on any backend"))
            })?;
        self.part_backend(part)
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
    /// (unbound when the weights are only planned); a weight split by rows
    /// is an error (see [`Weights::parts`]).
    pub fn input(&self, g: &mut Graph, name: &str) -> Result<TensorId> {
        let w = self.get(name)?;
        match &w.parts[..] {
            [whole] => self.part_input(g, name, w, whole),
            _ => Err(Error::invalid(format!(
                "tensor '{name}' is split by rows; its parts are separate tensors"
            ))),
        }
    }

    /// Whether the file has a tensor called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensors `names`, planned back to back (see [`Weights::plan`]), as
    /// one input whose rows (or, for vectors, values) are theirs in order,
    /// bound like [`Weights::input`]; `None` when they are not stored that way.
    pub fn joined_input(&self, g: &mut Graph, names: &[&str]) -> Result<Option<TensorId>> {
        let weights = names
            .iter()
            .map(|n| self.get(n))
            .collect::<Result<Vec<_>>>()?;
        let Some(first) = weights.first() else {
            return Ok(None);
        };
        let Some(stack) = stacking(weights.iter().map(|w| &w.layout.ne)) else {
            return Ok(None);
        };
        let (mut rows, mut values, mut end) = (0, 0, None);
        for w in &weights {
            let [part] = &w.parts[..] else {
                return Ok(None);
            };
            let follows = end.is_none_or(|(buffer, at)| part.buffer == buffer && part.offset == at);
            if !follows || w.layout.dtype != first.layout.dtype {
                return Ok(None);
            }
            rows += w.layout.ne[1];
            values += w.layout.n_elements();
            end = Some((part.buffer, part.offset + w.layout.span_bytes()));
        }
        let ne = match stack {
            Stack::Values => vec![values],
            Stack::Rows => vec![first.layout.ne[0], rows],
        };
        let id = g.input(&names.join("+"), first.layout.dtype, &ne)?;
        let part = &first.parts[0];
        if let Some(buffer) = self.buffers.get(part.buffer) {
            let data = TensorData {
                buffer: buffer.clone(),
                offset: part.offset,
            };
            g.bind(id, data)?;
        }
        Ok(Some(id))
    }

    /// Adds each part of `name` to `g` as an input (one for a whole tensor),
    /// in row order, bound like [`Weights::input`].
    pub fn parts(&self, g: &mut Graph, name: &str) -> Result<Vec<TensorId>> {
        let w = self.get(name)?;
        w.parts
            .iter()
            .map(|p| self.part_input(g, name, w, p))
            .collect()
    }

    fn part_input(
        &self,
        g: &mut Graph,
        name: &str,
        w: &Weight,
        part: &WeightPart,
    ) -> Result<TensorId> {
        let layout = w.part_layout(part)?;
        let id = match w.parts.len() {
            1 => g.input(name, layout.dtype, &layout.ne)?,
            _ => g.input(
                &format!("{name}[{}..{}]", part.rows.start, part.rows.end),
                layout.dtype,
                &layout.ne,
            )?,
        };
        if let Some(buffer) = self.buffers.get(part.buffer) {
            let data = TensorData {
                buffer: buffer.clone(),
                offset: part.offset,
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

    #[test]
    fn matrices_stack_by_rows_and_vectors_by_values() {
        let stack = |ne: &[[usize; 4]]| stacking(ne.iter());
        assert!(stack(&[[64, 8, 1, 1], [64, 4, 1, 1]]) == Some(Stack::Rows));
        assert!(stack(&[[64, 1, 1, 1], [32, 1, 1, 1]]) == Some(Stack::Values));
        assert!(stack(&[[64, 8, 1, 1], [32, 8, 1, 1]]).is_none());
        assert!(stack(&[[64, 8, 2, 1], [64, 8, 2, 1]]).is_none());
        assert!(stack(&[]).is_none());
    }

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
        let wb = &weights.get("b").unwrap().parts[0];
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
        w.add_tensor_raw("blk.0.odd", 21, &[256], vec![0u8; 110])
            .unwrap(); // iq3_s
        let path = write("bad", &mut w);
        let file = GgufFile::open(&path).unwrap();
        let e = Weights::plan(&file, &[cpu], &|_, _| Home::On(0), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("tensor 'blk.0.odd' has type iq3_s"), "{e}");
        drop(file);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn row_split_parts_hold_their_rows() {
        let backends: Vec<Arc<dyn Backend>> = vec![
            Arc::new(CpuBackend::with_threads(1)),
            Arc::new(CpuBackend::with_threads(1)),
        ];
        let m: Vec<u8> = (0..4 * 6 * 4).map(|i| i as u8).collect(); // f32 [4, 6]
        let mut w = GgufWriter::new();
        w.add_tensor("m", DType::F32, &[4, 6], m.clone()).unwrap();
        let path = write("rows", &mut w);
        let file = GgufFile::open(&path).unwrap();
        let place = |_: &str, rows: usize| Home::Rows(vec![(1, 0..4), (0, 4..rows)]);
        let weights = Weights::plan(&file, &backends, &place, &[])
            .unwrap()
            .upload(&file, &backends, &mut |_, _| {})
            .unwrap();
        assert_eq!(weights.bytes_per_backend(2), vec![2 * 16, 4 * 16]);
        let weight = weights.get("m").unwrap();
        for (part, backend, bytes) in [(0, 1, &m[..64]), (1, 0, &m[64..])] {
            let p = &weight.parts[part];
            assert_eq!(weights.part_backend(p).unwrap(), backend);
            assert_eq!(weight.part_layout(p).unwrap().ne, [4, p.rows.len(), 1, 1]);
            let mut out = vec![0u8; bytes.len()];
            backends[backend]
                .read_buffer(&weights.buffers()[p.buffer], p.offset, &mut out)
                .unwrap();
            assert_eq!(out, bytes);
        }
        let mut g = Graph::new();
        assert!(
            weights.input(&mut g, "m").is_err(),
            "a split weight has parts"
        );
        assert_eq!(weights.parts(&mut g, "m").unwrap().len(), 2);
        drop(file);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn adjacent_groups_are_joined_into_one_matrix() {
        let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
        let rows = |n: usize, at: u8| -> Vec<u8> { (0..4 * 3 * n).map(|i| at + i as u8).collect() };
        let (q, k, v, odd) = (rows(4, 0), rows(2, 50), rows(2, 100), vec![0u8; 6]);
        let mut w = GgufWriter::new();
        // File order k, odd, v, q: the group is placed together anyway.
        w.add_tensor("k", DType::F32, &[3, 2], k.clone()).unwrap();
        w.add_tensor("odd", DType::F16, &[3], odd).unwrap();
        w.add_tensor("v", DType::F32, &[3, 2], v.clone()).unwrap();
        w.add_tensor("q", DType::F32, &[3, 4], q.clone()).unwrap();
        let path = write("joined", &mut w);
        let file = GgufFile::open(&path).unwrap();
        let group = vec!["q".to_string(), "k".to_string(), "v".to_string()];
        let unjoinable = vec!["q".to_string(), "odd".to_string()];
        let backends = [cpu.clone()];
        let weights = Weights::plan(&file, &backends, &|_, _| Home::On(0), &[group, unjoinable])
            .unwrap()
            .upload(&file, &backends, &mut |_, _| {})
            .unwrap();
        let mut g = Graph::new();
        let qkv = weights
            .joined_input(&mut g, &["q", "k", "v"])
            .unwrap()
            .unwrap();
        assert_eq!(g.layout(qkv).ne, [3, 8, 1, 1]);
        let data = g.data(qkv).unwrap();
        let mut out = vec![0u8; q.len() + k.len() + v.len()];
        cpu.read_buffer(&data.buffer, data.offset, &mut out)
            .unwrap();
        assert_eq!(out, [q, k, v].concat());
        assert!(weights
            .joined_input(&mut g, &["q", "odd"])
            .unwrap()
            .is_none());
        assert!(weights.joined_input(&mut g, &["k", "q"]).unwrap().is_none());
        drop(file);
        let _ = std::fs::remove_file(path);
    }
}
