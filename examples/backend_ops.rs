//! The op-parity suite from the command line, like llama.cpp's test-backend-ops.
//!
//! ```text
//! cargo run --release --example backend_ops -- --mode test [--op mul_mat] [--variant workgroup]
//! cargo run --release --example backend_ops -- --mode perf --op mul_mat
//! ```
//! Test mode prints one line per case and ends with `N passed, M failed`;
//! perf mode prints microseconds and GB/s per case. Besides wginfer's own
//! cases it runs llama.cpp's test-backend-ops cases from a case list
//! (`--cases FILE`; by default the repository's
//! `tests/data/llamacpp/backend_ops_cases_list.txt`, `--cases none` for
//! wginfer's only), each printed under llama.cpp's case string, so a failure
//! can be looked up there.

use std::process::ExitCode;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::wgpu::{AdapterChoice, Reduction, WgpuBackend, WgpuOptions};
use wginfer::backend::Backend;
use wginfer::parity::{all_cases, check, llama_cases, perf_cases, Case};

struct Args {
    perf: bool,
    op: Option<String>,
    name: Option<String>,
    backend: String,
    options: WgpuOptions,
    /// A test-backend-ops case list, or `None` for wginfer's cases only.
    cases: Option<String>,
}

const DEFAULT_LIST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/llamacpp/backend_ops_cases_list.txt"
);

fn usage() -> ExitCode {
    eprintln!(
        "usage: backend_ops [--mode test|perf] [--op NAME] [--name SUBSTRING] [--backend wgpu|cpu] [--variant subgroup|workgroup] [--adapter INDEX|NAME] [--cases FILE|none]"
    );
    ExitCode::from(2)
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        perf: false,
        op: None,
        name: None,
        backend: "wgpu".into(),
        options: WgpuOptions::default(),
        cases: Some(DEFAULT_LIST.into()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--mode" => match value()?.as_str() {
                "test" => args.perf = false,
                "perf" => args.perf = true,
                m => return Err(format!("unknown mode '{m}'")),
            },
            "--op" | "-o" => args.op = Some(value()?),
            "--name" => args.name = Some(value()?),
            "--backend" | "-b" => args.backend = value()?,
            "--variant" => {
                args.options.reduction = Reduction::parse(&value()?).map_err(|e| e.to_string())?
            }
            "--adapter" => args.options.adapter = AdapterChoice::parse(&value()?),
            "--cases" => args.cases = Some(value()?).filter(|v| v != "none"),
            "-h" | "--help" => return Err(String::new()),
            f => return Err(format!("unknown flag '{f}'")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    env_logger::init();
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("backend_ops: {e}");
            }
            return usage();
        }
    };
    let cpu = CpuBackend::new();
    let gpu;
    let backend: &dyn Backend = match args.backend.as_str() {
        "cpu" => &cpu,
        "wgpu" => match WgpuBackend::new(&args.options) {
            Ok(b) => {
                eprintln!("backend: {} ({:?} reductions)", b.adapter(), b.reduction());
                gpu = b;
                &gpu
            }
            Err(e) => {
                eprintln!("backend_ops: {e}");
                return ExitCode::FAILURE;
            }
        },
        other => {
            eprintln!("backend_ops: unknown backend '{other}'");
            return usage();
        }
    };
    let cases = match build_cases(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("backend_ops: building cases failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let selected = cases
        .iter()
        .filter(|c| args.op.as_deref().is_none_or(|op| c.op == op))
        .filter(|c| args.name.as_deref().is_none_or(|n| c.name.contains(n)));
    let selected: Vec<&Case> = selected.collect();
    if args.perf {
        // One untimed run of the first case first: on an H100 the first
        // case of a run (q4_0 4096 x 512 x 4096 with WGINFER_COOP=0) took
        // 2.2 ms, three times what the 8B prompt's products of that type
        // take, as if the idle GPU were still raising its clocks.
        if let Some(first) = selected.iter().find(|c| c.supported_by(backend)) {
            let _ = first.prepare(backend).and_then(|p| p.time(10));
        }
    }
    let (mut passed, mut failed) = (0, 0);
    for case in selected {
        if !case.supported_by(backend) {
            println!("  {}: not supported", case.name);
            continue;
        }
        if args.perf {
            match case.prepare(backend).and_then(|p| p.time(10)) {
                Ok(secs) => {
                    let gbs = case.bytes_moved() as f64 / secs / 1e9;
                    println!("  {}: {:.1} us, {gbs:.2} GB/s", case.name, secs * 1e6);
                    passed += 1;
                }
                Err(e) => {
                    println!("  {}: FAIL {e}", case.name);
                    failed += 1;
                }
            }
            continue;
        }
        let outcome = check(case, &cpu, backend);
        let nmse = outcome
            .nmse
            .map_or(String::new(), |e| format!("NMSE {e:.3e} "));
        match outcome.failure {
            None => {
                println!("  {}: {nmse}OK", case.name);
                passed += 1;
            }
            Some(why) => {
                println!("  {}: {nmse}FAIL {why}", case.name);
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// wginfer's cases (perf mode adds its perf-only shapes), then those of the
/// llama.cpp case list that wginfer expresses; how many of the list's were
/// left out, and why, goes to stderr.
fn build_cases(args: &Args) -> Result<Vec<Case>, String> {
    let mut cases = all_cases().map_err(|e| e.to_string())?;
    if args.perf {
        let wanted = |op: &str, name: &str| {
            args.op.as_deref().is_none_or(|o| o == op)
                && args.name.as_deref().is_none_or(|n| name.contains(n))
        };
        cases.extend(perf_cases(&wanted).map_err(|e| e.to_string())?);
    }
    let Some(path) = &args.cases else {
        return Ok(cases);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if path == DEFAULT_LIST && e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("no case list at {path}: wginfer's cases only");
            return Ok(cases);
        }
        Err(e) => return Err(format!("{path}: {e}")),
    };
    let mut left_out = std::collections::BTreeMap::<String, usize>::new();
    for c in llama_cases(&text).map_err(|e| e.to_string())? {
        match c.case {
            Ok(case) => cases.push(case),
            Err(why) => {
                let op = c.name.split('(').next().unwrap_or_default();
                *left_out.entry(format!("{op}: {why:?}")).or_default() += 1;
            }
        }
    }
    for (why, n) in left_out {
        eprintln!("{n:5} of {path} left out, {why}");
    }
    Ok(cases)
}
