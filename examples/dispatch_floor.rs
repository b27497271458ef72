//! What one dispatch costs on this GPU, apart from its work: records
//! thousands of small kernels into one compute pass, submits once and
//! divides the wall time by their count. Each variant adds one feature of
//! wginfer's real kernels to a one-line kernel, to find which of them
//! costs time when kernels are short.
//!
//! cargo run --release --example dispatch_floor
//!
//! Every variant but `independent` is a chain: each dispatch reads what the
//! one before wrote, so wgpu puts a barrier between them, as between a
//! model's dependent kernels. `independent` writes a buffer of its own per
//! dispatch (no barriers): the floor of launching alone. Then chains of
//! 400 of wginfer's own kernels on a 576-value row (SmolLM2-135M's width),
//! timed through the backend, plainly and under the perf logger.
//!
//! On an H100 (wgpu 30, Vulkan): a dependent one-workgroup dispatch costs
//! 2.2 us, with immediates 2.4, with a 256-wide subgroup reduction 2.7;
//! pipeline switches, f16 atomics and a 1 GiB binding add nothing
//! measurable; a timestamp before each dispatch makes it 8.4 us. wginfer's
//! scale, add, rms_norm and 576x576 q4_1 mat-vec cost 2.9, 3.3, 3.3 and
//! 4.9 us in a chain, and the perf logger reports 8.8, 9.0, 9.5 and 13.1:
//! each logged launch carries one timestamp's ~6 us.
//!
//! Last, the read bandwidth a plain kernel gets through wgpu from a window
//! of memory the size of a model's weight matrices (each dispatch the next
//! window, past L2): on an H100 (2026-12-06), 16-byte loads, one per
//! invocation, read 4 / 14 / 33 / 66 MiB at 0.94 / 1.9 / 2.5 / 2.8 TB/s,
//! the ceiling to hold wginfer's mat-vec against (q4_0 4096 x 14336, 33 MB:
//! 0.97 TB/s).

use std::time::Instant;

use wginfer::backend::wgpu::{WgpuBackend, WgpuOptions};
use wginfer::graph::TensorId;
use wginfer::parity::CaseBuilder;
use wginfer::DType;

const BINDINGS: &str = "
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> big: array<u32>;
";

const PLAIN: &str = "
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) {
        dst[id.x] = src[id.x] * SCALE + 1.0;
    }
}";

const IMMEDIATE: &str = "
var<immediate> p: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.x) {
        dst[id.x] = src[id.x] * SCALE + f32(p.y);
    }
}";

/// A workgroup sum as wginfer's reduce_subgroup.wgsl does it.
const REDUCE: &str = "
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
var<workgroup> red: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_id) sgid: u32,
        @builtin(num_subgroups) nsg: u32) {
    let v = src[id.x % arrayLength(&src)] * SCALE;
    let part = subgroupAdd(v);
    if (sid == 0u) { red[sgid] = part; }
    workgroupBarrier();
    var r = red[0];
    for (var i = 1u; i < nsg; i++) { r += red[i]; }
    workgroupBarrier();
    if (id.x < arrayLength(&dst)) { dst[id.x] = r; }
}";

/// f16 stores merged into words with two atomics, as wginfer's store_d does.
const ATOMIC_F16: &str = "
@group(0) @binding(1) var<storage, read_write> dst: array<atomic<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let byte = id.x * 2u;
    if (byte / 4u < arrayLength(&dst)) {
        let v = src[id.x] * SCALE;
        let shift = (byte & 2u) * 8u;
        let bits = (pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu) << shift;
        atomicAnd(&dst[byte >> 2u], ~(0xffffu << shift));
        atomicOr(&dst[byte >> 2u], bits);
    }
}";

/// Reads a word of a large buffer (the weights) besides its input.
const BIG: &str = "
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) {
        dst[id.x] = src[id.x] * SCALE + f32(big[id.x * 4099u % arrayLength(&big)]);
    }
}";

const DISPATCHES: usize = 2000;

/// What a timed dispatch sets besides its pipeline and bind group.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    Nothing,
    /// 16 bytes of immediates.
    Immediates,
    /// A timestamp before it (wginfer's perf logger does this).
    Timestamp,
}

struct Bench {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    big: wgpu::Buffer,
    stamps: Option<wgpu::QuerySet>,
}

