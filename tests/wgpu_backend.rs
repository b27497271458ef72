//! The wgpu backend's buffers, transfers and limits.

mod common;

use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::{Backend, BufferRead, BufferUsage, TensorIo};
use wginfer::graph::Graph;
use wginfer::{DType, Error};

#[test]
fn transfers_round_trip_at_any_offset_and_length() {
    let Some(gpu) = common::gpu() else { return };
    let buf = gpu.alloc_buffer(1000, BufferUsage::Compute).unwrap();
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    gpu.write_buffer(&buf, 0, &data).unwrap();
    // Unaligned writes merge with their neighbours.
    gpu.write_buffer(&buf, 3, &[1, 2, 3, 4, 5]).unwrap();
    gpu.write_buffer(&buf, 998, &[9, 9]).unwrap();
    let mut want = data.clone();
    want[3..8].copy_from_slice(&[1, 2, 3, 4, 5]);
    want[998..].copy_from_slice(&[9, 9]);
    let mut got = vec![0; 1000];
    gpu.read_buffer(&buf, 0, &mut got).unwrap();
    assert_eq!(got, want);
    let mut part = vec![0; 7];
    gpu.read_buffer(&buf, 5, &mut part).unwrap();
    assert_eq!(part, want[5..12]);
}

#[test]
fn batched_reads_match_single_reads() {
    let Some(gpu) = common::gpu() else { return };
    let data: Vec<u8> = (0..600u32).map(|i| (i * 13 % 247) as u8).collect();
    let (a, b) = (
        gpu.alloc_buffer(300, BufferUsage::Compute).unwrap(),
        gpu.alloc_buffer(300, BufferUsage::Compute).unwrap(),
    );
    gpu.write_buffer(&a, 0, &data[..300]).unwrap();
    gpu.write_buffer(&b, 0, &data[300..]).unwrap();
    // Unaligned offsets and lengths, two buffers, one empty range.
    let ranges = [
        (&a, 1, 10),
        (&b, 6, 3),
        (&a, 0, 300),
        (&b, 299, 1),
        (&b, 8, 0),
    ];
    let mut outs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0; r.2]).collect();
    let mut reads: Vec<BufferRead> = ranges
        .iter()
        .zip(&mut outs)
        .map(|(&(buffer, offset, _), out)| BufferRead {
            buffer,
            offset,
            out,
        })
        .collect();
    gpu.read_buffers(&mut reads).unwrap();
    for ((buffer, offset, len), out) in ranges.iter().zip(&outs) {
        let base = if std::ptr::eq(*buffer, &a) { 0 } else { 300 };
        assert_eq!(out[..], data[base + offset..base + offset + len]);
    }
    let mut past_the_end = [BufferRead {
        buffer: &a,
        offset: 296,
        out: &mut [0; 8],
    }];
    assert!(gpu.read_buffers(&mut past_the_end).is_err());
}

#[test]
fn a_large_upload_goes_through_in_chunks() {
    let Some(gpu) = common::gpu() else { return };
    let n = (70 << 20) + 12; // over one 64 MiB upload chunk
    let buf = gpu.alloc_buffer(n, BufferUsage::Weights).unwrap();
    let data: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
    gpu.write_buffer(&buf, 0, &data).unwrap();
    let mut got = vec![0; n];
    gpu.read_buffer(&buf, 0, &mut got).unwrap();
    assert!(got == data, "70 MiB round trip differs");
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let Some(gpu) = common::gpu() else { return };
    let buf = gpu.alloc_buffer(64, BufferUsage::Compute).unwrap();
    assert!(gpu.write_buffer(&buf, 60, &[0; 8]).is_err(), "past the end");
    assert!(
        gpu.read_buffer(&buf, usize::MAX, &mut [0; 4]).is_err(),
        "offset overflow"
    );
    let huge = gpu.alloc_buffer(1 << 50, BufferUsage::Weights);
    assert!(
        matches!(huge, Err(Error::OutOfMemory(_))),
        "absurd allocation"
    );
    let cpu = CpuBackend::new();
    let cpu_buf = cpu.alloc_buffer(64, BufferUsage::Compute).unwrap();
    assert!(
        gpu.write_buffer(&cpu_buf, 0, &[0; 4]).is_err(),
        "a cpu buffer on the gpu"
    );
    assert!(
        cpu.write_buffer(&buf, 0, &[0; 4]).is_err(),
        "a gpu buffer on the cpu"
    );
    let other = common::gpu().unwrap();
    assert!(
        other.write_buffer(&buf, 0, &[0; 4]).is_err(),
        "a buffer of another device"
    );
}

