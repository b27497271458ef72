//! Device buffers and host transfers: uploads through the queue in bounded
//! chunks, downloads through a reusable MAP_READ staging buffer.

use std::any::Any;
use std::sync::{Arc, Mutex};

use super::Device;
use crate::backend::{check_range, BackendBuffer, BufferUsage, PendingRead};
use crate::{Error, Result};

/// wgpu copies move whole 4-byte words.
const WORD: usize = wgpu::COPY_BUFFER_ALIGNMENT as usize;
/// Buffers are allocated in whole 16-byte words: kernels may bind their
/// activations as `array<vec4<u32>>` (one load for four values), which
/// needs bindings of whole vec4s. A multiple of wgpu's 4-byte copy unit.
pub(super) const VEC4_BYTES: usize = 16;
/// Bytes handed to the queue before a submit lets wgpu recycle its staging
/// memory: a large weight upload never holds a second full copy.
const UPLOAD_CHUNK: usize = 64 << 20;

/// A storage buffer on one wgpu device.
pub struct WgpuBuffer {
    pub(super) buffer: wgpu::Buffer,
    pub(super) owner: u64,
    size: usize,
    usage: BufferUsage,
    backend_name: String,
}

impl BackendBuffer for WgpuBuffer {
    fn size(&self) -> usize {
        self.size
    }
    fn usage(&self) -> BufferUsage {
        self.usage
    }
    fn backend_name(&self) -> &str {
        &self.backend_name
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Bytes of each small readback buffer [`Transfers::start_read`] keeps.
const SMALL_READ: usize = 256;

/// The host side of transfers for one device.
pub struct Transfers {
    staging: Mutex<Option<wgpu::Buffer>>,
    /// Small MAP_READ buffers for reads in flight, returned when finished.
    small: Arc<Mutex<Vec<wgpu::Buffer>>>,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl Transfers {
    pub fn new() -> Transfers {
        Transfers {
            staging: Mutex::new(None),
            small: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Allocates a storage buffer, catching out-of-memory and limit errors.
    pub fn alloc(
        &self,
        dev: &Device,
        size: usize,
        usage: BufferUsage,
        owner: u64,
    ) -> Result<WgpuBuffer> {
        let limit = dev.gpu.limits.max_buffer_size as usize;
        let padded = round_up(size.max(1), VEC4_BYTES);
        if padded > limit {
            return Err(Error::OutOfMemory(format!(
                "{}: a buffer of {size} bytes exceeds the device's {limit}-byte buffer limit",
                dev.name()
            )));
        }
        let buffer = dev.catch(|| {
            dev.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(match usage {
                    BufferUsage::Weights => "wginfer weights",
                    BufferUsage::Compute => "wginfer compute",
                }),
                size: padded as u64,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            })
        })?;
        Ok(WgpuBuffer {
            buffer,
            owner,
            size,
            usage,
            backend_name: dev.name().to_string(),
        })
    }

    /// Copies `data` to `offset`; unaligned edges are merged with the bytes there.
    pub fn write(&self, dev: &Device, buf: &WgpuBuffer, offset: usize, data: &[u8]) -> Result<()> {
        check_range(dev.name(), buf.size, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let start = offset / WORD * WORD;
        let end = round_up(offset + data.len(), WORD);
        if start != offset || end - start != data.len() {
            // Read the covering words, patch, write back: rare (odd f16 counts).
            let mut words = vec![0u8; end - start];
            self.read_padded(dev, buf, start, &mut words)?;
            words[offset - start..offset - start + data.len()].copy_from_slice(data);
            return self.write(dev, buf, start, &words);
        }
        for (i, chunk) in data.chunks(UPLOAD_CHUNK).enumerate() {
            dev.gpu
                .queue
                .write_buffer(&buf.buffer, (offset + i * UPLOAD_CHUNK) as u64, chunk);
            if data.len() > UPLOAD_CHUNK {
                dev.gpu.queue.submit([]);
                dev.wait()?;
            }
        }
        Ok(())
    }

    /// Copies bytes at `offset` into `out`.
    pub fn read(
        &self,
        dev: &Device,
        buf: &WgpuBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        check_range(dev.name(), buf.size, offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let start = offset / WORD * WORD;
        let end = round_up(offset + out.len(), WORD);
        if start == offset && end - start == out.len() {
            return self.read_padded(dev, buf, start, out);
        }
        let mut words = vec![0u8; end - start];
        self.read_padded(dev, buf, start, &mut words)?;
        out.copy_from_slice(&words[offset - start..offset - start + out.len()]);
        Ok(())
    }

    /// Copies at most [`SMALL_READ`] bytes at `offset` into a readback buffer
    /// of their own behind the work submitted so far, without waiting: the
    /// returned read waits for that copy only, not for work submitted after
    /// it (a token read back while the next step runs).
    pub fn start_read(
        &self,
        dev: &Device,
        buf: &WgpuBuffer,
        offset: usize,
        len: usize,
    ) -> Result<PendingRead> {
        check_range(dev.name(), buf.size, offset, len)?;
        let start = offset / WORD * WORD;
        let size = round_up(offset + len, WORD) - start;
        if size > SMALL_READ {
            let mut bytes = vec![0u8; len];
            self.read(dev, buf, offset, &mut bytes)?;
            return Ok(PendingRead::done(bytes));
        }
        let pooled = self
            .small
            .lock()
            .map_err(|_| dev.error("readback pool lock poisoned"))?
            .pop();
        let stage = match pooled {
            Some(stage) => stage,
            None => dev.catch(|| {
                dev.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wginfer small readback"),
                    size: SMALL_READ as u64,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?,
        };
        let mut encoder = dev.gpu.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&buf.buffer, start as u64, &stage, 0, size as u64);
        let submission = dev.gpu.queue.submit([encoder.finish()]);
        let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
        stage
            .slice(..size as u64)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        let device = dev.gpu.device.clone();
        let name = dev.name().to_string();
        let pool = Arc::clone(&self.small);
        let skip = offset - start;
        Ok(PendingRead::new(move |out| {
            let error = |msg: String| Error::Backend {
                backend: name.clone(),
                msg,
            };
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(submission),
                    timeout: None,
                })
                .map_err(|e| error(format!("waiting for a readback failed: {e}")))?;
            match pollster::block_on(rx.receive()) {
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(error(format!("mapping a readback failed: {e}"))),
                None => return Err(error("a readback mapping was dropped".into())),
            }
            {
                let view = stage
                    .slice(..size as u64)
                    .get_mapped_range()
                    .map_err(|e| error(format!("reading a readback failed: {e}")))?;
                out.copy_from_slice(&view[skip..skip + out.len()]);
            }
            stage.unmap();
            if let Ok(mut pool) = pool.lock() {
                pool.push(stage);
            }
            Ok(())
        }))
    }

    /// Reads several ranges with one submit and one wait: each word-aligned
    /// window goes into the staging buffer after the previous one. Windows
    /// over the staging buffer's largest size are read one by one.
    pub fn read_many(
        &self,
        dev: &Device,
        reads: &mut [(&WgpuBuffer, usize, &mut [u8])],
    ) -> Result<()> {
        let mut windows = Vec::with_capacity(reads.len());
        for (buf, offset, out) in reads.iter() {
            check_range(dev.name(), buf.size, *offset, out.len())?;
            let start = offset / WORD * WORD;
            windows.push((
                buf.buffer.clone(),
                start,
                round_up(offset + out.len(), WORD) - start,
            ));
        }
        let total: usize = windows.iter().map(|w| w.2).sum();
        if total == 0 {
            return Ok(());
        }
        if total > UPLOAD_CHUNK {
            for (buf, offset, out) in reads.iter_mut() {
                self.read(dev, buf, *offset, out)?;
            }
            return Ok(());
        }
        self.staged(dev, &windows, |bytes| {
            let mut at = 0;
            for ((_, offset, out), (_, start, len)) in reads.iter_mut().zip(&windows) {
                let skip = *offset - start;
                out.copy_from_slice(&bytes[at + skip..at + skip + out.len()]);
                at += len;
            }
        })
    }

    /// Reads a word-aligned range through the staging buffer, in pieces no
    /// larger than the staging buffer may grow.
    fn read_padded(
        &self,
        dev: &Device,
        buf: &WgpuBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        for (i, piece) in out.chunks_mut(UPLOAD_CHUNK).enumerate() {
            let window = (buf.buffer.clone(), offset + i * UPLOAD_CHUNK, piece.len());
            self.staged(dev, &[window], |bytes| piece.copy_from_slice(bytes))?;
        }
        Ok(())
    }

    /// Copies word-aligned windows `(buffer, offset, len)`, at most
    /// [`UPLOAD_CHUNK`] bytes in all, one after another into the staging
    /// buffer with one submit, waits, and hands the staged bytes to `f`.
    fn staged(
        &self,
        dev: &Device,
        windows: &[(wgpu::Buffer, usize, usize)],
        f: impl FnOnce(&[u8]),
    ) -> Result<()> {
        let total: usize = windows.iter().map(|w| w.2).sum();
        let mut staging = self
            .staging
            .lock()
            .map_err(|_| dev.error("staging buffer lock poisoned"))?;
        if staging.as_ref().is_none_or(|s| s.size() < total as u64) {
            *staging = Some(dev.catch(|| {
                dev.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wginfer readback"),
                    size: (total as u64)
                        .max(1 << 16)
                        .next_power_of_two()
                        .min(UPLOAD_CHUNK as u64),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?);
        }
        let Some(stage) = staging.as_ref() else {
            return Err(dev.error("no staging buffer"));
        };
        let mut encoder = dev.gpu.device.create_command_encoder(&Default::default());
        let mut at = 0;
        for (buffer, offset, len) in windows {
            encoder.copy_buffer_to_buffer(buffer, *offset as u64, stage, at as u64, *len as u64);
            at += len;
        }
        dev.gpu.queue.submit([encoder.finish()]);
        let slice = stage.slice(..total as u64);
        let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        dev.wait()?;
        match pollster::block_on(rx.receive()) {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                return Err(dev.error(format!("mapping the readback buffer failed: {e}")))
            }
            None => return Err(dev.error("the readback mapping was dropped")),
        }
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| dev.error(format!("reading the readback buffer failed: {e}")))?;
            f(&view);
        }
        stage.unmap();
        Ok(())
    }
}
