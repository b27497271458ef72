//! Kernels: WGSL composed from shared pieces, compiled once per key.
//!
//! A kernel's source is `wgsl/common.wgsl`, the parameter declaration
//! (immediates or uniform), typed load/store helpers for its bindings, the
//! reduction helpers of the chosen variant, the op's own definitions and the
//! kernel body. The body is written once; types and variants only change the
//! generated helpers, so no kernel is copied per type.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use super::params::PARAMS_SIZE;
use super::{Device, Reduction};
use crate::{DType, Result};

const COMMON: &str = include_str!("../../../wgsl/common.wgsl");
const REDUCE_SUBGROUP: &str = include_str!("../../../wgsl/reduce_subgroup.wgsl");
const REDUCE_WORKGROUP: &str = include_str!("../../../wgsl/reduce_workgroup.wgsl");
const IDS_PLAIN: &str = include_str!("../../../wgsl/ids.wgsl");

/// Identifies one compiled kernel.
///
/// `body` and `defs` are compile-time constants, so they are compared and
/// hashed by address: hashing kilobytes of WGSL on every lookup (once per
/// dispatch) cost more host time than recording the dispatch.
#[derive(Clone, Debug)]
pub struct KernelKey {
    /// `<op>_<srcT>[_<dstT>][_<variant>]`, for logs.
    pub name: String,
    /// Source files after the generated prelude, in order.
    pub body: &'static [&'static str],
    /// Op-specific WGSL placed before the body (e.g. the unary function).
    pub defs: &'static str,
    /// `enable` directives the body needs, placed first ("" for none).
    pub enables: &'static str,
    /// Types of the source bindings, in binding order.
    pub srcs: Vec<DType>,
    /// Type of the destination binding.
    pub dst: DType,
    /// Whether the body uses `wg_sum`/`wg_max`.
    pub reduces: bool,
    /// Invocations per workgroup (a power of two).
    pub workgroup: u32,
    /// Independent groups the workgroup splits into (`GROUPS`; the mat-vec
    /// kernel's row groups), 1 for kernels that do not split.
    pub groups: u32,
    /// Whether the sources after the first are bound a second time, after
    /// the destination, as vec4 words, so the kernel can load four aligned
    /// values at once (`<name>_quad`).
    pub wide: bool,
}

impl KernelKey {
    /// Storage bindings: the sources, the destination, then the sources'
    /// vec4 views when [`KernelKey::wide`].
    pub fn binding_count(&self) -> usize {
        let views = if self.wide {
            self.srcs.len().saturating_sub(1)
        } else {
            0
        };
        self.srcs.len() + 1 + views
    }

    fn text_ids(&self) -> [usize; 6] {
        [
            self.body.as_ptr() as usize,
            self.body.len(),
            self.defs.as_ptr() as usize,
            self.defs.len(),
            self.enables.as_ptr() as usize,
            self.enables.len(),
        ]
    }
}

impl PartialEq for KernelKey {
    fn eq(&self, other: &Self) -> bool {
        self.text_ids() == other.text_ids()
            && self.name == other.name
            && self.srcs == other.srcs
            && self.dst == other.dst
            && self.reduces == other.reduces
            && self.workgroup == other.workgroup
            && self.groups == other.groups
            && self.wide == other.wide
    }
}

impl Eq for KernelKey {}

impl std::hash::Hash for KernelKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text_ids().hash(state);
        self.name.hash(state);
        self.srcs.hash(state);
        self.dst.hash(state);
        self.reduces.hash(state);
        self.workgroup.hash(state);
        self.groups.hash(state);
        self.wide.hash(state);
    }
}

/// A compiled kernel.
pub struct Kernel {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    pub name: String,
}