#[test]
fn tensors_over_the_binding_limit_are_declined() {
    let Some(gpu) = common::gpu() else { return };
    // Declined by layout alone, so nothing this large is allocated.
    let mut g = Graph::new();
    let rows = 1 << 16;
    let big = g.input("big", DType::F32, &[1024, rows]).unwrap(); // 256 MiB
    let y = g.silu(big).unwrap();
    let small = g.input("small", DType::F32, &[1024]).unwrap();
    let z = g.silu(small).unwrap();
    let limit = 128usize << 20;
    assert!(g.layout(big).span_bytes() > limit);
    if gpu.adapter().name.contains("llvmpipe") {
        assert!(
            !gpu.supports_op(&g, y),
            "256 MiB exceeds lavapipe's 128 MiB binding"
        );
    }
    assert!(gpu.supports_op(&g, z));
}

#[test]
fn a_graph_of_the_same_shape_reuses_bind_groups() {
    let Some(gpu) = common::gpu() else { return };
    let values: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut buffers = None;
    for (run, n_past) in [0usize, 3, 5].into_iter().enumerate() {
        // A new graph per step, as a decoder builds per token; only n_past changes.
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[8, 4]).unwrap();
        let y = g.diag_mask_inf(x, n_past).unwrap();
        g.set_output(y).unwrap();
        let plan =
            wginfer::graph::plan_allocation(&g, &g.compute_order(), gpu.alignment()).unwrap();
        let buf = buffers
            .get_or_insert_with(|| gpu.alloc_buffer(plan.size, BufferUsage::Compute).unwrap());
        plan.assign(&mut g, buf).unwrap();
        gpu.write_f32(&g, x, &values).unwrap();
        gpu.compute(&g, &g.compute_order()).unwrap();
        let stats = gpu.last_run_stats();
        assert_eq!((stats.dispatches, stats.submits), (1, 1));
        assert_eq!(stats.new_bind_groups, usize::from(run == 0), "run {run}");
        let got = gpu.read_f32(&g, y).unwrap();
        let want: Vec<f32> = (0..32)
            .map(|i| {
                if i % 8 > n_past + i / 8 {
                    f32::NEG_INFINITY
                } else {
                    values[i]
                }
            })
            .collect();
        assert_eq!(got, want, "n_past {n_past}");
    }
}

#[test]
fn a_norm_and_its_weight_run_as_one_dispatch_unless_the_norm_is_read_again() {
    let Some(gpu) = common::gpu() else { return };
    let cpu = CpuBackend::with_threads(1);
    let x_values: Vec<f32> = (0..64 * 3).map(|i| (i as f32 * 0.61).cos() * 4.0).collect();
    let w_values: Vec<f32> = (0..64).map(|i| 0.5 + (i as f32 * 0.2).sin()).collect();
    for norm_is_output in [false, true] {
        let mut results = Vec::new();
        for backend in [&gpu as &dyn Backend, &cpu] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, &[64, 3]).unwrap();
            let w = g.input("w", DType::F32, &[64]).unwrap();
            let y = g.rms_norm(x, 1e-6).unwrap();
            let out = g.mul(y, w).unwrap();
            g.set_output(out).unwrap();
            if norm_is_output {
                g.set_output(y).unwrap();
            }
            backend.allocate_graph(&mut g).unwrap();
            backend.write_f32(&g, x, &x_values).unwrap();
            backend.write_f32(&g, w, &w_values).unwrap();
            backend.compute(&g, &g.compute_order()).unwrap();
            results.push(backend.read_f32(&g, out).unwrap());
        }
        let want = if norm_is_output { 2 } else { 1 };
        assert_eq!(
            gpu.last_run_stats().dispatches,
            want,
            "output {norm_is_output}"
        );
        for (gpu_value, cpu_value) in results[0].iter().zip(&results[1]) {
            assert!(
                (gpu_value - cpu_value).abs() < 1e-5,
                "{gpu_value} vs {cpu_value}"
            );
        }
    }
}

