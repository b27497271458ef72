//! The op-parity suite from the command line, like llama.cpp's test-backend-ops.
//!
//! ```text
//! cargo run --release --example backend_ops -- --mode test [--op mul_mat] [--variant workgroup]
//! cargo run --release --example backend_ops -- --mode perf --op mul_mat
//! ```
//! Test mode prints one line per case and ends with `N passed, M failed`;
//! perf mode prints microseconds and GB/s per case.

use std::process::ExitCode;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::wgpu::{AdapterChoice, Reduction, WgpuBackend, WgpuOptions};
use wginfer::backend::Backend;
use wginfer::parity::{all_cases, check, perf_cases};

struct Args {
    perf: bool,
    op: Option<String>,
    name: Option<String>,
    backend: String,
    options: WgpuOptions,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: backend_ops [--mode test|perf] [--op NAME] [--name SUBSTRING] [--backend wgpu|cpu] [--variant subgroup|workgroup] [--adapter INDEX|NAME]"
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
    // Perf mode adds the perf-only shapes after the suite's own.
    let cases = match all_cases().and_then(|mut c| {
        if args.perf {
            c.extend(perf_cases()?);
        }
        Ok(c)
    }) {
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
