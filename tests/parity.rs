//! Op parity on the wgpu backend against the CPU reference, for both
//! reduction variants (subgroup where the adapter has subgroups, and the
//! workgroup shared-memory fallback). With `CI` set, a missing adapter fails.

mod fixtures;

use std::sync::OnceLock;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::wgpu::{Reduction, WgpuBackend, WgpuOptions};
use wginfer::backend::{Backend, TensorIo};
use wginfer::parity::{
    all_cases, check, flash_attn_unfused_pairs, llama_cases, nmse, Case, LlamaCase,
};

fn backends() -> &'static [WgpuBackend] {
    static BACKENDS: OnceLock<Vec<WgpuBackend>> = OnceLock::new();
    BACKENDS.get_or_init(|| {
        // The second device also takes the uniform-buffer path for parameters.
        // Both fold activations into mat-vecs, which a CPU-type adapter
        // would not by default, so the folded kernels are tested.
        let open = |reduction, uniform_params| {
            WgpuBackend::new(&WgpuOptions {
                reduction,
                uniform_params,
                fold_activations: Some(true),
                ..Default::default()
            })
        };
        let first = match open(Reduction::Auto, false) {
            Ok(b) => b,
            Err(e) if fixtures::adapter_required() => {
                panic!("a GPU adapter is required here (lavapipe in CI): {e}")
            }
            Err(_) => return vec![],
        };
        let mut all = vec![];
        if first.reduction() == Reduction::Subgroup {
            all.push(
                open(Reduction::Workgroup, true).expect("a second device on the same adapter"),
            );
        } else if fixtures::adapter_required() {
            panic!("the tests need an adapter with subgroups so both variants are tested");
        }
        all.insert(0, first);
        all
    })
}

fn run_op(op: &str) {
    let cases: Vec<_> = all_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.op == op)
        .collect();
    run_cases(op, &cases.iter().collect::<Vec<_>>());
}

/// Whether a tensor of `case` is larger than `backend` can bind.
fn exceeds_bindings(case: &Case, backend: &WgpuBackend) -> bool {
    let graph = &case.graph;
    (0..graph.len()).any(|i| {
        let bytes = graph.layout(wginfer::graph::TensorId(i)).span_bytes();
        bytes as u64 > backend.max_binding_bytes()
    })
}

/// llama.cpp's test-backend-ops cases (tests/data/llamacpp), built once.
fn llama_list() -> &'static [LlamaCase] {
    static LIST: OnceLock<Vec<LlamaCase>> = OnceLock::new();
    LIST.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/llamacpp/backend_ops_cases_list.txt"
        );
        let text = std::fs::read_to_string(path).expect("the case list");
        llama_cases(&text).expect("every line of the case list reads")
    })
}

/// The llama.cpp cases of `op` (llama.cpp's name) that wginfer expresses.
fn llama_op(op: &str) -> Vec<&'static Case> {
    let prefix = format!("{op}(");
    llama_list()
        .iter()
        .filter(|c| c.name.starts_with(&prefix))
        .filter_map(|c| c.case.as_ref().ok())
        .collect()
}

fn run_cases(op: &str, cases: &[&Case]) {
    run_cases_on(backends(), op, cases);
}

fn run_cases_on(backends: &[WgpuBackend], op: &str, cases: &[&Case]) {
    let cpu = CpuBackend::new();
    assert!(!cases.is_empty(), "no cases for {op}");
    if backends.is_empty() {
        fixtures::no_adapter(cases.len() * 2, "wgpu parity needs an adapter");
        return;
    }
    let mut failures = vec![];
    for backend in backends {
        for case in cases {
            if !case.supported_by(backend) && exceeds_bindings(case, backend) {
                // A device limit (lavapipe binds 128 MiB), not a missing
                // kernel: the scheduler gives such ops to another backend.
                eprintln!("too large for {}: {}", backend.adapter().name, case.name);
                continue;
            }
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
        cases.len() * backends.len(),
        failures.join("\n")
    );
}

/// The mat-vec kernel with four row groups of four rows per workgroup
/// (`WgpuOptions::matvec_groups`, a tuning choice that no default takes on
/// CI's device) on the mul_mat and fused cases, each reduction variant.
#[test]
fn mat_vec_row_groups_match_the_reference() {
    let grouped: Vec<WgpuBackend> = backends()
        .iter()
        .map(|b| {
            WgpuBackend::new(&WgpuOptions {
                reduction: b.reduction(),
                fold_activations: Some(true),
                matvec_groups: Some(4),
                ..Default::default()
            })
            .expect("a second device on the same adapter")
        })
        .collect();
    let cases: Vec<_> = all_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.op == "mul_mat" || c.op == "fused")
        .collect();
    run_cases_on(&grouped, "mul_mat", &cases.iter().collect::<Vec<_>>());
}

