//! Op parity on the wgpu backend against the CPU reference, for both
//! reduction variants (subgroup where the adapter has subgroups, and the
//! workgroup shared-memory fallback). With `CI` set, a missing adapter fails.

use std::sync::OnceLock;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::wgpu::{Reduction, WgpuBackend, WgpuOptions};
use wginfer::backend::Backend;
use wginfer::parity::{all_cases, check};

fn backends() -> &'static [WgpuBackend] {
    static BACKENDS: OnceLock<Vec<WgpuBackend>> = OnceLock::new();
    BACKENDS.get_or_init(|| {
        // The second device also takes the uniform-buffer path for parameters.
        let open = |reduction, uniform_params| {
            WgpuBackend::new(&WgpuOptions {
                reduction,
                uniform_params,
                ..Default::default()
            })
        };
        let first = match open(Reduction::Auto, false) {
            Ok(b) => b,
            Err(e) if std::env::var_os("CI").is_some() => {
                panic!("CI needs a GPU adapter (lavapipe): {e}")
            }
            Err(e) => {
                eprintln!("no GPU adapter, wgpu parity not run: {e}");
                return vec![];
            }
        };
        let mut all = vec![];
        if first.reduction() == Reduction::Subgroup {
            all.push(
                open(Reduction::Workgroup, true).expect("a second device on the same adapter"),
            );
        } else if std::env::var_os("CI").is_some() {
            panic!("CI expects an adapter with subgroups so both variants are tested");
        }
        all.insert(0, first);
        all
    })
}

fn run_op(op: &str) {
    let cpu = CpuBackend::new();
    let cases: Vec<_> = all_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.op == op)
        .collect();
    assert!(!cases.is_empty(), "no cases for {op}");
    let mut failures = vec![];
    for backend in backends() {
        for case in &cases {
            let outcome = check(case, &cpu, backend);
            if let Some(why) = outcome.failure {
                failures.push(format!("{:?} {}: {why}", backend.reduction(), case.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        cases.len() * backends().len(),
        failures.join("\n")
    );
}

macro_rules! parity_tests {
    ($($name:ident => $op:literal),* $(,)?) => {
        $(#[test] fn $name() { run_op($op); })*
    };
}

parity_tests! {
    add => "add",
    mul => "mul",
    scale => "scale",
    silu => "silu",
    relu => "relu",
    gelu => "gelu",
    diag_mask_inf => "diag_mask_inf",
    cpy => "cpy",
    cont => "cont",
    norm => "norm",
    soft_max => "soft_max",
    rope => "rope",
    get_rows => "get_rows",
    rms_norm => "rms_norm",
}

#[test]
fn an_empty_split_submits_nothing() {
    let Some(gpu) = backends().first() else {
        return;
    };
    let mut g = wginfer::graph::Graph::new();
    let x = g.input("x", wginfer::DType::F32, &[8, 4]).unwrap();
    let t = g.transpose(x).unwrap();
    g.reshape(x, &[32]).unwrap();
    g.allocate(gpu).unwrap();
    gpu.compute(&g, &g.compute_order()).unwrap();
    let stats = gpu.last_run_stats();
    assert_eq!(
        (stats.dispatches, stats.submits),
        (0, 0),
        "views and inputs dispatch nothing"
    );
    let y = g.cont(t).unwrap();
    g.allocate(gpu).unwrap();
    gpu.compute(&g, &[y]).unwrap();
    assert_eq!(gpu.last_run_stats().submits, 1);
}