impl Bench {
    fn pipeline(&self, body: &str, scale: u32, immediates: bool) -> wgpu::ComputePipeline {
        let source = format!("const SCALE: f32 = 1.000{scale};\n{BINDINGS}{body}");
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        let layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&self.layout)],
                immediate_size: if immediates { 16 } else { 0 },
            });
        self.device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
    }

    fn buffer(&self, len: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: len,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    }

    fn group(&self, src: &wgpu::Buffer, dst: &wgpu::Buffer) -> wgpu::BindGroup {
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.layout,
            entries: &[entry(0, src), entry(1, dst), entry(2, &self.big)],
        })
    }

    /// Best wall time per dispatch of five runs, in µs: dispatch i runs
    /// pipeline i % len with bind group i % len.
    fn time(
        &self,
        pipelines: &[wgpu::ComputePipeline],
        groups: &[wgpu::BindGroup],
        workgroups: u32,
        extra: Extra,
    ) -> Result<f64, String> {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut encoder = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                for i in 0..DISPATCHES {
                    pass.set_pipeline(&pipelines[i % pipelines.len()]);
                    pass.set_bind_group(0, &groups[i % groups.len()], &[]);
                    match (extra, &self.stamps) {
                        (Extra::Immediates, _) => {
                            let words = [workgroups * 64, i as u32, 0, 0];
                            pass.set_immediates(0, bytemuck::cast_slice(&words));
                        }
                        (Extra::Timestamp, Some(q)) => pass.write_timestamp(q, i as u32),
                        _ => {}
                    }
                    pass.dispatch_workgroups(workgroups, 1, 1);
                }
            }
            let commands = encoder.finish();
            let t = Instant::now();
            self.queue.submit([commands]);
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| format!("waiting for the GPU: {e}"))?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(best * 1e6 / DISPATCHES as f64)
    }
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dispatch_floor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| format!("no adapter: {e}"))?;
    println!("adapter: {}", adapter.get_info().name);
    let features = adapter.features()
        & (wgpu::Features::SUBGROUP
            | wgpu::Features::IMMEDIATES
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| format!("cannot open the device: {e}"))?;
    let storage = |binding, read_only| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &[storage(0, true), storage(1, false), storage(2, false)],
    });
    let big_len = (1u64 << 30).min(adapter.limits().max_storage_buffer_binding_size);
    let big = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: big_len,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let timestamps =
        wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
    let stamps = features.contains(timestamps).then(|| {
        device.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: DISPATCHES as u32,
        })
    });
    let b = Bench {
        device,
        queue,
        layout,
        big,
        stamps,
    };
    let subgroups = features.contains(wgpu::Features::SUBGROUP);
    let immediates = features.contains(wgpu::Features::IMMEDIATES);
    for workgroups in [1u32, 64] {
        let len = u64::from(workgroups) * 256 * 4;
        let (x, y) = (b.buffer(len), b.buffer(len));
        let chain = [b.group(&x, &y), b.group(&y, &x)];
        let outs: Vec<_> = (0..DISPATCHES).map(|_| b.buffer(len)).collect();
        let independent: Vec<_> = outs.iter().map(|o| b.group(&x, o)).collect();
        let plain = |k| b.pipeline(PLAIN, k, false);
        let mut rows = vec![
            (
                "independent",
                b.time(&[plain(1)], &independent, workgroups, Extra::Nothing)?,
            ),
            (
                "chain",
                b.time(&[plain(1)], &chain, workgroups, Extra::Nothing)?,
            ),
            (
                "chain, 2 pipelines",
                b.time(&[plain(1), plain(2)], &chain, workgroups, Extra::Nothing)?,
            ),
            (
                "chain, 6 pipelines",
                b.time(
                    &(1..7).map(plain).collect::<Vec<_>>(),
                    &chain,
                    workgroups,
                    Extra::Nothing,
                )?,
            ),
            (
                "chain, f16 atomics",
                b.time(
                    &[b.pipeline(ATOMIC_F16, 1, false)],
                    &chain,
                    workgroups,
                    Extra::Nothing,
                )?,
            ),
            (
                "chain, 1 GiB buffer read",
                b.time(
                    &[b.pipeline(BIG, 1, false)],
                    &chain,
                    workgroups,
                    Extra::Nothing,
                )?,
            ),
        ];
        if immediates {
            let p = [
                b.pipeline(IMMEDIATE, 1, true),
                b.pipeline(IMMEDIATE, 2, true),
            ];
            rows.push((
                "chain, immediates",
                b.time(&p[..1], &chain, workgroups, Extra::Immediates)?,
            ));
            rows.push((
                "chain, immediates, 2 pipelines",
                b.time(&p, &chain, workgroups, Extra::Immediates)?,
            ));
        }
        if b.stamps.is_some() {
            let p = [plain(1)];
            rows.push((
                "chain, timestamps",
                b.time(&p, &chain, workgroups, Extra::Timestamp)?,
            ));
        }
        if subgroups {
            let p = b.pipeline(REDUCE, 1, false);
            rows.push((
                "chain, 256-wide reduction",
                b.time(&[p], &chain, workgroups, Extra::Nothing)?,
            ));
        }
        for (name, us) in rows {
            println!("{name:>32}, {workgroups:>3} workgroups: {us:.2} us per dispatch");
        }
    }
    if immediates {
        stream_reads(&b.device, &b.queue)?;
    }
    drop(b);
    wginfer_chains().map_err(|e| format!("wginfer chains: {e}"))
}