/// Load helpers for source binding `name` of type `t`: `load_<name>(byte)`
/// reads one element as f32; raw byte/u16/word readers serve block formats.
fn source_helpers(out: &mut String, binding: usize, name: &str, t: DType) {
    // read_write: a graph's sources and destination often share one buffer,
    // and wgpu rejects a buffer bound both read-only and writable in one dispatch.
    let _ = writeln!(
        out,
        "@group(0) @binding({binding}) var<storage, read_write> {name}: array<u32>;"
    );
    let _ = writeln!(
        out,
        "fn {name}_word(byte: u32) -> u32 {{ return {name}[byte >> 2u]; }}"
    );
    let _ = writeln!(
        out,
        "fn {name}_u8(byte: u32) -> u32 {{ return ({name}[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xffu; }}"
    );
    let _ = writeln!(
        out,
        "fn {name}_u16(byte: u32) -> u32 {{ return ({name}[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xffffu; }}"
    );
    let _ = writeln!(
        out,
        "fn {name}_f16(byte: u32) -> f32 {{ return unpack2x16float({name}_u16(byte)).x; }}"
    );
    let load = match t {
        DType::F32 => format!("bitcast<f32>({name}[byte >> 2u])"),
        DType::F16 => format!("{name}_f16(byte)"),
        DType::BF16 => format!("bitcast<f32>({name}_u16(byte) << 16u)"),
        DType::I32 => format!("f32(bitcast<i32>({name}[byte >> 2u]))"),
        // Block formats are decoded by the kernels that read them; a kernel
        // that loads one as elements does not compile.
        _ => return,
    };
    let _ = writeln!(out, "fn load_{name}(byte: u32) -> f32 {{ return {load}; }}");
}

/// The destination binding and `store_d(byte, value)`. f16 and bf16
/// halves share a word with a neighbour another invocation may write, so
/// they are merged with atomics; so are blocks (`cpy_blocks.wgsl` writes
/// them bytewise, with no `store_d`).
fn dest_helpers(out: &mut String, binding: usize, t: DType) {
    let half_bits = match t {
        DType::F16 => Some("f16_bits(v)"),
        // Rounded to nearest even, NaN kept quiet: ggml's conversion. NaN
        // is found from the bits (a compiler may fold `v != v` away).
        DType::BF16 => Some(
            "select((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u, (u >> 16u) | 64u, \
             (u & 0x7fffffffu) > 0x7f800000u)",
        ),
        _ => None,
    };
    let atomic = half_bits.is_some() || t.is_quantized();
    let word = if atomic { "atomic<u32>" } else { "u32" };
    let _ = writeln!(
        out,
        "@group(0) @binding({binding}) var<storage, read_write> d: array<{word}>;"
    );
    if t.is_quantized() {
        return;
    }
    let Some(half_bits) = half_bits else {
        // An i32 destination takes the value truncated, as ggml's f32 to
        // i32 copy does, and saturated as the CPU backend's is (WGSL's
        // conversion stops at the largest f32 below 2^31).
        let word = if t == DType::I32 {
            "bitcast<u32>(select(i32(v), 2147483647i, v >= 2147483648.0))"
        } else {
            "bitcast<u32>(v)"
        };
        let _ = writeln!(
            out,
            "fn store_d(byte: u32, v: f32) {{ d[byte >> 2u] = {word}; }}"
        );
        return;
    };
    let _ = write!(
        out,
        "fn store_d(byte: u32, v: f32) {{\n\
         \x20   let u = bitcast<u32>(v);\n\
         \x20   let shift = (byte & 2u) * 8u;\n\
         \x20   let bits = ({half_bits}) << shift;\n\
         \x20   atomicAnd(&d[byte >> 2u], ~(0xffffu << shift));\n\
         \x20   atomicOr(&d[byte >> 2u], bits);\n}}\n"
    );
}

/// Binding names of a kernel's sources (`d` is the destination); `Params`
/// describes `a` and `b`, kernels with more sources address them from words.
const SOURCE_NAMES: [&str; 5] = ["a", "b", "c", "e", "f"];

