//! Adapters and devices: enumeration, selection, features and limits.

use crate::{Error, Result};

/// What wginfer reports about an adapter.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    /// Position in [`list_adapters`]'s order, the index `--devices` takes.
    pub index: usize,
    /// The adapter's name, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    /// Graphics API (Vulkan, Metal, Dx12).
    pub backend: String,
    /// Discrete, integrated, CPU, ...
    pub device_type: String,
    /// Driver name and version.
    pub driver: String,
    /// Smallest and largest subgroup size, when the adapter has subgroups.
    pub subgroup_sizes: Option<(u32, u32)>,
    /// Bytes of device-local memory, when the graphics API reports them (Vulkan).
    pub memory: Option<u64>,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}] {} ({}, {}, {})",
            self.index, self.name, self.backend, self.device_type, self.driver
        )?;
        match self.subgroup_sizes {
            Some((lo, hi)) if lo == hi => write!(f, ", subgroup {lo}")?,
            Some((lo, hi)) => write!(f, ", subgroup {lo}..{hi}")?,
            None => write!(f, ", no subgroups")?,
        }
        match self.memory {
            Some(bytes) => write!(f, ", {} MiB", bytes >> 20),
            None => Ok(()),
        }
    }
}

/// An open device with what it can do.
pub struct Gpu {
    /// The logical device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// The adapter as listed.
    pub summary: AdapterSummary,
    /// Features requested and granted.
    pub features: wgpu::Features,
    /// The adapter's own limits, requested in full.
    pub limits: wgpu::Limits,
    /// Whether 16x16x16 cooperative matrices with f16 inputs and f32
    /// accumulators are listed by the adapter and enabled (with f16 shaders
    /// and a fixed subgroup size of 32, which the tiled kernel lays out for).
    pub coop_f16: bool,
}

/// Whether the adapter lists a 16x16x16 f16 x f16 + f32 cooperative
/// matrix (a shape it does not list may compile and compute garbage) and
/// has what the cooperative tiled kernel needs besides; `WGINFER_COOP=0`
/// turns it off.
fn coop_f16_usable(adapter: &wgpu::Adapter, summary: &AdapterSummary) -> bool {
    use wgpu::CooperativeScalarType as T;
    if std::env::var("WGINFER_COOP").is_ok_and(|v| v == "0") {
        return false;
    }
    let needed = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        | wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP;
    adapter.features().contains(needed)
        && summary.subgroup_sizes == Some((32, 32))
        && adapter.cooperative_matrix_properties().iter().any(|p| {
            (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
                && p.ab_type == T::F16
                && p.cr_type == T::F32
        })
}

/// The features wginfer uses when an adapter has them.
const WANTED: wgpu::Features = wgpu::Features::SUBGROUP
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::IMMEDIATES)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
    .union(wgpu::Features::PIPELINE_CACHE);

fn instance() -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
    wgpu::Instance::new(desc)
}

fn summarize(index: usize, adapter: &wgpu::Adapter) -> AdapterSummary {
    let info = adapter.get_info();
    let subgroups = adapter.features().contains(wgpu::Features::SUBGROUP);
    AdapterSummary {
        index,
        name: info.name,
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        driver: format!("{} {}", info.driver, info.driver_info)
            .trim()
            .to_string(),
        subgroup_sizes: subgroups.then_some((info.subgroup_min_size, info.subgroup_max_size)),
        memory: local_memory(adapter),
    }
}