#[test]
fn a_split_submitted_in_pieces_computes_the_same() {
    use wginfer::backend::wgpu::WgpuOptions;
    // Seven dispatches submitted two at a time, with parameters as
    // immediates (where the adapter has them) and through the uniform
    // buffer, whose slots the pieces index from their first dispatch.
    for uniform_params in [false, true] {
        let Some(gpu) = common::gpu_with(&WgpuOptions {
            submit_every: Some(2),
            uniform_params,
            ..WgpuOptions::default()
        }) else {
            return;
        };
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[64, 2]).unwrap();
        let mut y = x;
        for i in 0..7 {
            y = g.scale(y, 1.0 + i as f32).unwrap();
        }
        g.set_output(y).unwrap();
        gpu.allocate_graph(&mut g).unwrap();
        let values: Vec<f32> = (0..128).map(|i| (i as f32 * 0.3).sin()).collect();
        gpu.write_f32(&g, x, &values).unwrap();
        gpu.compute(&g, &g.compute_order()).unwrap();
        let stats = gpu.last_run_stats();
        assert_eq!((stats.dispatches, stats.submits), (7, 4));
        // 1 * 2 * ... * 7 = 5040.
        for (got, v) in gpu.read_f32(&g, y).unwrap().iter().zip(&values) {
            assert!((got - 5040.0 * v).abs() < 1e-3, "{got} vs {}", 5040.0 * v);
        }
    }
}

#[test]
fn mat_vec_row_groups_other_than_one_two_four_or_eight_are_errors() {
    use wginfer::backend::wgpu::{WgpuBackend, WgpuOptions};
    // Only once an adapter opens does the option get checked.
    if common::gpu().is_none() {
        return;
    }
    for groups in [0, 3, 16] {
        let options = WgpuOptions {
            matvec_groups: Some(groups),
            ..WgpuOptions::default()
        };
        match WgpuBackend::new(&options) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("row groups"), "{msg}"),
            Err(e) => panic!("{groups} groups: {e}"),
            Ok(_) => panic!("{groups} groups were accepted"),
        }
    }
    let options = WgpuOptions {
        matvec_groups: Some(4),
        ..WgpuOptions::default()
    };
    assert!(WgpuBackend::new(&options).is_ok());
}

#[test]
fn the_same_graph_run_again_is_not_encoded_again() {
    let Some(gpu) = common::gpu() else { return };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 2]).unwrap();
    let y = g.silu(x).unwrap();
    let z = g.scale(y, 0.5).unwrap();
    g.set_output(z).unwrap();
    gpu.allocate_graph(&mut g).unwrap();
    for (run, seed) in [0.1f32, 0.7, 1.3].into_iter().enumerate() {
        // New inputs each run, as a decode step writes its token.
        let values: Vec<f32> = (0..128).map(|i| (i as f32 * seed).sin()).collect();
        gpu.write_f32(&g, x, &values).unwrap();
        gpu.compute(&g, &g.compute_order()).unwrap();
        let stats = gpu.last_run_stats();
        assert_eq!(stats.encoded, run == 0, "run {run}");
        assert_eq!((stats.dispatches, stats.submits), (2, 1));
        let want: Vec<f32> = values
            .iter()
            .map(|&v| 0.5 * v / (1.0 + (-v).exp()))
            .collect();
        for (got, want) in gpu.read_f32(&g, z).unwrap().iter().zip(&want) {
            assert!((got - want).abs() < 1e-6, "run {run}: {got} vs {want}");
        }
    }
    // A changed graph (a new output) is encoded anew.
    g.set_output(y).unwrap();
    gpu.compute(&g, &g.compute_order()).unwrap();
    assert!(gpu.last_run_stats().encoded);
}