/// The WGSL of `key` for a device that takes parameters as `immediates`
/// (else a uniform) and reduces with `reduction`.
pub(super) fn compose(key: &KernelKey, immediates: bool, reduction: Reduction) -> String {
    let mut s = String::from(key.enables);
    s.push_str(COMMON);
    s.push_str(super::block_layouts::wgsl());
    if immediates {
        s.push_str("var<immediate> p: Params;\n");
    } else {
        s.push_str("@group(1) @binding(0) var<uniform> p: Params;\n");
    }
    let _ = writeln!(
        s,
        "const WG: u32 = {}u;\nconst GROUPS: u32 = {}u;",
        key.workgroup, key.groups
    );
    for (i, &t) in key.srcs.iter().enumerate() {
        source_helpers(&mut s, i, SOURCE_NAMES[i], t);
    }
    dest_helpers(&mut s, key.srcs.len(), key.dst);
    if key.wide {
        // Second views of the sources after the first, bound after the
        // destination, for 16-byte loads; scalar loads keep the word views
        // unchanged (a version that read words out of the vec4 view measured
        // no better on an H200).
        for (i, name) in SOURCE_NAMES.iter().enumerate().take(key.srcs.len()).skip(1) {
            let _ = writeln!(
                s,
                "@group(0) @binding({}) var<storage, read_write> {name}4: array<vec4<u32>>;\n\
                 fn {name}_quad(byte: u32) -> vec4<u32> {{ return {name}4[byte >> 4u]; }}",
                key.srcs.len() + i
            );
        }
    }
    match (key.reduces, reduction) {
        (true, Reduction::Subgroup) => s.push_str(REDUCE_SUBGROUP),
        (true, _) => {
            s.push_str(IDS_PLAIN);
            s.push_str(REDUCE_WORKGROUP);
        }
        (false, _) => s.push_str(IDS_PLAIN),
    }
    s.push_str(key.defs);
    for part in key.body {
        s.push_str(part);
    }
    s
}

/// Compiled kernels by key; compiling is slow on software devices, so each
/// key is compiled once per device.
#[derive(Default)]
pub struct KernelCache {
    kernels: Mutex<HashMap<KernelKey, Arc<Kernel>>>,
}

impl KernelCache {
    /// The kernel for `key`, compiled on first use.
    pub fn get(&self, dev: &Device, key: &KernelKey) -> Result<Arc<Kernel>> {
        let mut map = self
            .kernels
            .lock()
            .map_err(|_| dev.error("kernel cache lock poisoned"))?;
        if let Some(k) = map.get(key) {
            return Ok(k.clone());
        }
        let kernel = Arc::new(build(dev, key)?);
        map.insert(key.clone(), kernel.clone());
        Ok(kernel)
    }
}

fn storage_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only: false },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// The bind group layout of the uniform-parameter fallback (group 1).
pub fn uniform_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("wginfer params"),
        entries: &[wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: wgpu::BufferSize::new(PARAMS_SIZE as u64),
            },
            count: None,
        }],
    })
}

/// Runtime checks of wginfer's own kernels: no per-access bounds clamps
/// and no loop counters injected by wgpu (which cost instructions in every
/// inner loop); division by zero stays guarded.
fn trusted_checks() -> wgpu::ShaderRuntimeChecks {
    let mut checks = wgpu::ShaderRuntimeChecks::checked();
    checks.bounds_checks = false;
    checks.force_loop_bounding = false;
    checks
}

fn build(dev: &Device, key: &KernelKey) -> Result<Kernel> {
    let device = &dev.gpu.device;
    let source = compose(key, dev.immediates, dev.reduction);
    log::debug!("wgpu: compiling kernel {}", key.name);
    let immediates = dev.immediates;
    let built = dev.catch(|| {
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(&key.name),
            source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
        };
        let module = if dev.shader_checks {
            device.create_shader_module(desc)
        } else {
            // SAFETY: only on Vulkan unless asked (see Device::shader_checks),
            // where robust buffer access keeps reads and writes inside their
            // bindings (the last unit of a float row may read a few values
            // past it; they are discarded). Every loop of wginfer's kernels
            // runs to a bound taken from the tensors' shapes, and integer
            // division keeps its guards.
            unsafe { device.create_shader_module_trusted(desc, trusted_checks()) }
        };
        let entries: Vec<_> = (0..key.binding_count() as u32).map(storage_entry).collect();
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(&key.name),
            entries: &entries,
        });
        let params_layout = (!immediates).then(|| uniform_layout(device));
        let groups: Vec<Option<&wgpu::BindGroupLayout>> = match &params_layout {
            Some(u) => vec![Some(&layout), Some(u)],
            None => vec![Some(&layout)],
        };
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&key.name),
            bind_group_layouts: &groups,
            immediate_size: if immediates { PARAMS_SIZE } else { 0 },
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&key.name),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        (pipeline, layout)
    });
    let (pipeline, layout) = built.map_err(|e| dev.error(format!("kernel {}: {e}", key.name)))?;
    Ok(Kernel {
        pipeline,
        layout,
        name: key.name.clone(),
    })
}