/// Mat-vecs of quantized weights with their activations cast to f16 first
/// and as they are (`WgpuOptions::matvec_cast_from`: the first on CPU-type
/// adapters such as CI's, the second on GPUs for now), with the fused
/// prologues that a cast takes over (silu x up, a norm run ahead), each
/// reduction variant.
#[test]
fn mat_vecs_match_the_reference_with_activations_cast_or_not() {
    let cases: Vec<_> = all_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.op == "mul_mat" || c.op == "fused")
        .collect();
    let q4_0_vec = cases
        .iter()
        .find(|c| c.name.starts_with("MUL_MAT(type_a=q4_0,") && c.name.contains(",n=1,"))
        .expect("a q4_0 mat-vec case");
    for (cast_from, dispatches) in [(0, 2), (usize::MAX, 1)] {
        let devices: Vec<WgpuBackend> = backends()
            .iter()
            .map(|b| {
                WgpuBackend::new(&WgpuOptions {
                    reduction: b.reduction(),
                    fold_activations: Some(true),
                    matvec_cast_from: Some(cast_from),
                    ..Default::default()
                })
                .expect("a second device on the same adapter")
            })
            .collect();
        run_cases_on(&devices, "mul_mat", &cases.iter().collect::<Vec<_>>());
        // A cast is a dispatch of its own before the product.
        for device in &devices {
            q4_0_vec.prepare(device).unwrap().run().unwrap();
            let stats = device.last_run_stats();
            assert_eq!(stats.dispatches, dispatches, "{}", q4_0_vec.name);
        }
    }
}

/// The tiled kernel's 64 x 64 tiles on the mul_mat cases it runs (more
/// than 8 columns): CI's software adapter gives every product 128 x 128
/// ones (`WgpuOptions::tile_wide_from`), so they are asked for here. The
/// kernel has no reduction, so one variant serves.
#[test]
fn narrow_tiles_match_the_reference() {
    let narrow: Vec<WgpuBackend> = backends()
        .iter()
        .take(1)
        .map(|_| {
            WgpuBackend::new(&WgpuOptions {
                tile_wide_from: Some(usize::MAX),
                ..Default::default()
            })
            .expect("a second device on the same adapter")
        })
        .collect();
    let columns = |name: &str| -> usize {
        let n = name.split(",n=").nth(1).unwrap_or_default();
        n.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap_or_default()
            .parse()
            .unwrap_or(0)
    };
    let cases: Vec<_> = all_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.op == "mul_mat" && columns(&c.name) > 8)
        .collect();
    assert!(cases.len() > 50, "only {} tiled mul_mat cases", cases.len());
    run_cases_on(&narrow, "mul_mat", &cases.iter().collect::<Vec<_>>());
}