/// Two dispatches on the GPU: 0.5 scaled by 2, then rms-normed (to 1).
fn scale_then_norm(gpu: &wginfer::backend::wgpu::WgpuBackend) -> (Graph, wginfer::graph::TensorId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 2]).unwrap();
    let y = g.scale(x, 2.0).unwrap();
    let z = g.rms_norm(y, 1e-5).unwrap();
    g.set_output(z).unwrap();
    gpu.allocate_graph(&mut g).unwrap();
    gpu.write_f32(&g, x, &[0.5; 128]).unwrap();
    (g, z)
}

#[test]
fn the_perf_logger_times_every_kernel_of_a_run() {
    use wginfer::backend::wgpu::WgpuOptions;
    let Some(gpu) = common::gpu_with(&WgpuOptions {
        perf_logger: Some(true),
        ..WgpuOptions::default()
    }) else {
        return;
    };
    let (g, z) = scale_then_norm(&gpu);
    for _ in 0..3 {
        gpu.compute(&g, &g.compute_order()).unwrap();
    }
    // Timed runs compute what untimed ones do.
    let out = gpu.read_f32(&g, z).unwrap();
    assert!(out.iter().all(|v| (v - 1.0).abs() < 1e-3), "{out:?}");
    let report = gpu
        .perf_report()
        .expect("the device writes timestamps inside passes");
    assert!(report.contains("over 3 runs"), "{report}");
    for kernel in ["scale", "rms_norm"] {
        let line = report
            .lines()
            .find(|l| l.contains(kernel))
            .unwrap_or_else(|| panic!("no {kernel} line in {report}"));
        assert!(line.contains("1.0 launches/run"), "{line}");
    }
}

/// The GPU timer measures every run, in one submission or several, and
/// leaves the results alone.
#[test]
fn the_gpu_timer_times_every_run() {
    use wginfer::backend::wgpu::WgpuOptions;
    // One submission per dispatch: two passes per run.
    let Some(gpu) = common::gpu_with(&WgpuOptions {
        gpu_timer: Some(true),
        submit_every: Some(1),
        ..WgpuOptions::default()
    }) else {
        return;
    };
    let (g, z) = scale_then_norm(&gpu);
    let before = gpu.counters();
    for _ in 0..70 {
        gpu.compute(&g, &g.compute_order()).unwrap();
    }
    let out = gpu.read_f32(&g, z).unwrap();
    assert!(out.iter().all(|v| (v - 1.0).abs() < 1e-3), "{out:?}");
    let after = gpu.counters();
    // Seventy runs: the ring of 64 was read once on the way, the rest now.
    assert_eq!(
        after.gpu_timed_runs - before.gpu_timed_runs,
        70,
        "{after:?}"
    );
    assert_eq!(after.submits - before.submits, 2 * 70);
    assert!(after.gpu_busy_ns > 0, "{after:?}");
    assert!(after.gpu_span_ns >= after.gpu_busy_ns, "{after:?}");
    // Asking again reads nothing new.
    assert_eq!(gpu.counters(), after);
}