/// The largest device-local memory heap of a Vulkan adapter; WebGPU has no
/// memory query, so other APIs report nothing. wgpu has no Vulkan backend
/// on Apple platforms (Metal serves them) or the web.
#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
fn local_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    // SAFETY: only reads the physical device's memory properties; nothing
    // is created or destroyed, and the guard outlives the calls.
    unsafe {
        let hal = adapter.as_hal::<wgpu::hal::api::Vulkan>()?;
        let props = hal
            .shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(hal.raw_physical_device());
        let count = (props.memory_heap_count as usize).min(props.memory_heaps.len());
        props.memory_heaps[..count]
            .iter()
            .filter(|h| h.flags.contains(ash::vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max()
    }
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
fn local_memory(_: &wgpu::Adapter) -> Option<u64> {
    None
}

fn adapters() -> Vec<wgpu::Adapter> {
    pollster::block_on(instance().enumerate_adapters(wgpu::Backends::all()))
        .into_iter()
        .filter(|a| a.get_info().backend != wgpu::Backend::Noop)
        .collect()
}

/// Every adapter wgpu can see, in a stable order.
pub fn list_adapters() -> Vec<AdapterSummary> {
    adapters()
        .iter()
        .enumerate()
        .map(|(i, a)| summarize(i, a))
        .collect()
}

/// How to pick an adapter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AdapterChoice {
    /// `WGINFER_ADAPTER` if set (an index or a name substring), else the first
    /// discrete GPU, else the first adapter.
    #[default]
    Auto,
    /// By position in [`list_adapters`].
    Index(usize),
    /// The first adapter whose name contains this (case-insensitive).
    Name(String),
}

impl AdapterChoice {
    /// Parses an index (`"1"`) or a name substring (`"llvmpipe"`).
    pub fn parse(s: &str) -> AdapterChoice {
        match s.trim().parse() {
            Ok(i) => AdapterChoice::Index(i),
            Err(_) => AdapterChoice::Name(s.trim().to_string()),
        }
    }
}

fn no_adapter(msg: String) -> Error {
    Error::Backend {
        backend: "wgpu".into(),
        msg: format!(
            "{msg}. Install a Vulkan driver: on Debian/Ubuntu `apt-get install mesa-vulkan-drivers libvulkan1` \
             gives lavapipe, a software Vulkan device (scripts/setup-vulkan.sh does this)"
        ),
    }
}

fn choose(list: Vec<wgpu::Adapter>, choice: &AdapterChoice) -> Result<(usize, wgpu::Adapter)> {
    if list.is_empty() {
        return Err(no_adapter("no GPU adapter found".into()));
    }
    let names: Vec<String> = list.iter().map(|a| a.get_info().name).collect();
    let choice = match (choice, std::env::var("WGINFER_ADAPTER")) {
        (AdapterChoice::Auto, Ok(env)) => AdapterChoice::parse(&env),
        (c, _) => c.clone(),
    };
    let index = match &choice {
        AdapterChoice::Auto => list
            .iter()
            .position(|a| a.get_info().device_type == wgpu::DeviceType::DiscreteGpu)
            .unwrap_or(0),
        AdapterChoice::Index(i) if *i < list.len() => *i,
        AdapterChoice::Index(i) => {
            return Err(no_adapter(format!(
                "adapter index {i} is out of range; adapters: {names:?}"
            )));
        }
        AdapterChoice::Name(n) => {
            let lower = n.to_lowercase();
            names
                .iter()
                .position(|name| name.to_lowercase().contains(&lower))
                .ok_or_else(|| {
                    no_adapter(format!("no adapter named like '{n}'; adapters: {names:?}"))
                })?
        }
    };
    let adapter = list
        .into_iter()
        .nth(index)
        .ok_or_else(|| no_adapter("adapter vanished".into()))?;
    Ok((index, adapter))
}

impl Gpu {
    /// Opens a device on the chosen adapter with the adapter's own limits and
    /// every wanted feature it has.
    pub fn open(choice: &AdapterChoice) -> Result<Gpu> {
        let (index, adapter) = choose(adapters(), choice)?;
        let summary = summarize(index, &adapter);
        let coop_f16 = coop_f16_usable(&adapter, &summary);
        let mut features = adapter.features() & WANTED;
        let mut experimental = wgpu::ExperimentalFeatures::disabled();
        if coop_f16 {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: only the cooperative-matrix shape the adapter lists is
            // used, by kernels whose every coopLoad/coopStore stride is a
            // literal (what naga's SPIR-V writer handles).
            experimental = unsafe { wgpu::ExperimentalFeatures::enabled() };
        }
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("wginfer"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&desc)).map_err(|e| Error::Backend {
                backend: summary.name.clone(),
                msg: format!("cannot open the device: {e}"),
            })?;
        log::info!("wgpu: opened {summary}; features {features:?}");
        if coop_f16 {
            log::info!("wgpu: prompt products use 16x16x16 f16 cooperative matrices");
        }
        Ok(Gpu {
            device,
            queue,
            summary,
            features,
            limits,
            coop_f16,
        })
    }

    /// Whether the device has subgroup operations.
    pub fn has_subgroups(&self) -> bool {
        self.features.contains(wgpu::Features::SUBGROUP)
    }

    /// Whether op parameters can go as immediates of at least `bytes`.
    pub fn has_immediates(&self, bytes: u32) -> bool {
        self.features.contains(wgpu::Features::IMMEDIATES)
            && self.limits.max_immediate_size >= bytes
    }
}
