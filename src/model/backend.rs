//! Which backend a model runs on: `auto` (wgpu when an adapter opens, else
//! the CPU), `wgpu`, `cpu`, or one the caller opened. A GPU backend always
//! has the CPU behind it in the scheduler: ops the device declines, and
//! layers that are not offloaded, run there.

use std::sync::Arc;

use crate::backend::cpu::CpuBackend;
use crate::backend::wgpu::{WgpuBackend, WgpuOptions};
use crate::backend::Backend;
use crate::{Error, Result};

/// The backend to load a model onto.
#[derive(Clone, Default)]
pub enum BackendChoice {
    /// wgpu on the default adapter when one opens and the model loads onto
    /// it; otherwise the CPU, with a note saying why.
    #[default]
    Auto,
    /// The CPU reference backend on all cores.
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
    /// The wgpu adapter's name (`None` on the CPU).
    pub adapter: Option<String>,
    /// Why `auto` did not pick wgpu, when it did not.
    pub note: Option<String>,
}

/// Opened backends, in the scheduler's priority order (the CPU last), and
/// what to report about them.
pub(crate) struct Opened {
    pub backends: Vec<Arc<dyn Backend>>,
    pub info: BackendInfo,
}

pub(crate) fn open_cpu(note: Option<String>) -> Opened {
    Opened {
        backends: vec![Arc::new(CpuBackend::new())],
        info: BackendInfo {
            kind: "cpu".into(),
            adapter: None,
            note,
        },
    }
}

/// wgpu first, the CPU behind it for ops the device declines and for layers
/// that are not offloaded.
pub(crate) fn open_wgpu() -> Result<Opened> {
    let backend = WgpuBackend::new(&WgpuOptions::default())?;
    let adapter = backend.adapter().name.clone();
    Ok(Opened {
        backends: vec![Arc::new(backend), Arc::new(CpuBackend::new())],
        info: BackendInfo {
            kind: "wgpu".into(),
            adapter: Some(adapter),
            note: None,
        },
    })
}

pub(crate) fn open_custom(backend: &Arc<dyn Backend>) -> Opened {
    Opened {
        backends: vec![backend.clone(), Arc::new(CpuBackend::new())],
        info: BackendInfo {
            kind: backend.name().to_string(),
            adapter: None,
            note: None,
        },
    }
}