/// The device sampler (top-k, top-p, min-p, temperature and a draw on the
/// GPU) picks the CPU sampler's token for the same logits and seed, draw
/// after draw, for llama.cpp's default chain and other settings.
#[test]
fn the_device_sampler_picks_the_cpu_samplers_tokens() {
    use common::Fill;
    use wginfer::model::{Pick, Sampler, SamplerOptions};
    let Some(gpu) = common::gpu() else { return };
    let n_vocab = 49152;
    let settings = [
        SamplerOptions::default(),
        SamplerOptions {
            temp: 1.5,
            top_k: 64,
            top_p: 1.0,
            min_p: 0.0,
            seed: 7,
        },
        SamplerOptions {
            temp: 0.3,
            top_k: 5,
            top_p: 0.5,
            min_p: 0.2,
            seed: 123,
        },
    ];
    let mut rng = wginfer::rng::Rng::new(99);
    for opts in settings {
        let mut cpu = Sampler::new(opts).unwrap();
        let mut dev = Sampler::new(opts).unwrap();
        let Some(Pick::TopK(k)) = dev.device_pick() else {
            panic!("{opts:?} samples on the device");
        };
        for draw in 0..40 {
            // Peaked logits like a model's: a few near the top.
            let logits: Vec<f32> = (0..n_vocab)
                .map(|_| rng.uniform(-3.0, 3.0) * rng.uniform(0.0, 2.0))
                .collect();
            let mut g = Graph::new();
            let x = g.input("logits", DType::F32, &[n_vocab, 1]).unwrap();
            let s = g.input("settings", DType::F32, &[4]).unwrap();
            let dst = g.input("token", DType::I32, &[1]).unwrap();
            let out = g.sample_into(x, k, s, dst).unwrap();
            let inputs = [
                (x, Fill::F32(logits.clone())),
                (s, Fill::F32(dev.next_device_settings().to_vec())),
                (dst, Fill::I32(vec![-1])),
            ];
            let got = common::run_on(&gpu, g, &inputs, out).unwrap()[0] as u32;
            let want = cpu.sample(&logits).unwrap();
            assert_eq!(got, want, "{opts:?}, draw {draw}");
        }
    }
}

#[test]
fn i32_copies_are_exact_and_f32_to_i32_truncates() {
    let Some(gpu) = common::gpu() else { return };
    let cpu = CpuBackend::new();
    // Past 2^24 an f32 round trip would change these.
    let ints = [16_777_217, -16_777_219, i32::MAX, i32::MIN, 123_456_789, -1];
    let floats = [2.7f32, -2.7, 0.5, -0.5, 3e9, -3e9];
    for backend in [&gpu as &dyn Backend, &cpu] {
        let mut g = Graph::new();
        let i = g.input("i", DType::I32, &[3, 2]).unwrap();
        let f = g.input("f", DType::F32, &[3, 2]).unwrap();
        let transposed = g.transpose(i).unwrap();
        let moved = g.cont(transposed).unwrap();
        let truncated = g.cast(f, DType::I32).unwrap();
        let widened = g.cast(i, DType::F32).unwrap();
        for out in [moved, truncated, widened] {
            g.set_output(out).unwrap();
        }
        backend.allocate_graph(&mut g).unwrap();
        backend.write_i32(&g, i, &ints).unwrap();
        backend.write_f32(&g, f, &floats).unwrap();
        backend.compute(&g, &g.compute_order()).unwrap();
        let as_i32 = |bytes: Vec<u8>| -> Vec<i32> {
            bytes
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        };
        let name = backend.name();
        // The transpose of [[a, b, c], [d, e, f]] is [[a, d], [b, e], [c, f]].
        let want_moved = [ints[0], ints[3], ints[1], ints[4], ints[2], ints[5]];
        assert_eq!(
            as_i32(backend.read_bytes(&g, moved).unwrap()),
            want_moved,
            "{name}"
        );
        let want_truncated = [2, -2, 0, 0, i32::MAX, i32::MIN];
        assert_eq!(
            as_i32(backend.read_bytes(&g, truncated).unwrap()),
            want_truncated,
            "{name}"
        );
        let want_widened: Vec<f32> = ints.iter().map(|&v| v as f32).collect();
        assert_eq!(
            backend.read_f32(&g, widened).unwrap(),
            want_widened,
            "{name}"
        );
    }
}
