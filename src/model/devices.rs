//! Which backend a model runs on: `auto` (wgpu when a hardware adapter opens, else
//! the CPU), `wgpu`, `cpu`, or one the caller opened. A GPU backend always
//! has the CPU behind it in the scheduler: ops the device declines, and
//! layers that are not offloaded, run there.

use std::sync::Arc;

use crate::backend::cpu::CpuBackend;
use crate::backend::wgpu::{AdapterChoice, WgpuBackend, WgpuOptions};
use crate::backend::Backend;
use crate::{Error, Result};

/// The backend to load a model onto.
#[derive(Clone, Default)]
pub enum BackendChoice {
    /// wgpu on the default adapter when one opens, is not a software
    /// renderer (lavapipe, SwiftShader: slower than the CPU backend) and the
    /// model loads onto it; otherwise the CPU, with a note saying why.
    #[default]
    Auto,
    /// The CPU backend on `LoadOptions::threads` threads, with its
    /// quantized-activation fast path (see `CpuBackend::with_quantized_dots`).
    Cpu,
    /// wgpu on the default adapter (`WGINFER_ADAPTER` picks another).
    Wgpu,
    /// A backend the caller opened.
    Custom(Arc<dyn Backend>),
}

impl std::fmt::Debug for BackendChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendChoice::Auto => f.write_str("Auto"),
            BackendChoice::Cpu => f.write_str("Cpu"),
            BackendChoice::Wgpu => f.write_str("Wgpu"),
            BackendChoice::Custom(b) => write!(f, "Custom({})", b.name()),
        }
    }
}

impl BackendChoice {
    /// Parses `auto`, `wgpu` or `cpu`.
    pub fn parse(s: &str) -> Result<BackendChoice> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "wgpu" | "gpu" => Ok(BackendChoice::Wgpu),
            "cpu" => Ok(BackendChoice::Cpu),
            other => Err(Error::invalid(format!(
                "backend '{other}': expected auto, wgpu or cpu"
            ))),
        }
    }
}

/// The backend a model ended up on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendInfo {
    /// `"wgpu"`, `"cpu"` or, for a custom backend, its name.
    pub kind: String,
    /// The main wgpu device's adapter name (`None` on the CPU).
    pub adapter: Option<String>,
    /// Every GPU device in use, by adapter name, in `devices` order.
    pub devices: Vec<String>,
    /// Why `auto` did not pick wgpu, when it did not.
    pub note: Option<String>,
}

/// Opened backends, in the scheduler's priority order: the GPUs, then the
/// CPU last; and what to report about them.
pub(crate) struct Opened {
    pub backends: Vec<Arc<dyn Backend>>,
    /// How many of `backends` are GPUs (all but the CPU).
    pub n_gpus: usize,
    /// Whether every wgpu device is a software renderer on the CPU.
    pub software: bool,
    pub info: BackendInfo,
}

/// The CPU backend models run on, with `threads` workers (0: one per core):
/// mul_mat's quantized-activation fast path on, as llama.cpp's CPU backend
/// computes (the reference stays for tests).
fn fast_cpu(threads: usize) -> CpuBackend {
    let cpu = match threads {
        0 => CpuBackend::new(),
        n => CpuBackend::with_threads(n),
    };
    cpu.with_quantized_dots(true)
}

pub(crate) fn open_cpu(threads: usize, note: Option<String>) -> Opened {
    Opened {
        backends: vec![Arc::new(fast_cpu(threads))],
        n_gpus: 0,
        software: false,
        info: BackendInfo {
            kind: "cpu".into(),
            adapter: None,
            devices: Vec::new(),
            note,
        },
    }
}

/// A wgpu device on each adapter of `devices` (the default one when empty),
/// the CPU behind them for ops the devices decline and for layers that are
/// not offloaded. `main` names the device reported as the adapter.
pub(crate) fn open_wgpu(
    devices: &[AdapterChoice],
    main: usize,
    memory_limit: Option<u64>,
    cpu_threads: usize,
) -> Result<Opened> {
    let default = [AdapterChoice::Auto];
    let choices = if devices.is_empty() {
        &default[..]
    } else {
        devices
    };
    let mut backends: Vec<Arc<dyn Backend>> = Vec::with_capacity(choices.len() + 1);
    let mut names = Vec::with_capacity(choices.len());
    let mut software = true;
    for adapter in choices {
        let backend = WgpuBackend::new(&WgpuOptions {
            adapter: adapter.clone(),
            memory_limit,
            ..WgpuOptions::default()
        })?;
        names.push(backend.adapter().name.clone());
        software &= backend.adapter().device_type == "Cpu";
        backends.push(Arc::new(backend));
    }
    let n_gpus = backends.len();
    backends.push(Arc::new(fast_cpu(cpu_threads)));
    Ok(Opened {
        backends,
        n_gpus,
        software,
        info: BackendInfo {
            kind: "wgpu".into(),
            adapter: names.get(main).or(names.first()).cloned(),
            devices: names,
            note: None,
        },
    })
}

pub(crate) fn open_custom(backend: &Arc<dyn Backend>, cpu_threads: usize) -> Opened {
    Opened {
        backends: vec![backend.clone(), Arc::new(fast_cpu(cpu_threads))],
        n_gpus: 1,
        software: false,
        info: BackendInfo {
            kind: backend.name().to_string(),
            adapter: None,
            devices: Vec::new(),
            note: None,
        },
    }
}