/// Streams a window of a 2 GiB buffer per dispatch (each dispatch the next
/// window, so reads miss L2 as a model's weights do): 16-byte or 4-byte
/// loads, 1, 4 or 16 per invocation. Each dispatch binds its output read_write,
/// so they are separated by barriers as a model's kernels are.
const STREAM: &str = "
var<immediate> p: vec4<u32>;
@group(0) @binding(0) var<storage, read> big: array<ITEM>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let threads = nwg.x * 256u;
    var acc = vec4<u32>();
    for (var i = id.x; i < p.y; i += threads) {
        READ
    }
    if (all(acc == vec4<u32>(0x9e3779b9u))) { dst[id.x & 255u] = acc.x; }
}";

fn stream_reads(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<(), String> {
    let limit = device.limits().max_storage_buffer_binding_size;
    let big_len = (2u64 << 30).min(limit) & !0xffff;
    let big = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: big_len,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let dst = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1024,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &[0, 1].map(|binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: binding == 0,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }),
    });
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &layout,
        entries: &[entry(0, &big), entry(1, &dst)],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 16,
    });
    let reads = [
        ("16-byte loads", "vec4<u32>", "acc ^= big[p.x + i];"),
        ("4-byte loads", "u32", "acc.x ^= big[4u * p.x + i];"),
    ];
    for (name, item, read) in reads {
        let source = STREAM.replace("ITEM", item).replace("READ", read);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let unit = if name.starts_with("16") { 16 } else { 4 };
        for mib in [4u64, 14, 33, 66, 256] {
            let bytes = mib << 20;
            let items = (bytes / unit) as u32;
            for per_invocation in [1u32, 4, 16] {
                let workgroups = items.div_ceil(256 * per_invocation);
                if workgroups > device.limits().max_compute_workgroups_per_dimension {
                    continue;
                }
                let windows = (big_len / bytes).max(1);
                let dispatches = 200u64;
                let mut best = f64::MAX;
                for _ in 0..3 {
                    let mut encoder = device.create_command_encoder(&Default::default());
                    {
                        let mut pass = encoder.begin_compute_pass(&Default::default());
                        pass.set_pipeline(&pipeline);
                        pass.set_bind_group(0, &group, &[]);
                        for d in 0..dispatches {
                            let first = ((d % windows) * bytes / 16) as u32;
                            pass.set_immediates(0, bytemuck::cast_slice(&[first, items, 0, 0]));
                            pass.dispatch_workgroups(workgroups, 1, 1);
                        }
                    }
                    let commands = encoder.finish();
                    let t = Instant::now();
                    queue.submit([commands]);
                    device
                        .poll(wgpu::PollType::wait_indefinitely())
                        .map_err(|e| format!("waiting for the GPU: {e}"))?;
                    best = best.min(t.elapsed().as_secs_f64());
                }
                let us = best * 1e6 / dispatches as f64;
                println!(
                    "stream {name}, {mib:>3} MiB, {per_invocation:>2} per invocation: {us:8.1} us, {:6.0} GB/s",
                    bytes as f64 / us / 1e3
                );
            }
        }
    }
    Ok(())
}

/// The same through wginfer: a graph of CHAIN dependent ops of one kind
/// on a 576-value row (SmolLM2-135M's width), timed as a whole.
fn wginfer_chains() -> wginfer::Result<()> {
    let plain = WgpuBackend::new(&WgpuOptions::default())?;
    chains(&plain)?;
    // The same chains under the perf logger, whose report (printed when
    // the backend is dropped) shows what timestamps add to each kernel.
    let logged = WgpuBackend::new(&WgpuOptions {
        perf_logger: Some(true),
        ..WgpuOptions::default()
    })?;
    chains(&logged)
}

fn chains(backend: &WgpuBackend) -> wginfer::Result<()> {
    const CHAIN: usize = 400;
    // Each step gets the running value, a 576x576 q4_1 matrix and a row.
    type Step = fn(&mut CaseBuilder, [TensorId; 3]) -> wginfer::Result<TensorId>;
    let kinds: [(&str, Step); 4] = [
        ("scale", |b, [x, _, _]| b.g.scale(x, 1.0001)),
        ("add", |b, [x, _, r]| b.g.add(x, r)),
        ("rms_norm", |b, [x, _, _]| b.g.rms_norm(x, 1e-6)),
        ("mul_mat q4_1 576x576", |b, [x, w, _]| b.g.mul_mat(w, x)),
    ];
    for (name, step) in kinds {
        let mut b = CaseBuilder::new(1);
        let x = b.uniform(DType::F32, &[576], -1.0, 1.0)?;
        let w = b.uniform(DType::Q4_1, &[576, 576], -0.05, 0.05)?;
        let r = b.uniform(DType::F32, &[576], -1.0, 1.0)?;
        let mut y = x;
        for _ in 0..CHAIN {
            y = step(&mut b, [y, w, r])?;
        }
        let case = b.case("chain", name.into(), y, 0.0);
        let secs = case.prepare(backend)?.time(10)?;
        println!(
            "{name:>32}: {:.2} us per dispatch (wginfer, {CHAIN} in one graph)",
            secs * 1e6 / CHAIN as f64
        );
    }
    Ok(())
}

fn entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: buffer.as_entire_binding(),
    }
}