macro_rules! parity_tests {
    ($($name:ident => $op:literal),* $(,)?) => {
        $(#[test] fn $name() { run_op($op); })*

        /// Every op with cases has its test above.
        #[test]
        fn every_op_with_cases_is_tested() {
            let tested = [$($op),*];
            for case in all_cases().unwrap() {
                assert!(tested.contains(&case.op), "no parity test runs the {} cases", case.op);
            }
        }
    };
}

parity_tests! {
    add => "add",
    mul => "mul",
    scale => "scale",
    silu => "silu",
    relu => "relu",
    tanh => "tanh",
    gelu => "gelu",
    cpy => "cpy",
    cont => "cont",
    norm => "norm",
    soft_max => "soft_max",
    rope => "rope",
    get_rows => "get_rows",
    set_rows => "set_rows",
    rms_norm => "rms_norm",
    mul_mat => "mul_mat",
    mul_mat_id => "mul_mat_id",
    fused => "fused",
    fused_prompt => "fused_prompt",
    flash_attn => "flash_attn_ext",
    argmax => "argmax",
    top_k => "top_k",
    sample_top_k => "sample_top_k",
}

macro_rules! llama_cpp_tests {
    ($($name:ident => $op:literal: $count:literal),* $(,)?) => {
        $(#[test] fn $name() { run_cases($op, &llama_op($op)); })*

        /// How many of each op's llama.cpp cases wginfer expresses, so that
        /// a change that drops some shows here; every other case is listed
        /// with why it is left out.
        #[test]
        fn llama_cpp_cases_that_apply() {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            let mut skipped = std::collections::BTreeMap::<String, usize>::new();
            for c in llama_list() {
                let op = c.name.split('(').next().unwrap();
                match &c.case {
                    Ok(_) => *counts.entry(op).or_default() += 1,
                    Err(why) => *skipped.entry(format!("{op}: {why:?}")).or_default() += 1,
                }
            }
            for (why, n) in &skipped {
                eprintln!("{n:5} left out, {why}");
            }
            let want = std::collections::BTreeMap::from([$(($op, $count)),*]);
            assert_eq!(counts, want);
        }
    };
}

llama_cpp_tests! {
    llama_cpp_add => "ADD": 141,
    llama_cpp_mul => "MUL": 141,
    llama_cpp_scale => "SCALE": 2,
    llama_cpp_silu => "SILU": 12,
    llama_cpp_relu => "RELU": 12,
    llama_cpp_gelu => "GELU": 12,
    llama_cpp_soft_max => "SOFT_MAX": 63,
    llama_cpp_norm => "NORM": 60,
    llama_cpp_rms_norm => "RMS_NORM": 50,
    llama_cpp_diag_mask_inf => "DIAG_MASK_INF": 3,
    llama_cpp_mul_mat => "MUL_MAT": 988,
    llama_cpp_get_rows => "GET_ROWS": 128,
    llama_cpp_rope => "ROPE": 274,
    llama_cpp_cpy => "CPY": 335,
    llama_cpp_cont => "CONT": 78,
}

#[test]
fn an_empty_split_submits_nothing() {
    let Some(gpu) = backends().first() else {
        fixtures::no_adapter(2, "no adapter");
        return;
    };
    let mut g = wginfer::graph::Graph::new();
    let x = g.input("x", wginfer::DType::F32, &[8, 4]).unwrap();
    let t = g.transpose(x).unwrap();
    g.reshape(x, &[32]).unwrap();
    gpu.allocate_graph(&mut g).unwrap();
    gpu.compute(&g, &g.compute_order()).unwrap();
    let stats = gpu.last_run_stats();
    assert_eq!(
        (stats.dispatches, stats.submits),
        (0, 0),
        "views and inputs dispatch nothing"
    );
    let y = g.cont(t).unwrap();
    gpu.allocate_graph(&mut g).unwrap();
    gpu.compute(&g, &[y]).unwrap();
    assert_eq!(gpu.last_run_stats().submits, 1);
}

/// Flash attention equals the attention it replaces (mul_mat, soft_max,
/// mul_mat) on the same inputs: on the CPU reference, and on each wgpu
/// device against the reference's unfused result.
#[test]
fn flash_attention_matches_the_unfused_path() {
    let pairs = flash_attn_unfused_pairs().unwrap();
    let reference = CpuBackend::new();
    let run = |case: &Case, b: &dyn Backend| case.prepare(b).and_then(|p| p.run()).unwrap();
    if backends().is_empty() {
        fixtures::no_adapter(pairs.len(), "no adapter");
    }
    for (fa, unfused) in &pairs {
        let want = run(unfused, &reference);
        let mut got = vec![("reference".to_string(), run(fa, &reference))];
        for b in backends() {
            got.push((format!("{:?}", b.reduction()), run(fa, b)));
        }
        for (on, values) in got {
            let e = nmse(&values, &want).unwrap();
            assert!(
                e <= fa.limit,
                "{on} {}: NMSE {e:.3e} against the unfused path",
                fa.name
            );
        }
    }
}

#[test]
fn fused_pairs_run_as_one_dispatch_unless_the_first_is_read_again() {
    let cases: Vec<_> = all_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.op == "fused")
        .collect();
    if backends().is_empty() {
        fixtures::no_adapter(cases.len(), "no adapter");
        return;
    }
    // Devices of its own: the shared ones' run statistics are overwritten
    // by the tests running beside this one.
    let own: Vec<WgpuBackend> = backends()
        .iter()
        .map(|b| {
            WgpuBackend::new(&WgpuOptions {
                reduction: b.reduction(),
                fold_activations: Some(true),
                // (A cast of the activations would be a dispatch more.)
                matvec_cast_from: Some(usize::MAX),
                ..Default::default()
            })
            .expect("a second device on the same adapter")
        })
        .collect();
    for backend in &own {
        for case in &cases {
            let prepared = case.prepare(backend).unwrap();
            prepared.run().unwrap();
            let ops = case
                .graph
                .nodes()
                .iter()
                .filter(|n| !n.op.is_passive())
                .count();
            let read_twice = case.name.contains("read_twice");
            let want = if case.name.starts_with("MUL_MAT_ADD_RMS_NORM_MUL_MAT") {
                // The norm run ahead: the two products. Read twice, the
                // pairs still fuse (each product and the add after it; the
                // norm and its weight).
                if read_twice {
                    3
                } else {
                    2
                }
            } else if case.name.starts_with("FFN(") {
                // The gate/up product, then the rest in one.
                2
            } else if read_twice {
                ops
            } else {
                1
            };
            assert_eq!(
                backend.last_run_stats().dispatches,
                want,
                "{:?} {}",
                backend.reduction(),
                case.name
            );
        }
    }
}
