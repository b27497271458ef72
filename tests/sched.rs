//! The scheduler: placement by storage and weights, expansion, CPU fallback
//! for declined ops, splits, copies between backends, and results equal to
//! a one-backend run.

mod common;

use std::sync::Arc;

use common::{nmse, Rng};
use wginfer::backend::cpu::CpuBackend;
use wginfer::backend::{Backend, BufferHandle, BufferUsage, TensorIo};
use wginfer::graph::{Graph, Op, TensorData, TensorId};
use wginfer::sched::{Reason, Scheduler};
use wginfer::{DType, Result};

/// A CPU backend that declines one op, standing in for a GPU that lacks a kernel.
struct Picky {
    inner: CpuBackend,
    declines: &'static str,
}

impl Backend for Picky {
    fn name(&self) -> &str {
        "picky"
    }
    fn alignment(&self) -> usize {
        self.inner.alignment()
    }
    fn max_buffer_size(&self) -> usize {
        self.inner.max_buffer_size()
    }
    fn alloc_buffer(&self, size: usize, usage: BufferUsage) -> Result<BufferHandle> {
        self.inner.alloc_buffer(size, usage)
    }
    fn owns(&self, buffer: &BufferHandle) -> bool {
        self.inner.owns(buffer)
    }
    fn write_buffer(&self, buffer: &BufferHandle, offset: usize, data: &[u8]) -> Result<()> {
        self.inner.write_buffer(buffer, offset, data)
    }
    fn read_buffer(&self, buffer: &BufferHandle, offset: usize, out: &mut [u8]) -> Result<()> {
        self.inner.read_buffer(buffer, offset, out)
    }
    fn supports_op(&self, graph: &Graph, node: TensorId) -> bool {
        graph.node(node).op.name() != self.declines
    }
    fn compute(&self, graph: &Graph, nodes: &[TensorId]) -> Result<()> {
        if let Some(&bad) = nodes.iter().find(|&&n| !self.supports_op(graph, n)) {
            panic!("picky was asked to compute '{}'", graph.node(bad).name);
        }
        self.inner.compute(graph, nodes)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

fn picky(declines: &'static str) -> Arc<dyn Backend> {
    Arc::new(Picky {
        inner: CpuBackend::with_threads(1),
        declines,
    })
}

/// A weight of `ne` with seeded values, bound to a buffer of `backend`.
fn weight(g: &mut Graph, backend: &dyn Backend, name: &str, ne: &[usize], seed: u64) -> TensorId {
    let id = g.input(name, DType::F32, ne).unwrap();
    let n: usize = ne.iter().product();
    let buffer = backend.alloc_buffer(n * 4, BufferUsage::Weights).unwrap();
    g.bind(id, TensorData { buffer, offset: 0 }).unwrap();
    backend
        .write_f32(g, id, &Rng::new(seed).vec(n, -1.0, 1.0))
        .unwrap();
    id
}

/// x -> mul_mat(w0) -> silu -> mul_mat(w1, a strided view) -> gelu -> scale,
/// with w0 on `b0` and w1 on `b1`.
struct TwoLayer {
    g: Graph,
    x: TensorId,
    h: TensorId,
    act: TensorId,
    y: TensorId,
    gelu: TensorId,
    out: TensorId,
}

fn two_layer(b0: &dyn Backend, b1: &dyn Backend) -> TwoLayer {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[16, 3]).unwrap();
    let w0 = weight(&mut g, b0, "w0", &[16, 24], 1);
    let w1 = weight(&mut g, b1, "w1", &[12, 8], 2);
    let h = g.mul_mat(w0, x).unwrap();
    let act = g.silu(h).unwrap();
    // Every other row of 12: a strided view read by the other backend.
    let row = g.layout(act).nb[1];
    let half = g.view(act, &[12, 3], &[row], 0).unwrap();
    let y = g.mul_mat(w1, half).unwrap();
    let gelu = g.gelu(y).unwrap();
    let out = g.scale(gelu, 0.5).unwrap();
    g.set_output(out).unwrap();
    TwoLayer {
        g,
        x,
        h,
        act,
        y,
        gelu,
        out,
    }
}

fn x_values() -> Vec<f32> {
    Rng::new(3).vec(48, -2.0, 2.0)
}

/// The graph on one CPU backend, the spec the scheduled runs must match.
fn reference() -> Vec<f32> {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    let t = two_layer(cpu.as_ref(), cpu.as_ref());
    let mut sched = Scheduler::new(vec![cpu]).unwrap();
    let mut s = sched.schedule(&t.g).unwrap();
    assert_eq!(s.splits().len(), 1, "one backend, one split");
    assert!(s.splits()[0].transfers.is_empty());
    sched.allocate(&mut s).unwrap();
    sched.write_f32(&s, t.x, &x_values()).unwrap();
    let stats = sched.compute(&s).unwrap();
    assert_eq!((stats.splits, stats.transfers), (1, 0));
    sched.read_f32(&s, t.out).unwrap()
}

fn as_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[test]
fn ops_follow_their_weights_and_sources_are_copied_across() {
    let want = reference();
    let (a, b): (Arc<dyn Backend>, Arc<dyn Backend>) = (
        Arc::new(CpuBackend::with_threads(1)),
        Arc::new(CpuBackend::with_threads(1)),
    );
    let t = two_layer(a.as_ref(), b.as_ref());
    let mut sched = Scheduler::new(vec![a, b]).unwrap();
    let mut s = sched.schedule(&t.g).unwrap();
    let at = |id| s.placement(id).unwrap();
    assert_eq!(at(t.h).0, 0);
    assert!(matches!(at(t.h).1, Reason::Weights(_)));
    assert_eq!(at(t.act), (0, Reason::Neighbour(s.tensor(t.h).unwrap())));
    assert_eq!(at(t.x), (0, Reason::FirstUse(s.tensor(t.h).unwrap())));
    assert_eq!(at(t.y).0, 1, "w1 lives on backend 1");
    // The fallback backend spreads only in the last passes: gelu follows y.
    assert_eq!(at(t.gelu).0, 1);
    assert_eq!(at(t.out).0, 1);
    let splits = s.splits();
    assert_eq!(splits.len(), 2);
    assert_eq!((splits[0].backend, splits[1].backend), (0, 1));
    assert_eq!(
        splits[1].transfers.len(),
        1,
        "the strided view of silu's result"
    );
    let copy = s.graph().node(splits[1].transfers[0]);
    assert_eq!(copy.op, Op::Transfer);
    assert_eq!(
        copy.layout.nb[1],
        s.graph().layout(s.tensor(t.act).unwrap()).nb[1]
    );

    sched.allocate(&mut s).unwrap();
    let arena = sched.arena_bytes();
    sched.write_f32(&s, t.x, &x_values()).unwrap();
    let stats = sched.compute(&s).unwrap();
    assert_eq!((stats.splits, stats.transfers), (2, 1));
    assert!(stats.transfer_bytes >= 12 * 4);
    let got = sched.read_f32(&s, t.out).unwrap();
    assert_eq!(got, want, "the same ops on the same reference code");

    // The next graph of the same shape reuses the arenas.
    let mut again = sched.schedule(&t.g).unwrap();
    sched.allocate(&mut again).unwrap();
    assert_eq!(sched.arena_bytes(), arena);
}

#[test]
fn declined_ops_fall_back_to_the_cpu() {
    let want = reference();
    let gpu = picky("gelu");
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    let t = two_layer(gpu.as_ref(), gpu.as_ref());
    let mut sched = Scheduler::new(vec![gpu, cpu]).unwrap();
    let mut s = sched.schedule(&t.g).unwrap();
    assert_eq!(s.placement(t.gelu).unwrap(), (1, Reason::Declined(0)));
    assert_eq!(
        s.placement(t.out).unwrap().0,
        0,
        "back on the preferred backend"
    );
    let backends: Vec<usize> = s.splits().iter().map(|s| s.backend).collect();
    assert_eq!(backends, [0, 1, 0]);
    assert!(s.splits().iter().skip(1).all(|s| s.transfers.len() == 1));
    sched.allocate(&mut s).unwrap();
    sched.write_f32(&s, t.x, &x_values()).unwrap();
    sched.compute(&s).unwrap();
    assert_eq!(sched.read_f32(&s, t.out).unwrap(), want);
}

#[test]
fn a_tensor_no_backend_owns_is_an_error() {
    let stranger = CpuBackend::with_threads(1);
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    let t = two_layer(&stranger, cpu.as_ref());
    let sched = Scheduler::new(vec![cpu]).unwrap();
    let e = sched
        .schedule(&t.g)
        .expect_err("w0 is elsewhere")
        .to_string();
    assert!(
        e.contains("'w0'") && e.contains("none of the scheduler's backends"),
        "{e}"
    );
    assert!(Scheduler::new(vec![]).is_err());
}

/// A schedule made for two backends, run or read by a scheduler of one:
/// an error naming the missing backend, not an index out of bounds.
#[test]
fn a_schedule_for_more_backends_is_an_error() {
    let (a, b): (Arc<dyn Backend>, Arc<dyn Backend>) = (
        Arc::new(CpuBackend::with_threads(1)),
        Arc::new(CpuBackend::with_threads(1)),
    );
    let t = two_layer(a.as_ref(), b.as_ref());
    let mut two = Scheduler::new(vec![a.clone(), b]).unwrap();
    let mut s = two.schedule(&t.g).unwrap();
    two.allocate(&mut s).unwrap();
    let mut one = Scheduler::new(vec![a]).unwrap();
    one.write_f32(&s, t.x, &x_values()).unwrap(); // x is on backend 0
    let e = one.compute(&s).unwrap_err().to_string();
    assert!(e.contains("backend 1"), "{e}");
    let e = one.read_f32(&s, t.out).unwrap_err().to_string();
    assert!(e.contains("backend 1"), "{e}");
}

#[test]
fn a_graph_of_views_runs_no_split() {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4, 2]).unwrap();
    let t = g.transpose(x).unwrap();
    g.set_output(t).unwrap();
    let mut sched = Scheduler::new(vec![cpu]).unwrap();
    let mut s = sched.schedule(&g).unwrap();
    assert!(s.splits().is_empty());
    sched.allocate(&mut s).unwrap();
    sched.write_f32(&s, x, &[0.0; 8]).unwrap();
    assert_eq!(sched.compute(&s).unwrap().splits, 0);
}

#[test]
fn wgpu_and_cpu_split_matches_the_cpu() {
    let Some(gpu) = common::gpu() else { return };
    let want = reference();
    let gpu: Arc<dyn Backend> = Arc::new(gpu);
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    // w0 on the CPU, w1 on the GPU: CPU split, then a GPU split.
    let t = two_layer(cpu.as_ref(), gpu.as_ref());
    let mut sched = Scheduler::new(vec![gpu, cpu]).unwrap();
    let mut s = sched.schedule(&t.g).unwrap();
    let backends: Vec<usize> = s.splits().iter().map(|s| s.backend).collect();
    assert_eq!(backends, [1, 0]);
    sched.allocate(&mut s).unwrap();
    sched.write_f32(&s, t.x, &x_values()).unwrap();
    let stats = sched.compute(&s).unwrap();
    assert_eq!(stats.transfers, 1);
    let got = sched.read_f32(&s, t.out).unwrap();
    let err = nmse(&got, &as_f64(&want));
    assert!(err < 5e-4, "nmse {err}");
}

#[test]
fn row_parts_on_two_backends_gather_into_an_empty_tensor() {
    // W [6, 10] x [6, 3], W's rows 0..4 on backend 1 and 4..10 on backend 0;
    // the products are copied into views of one Empty tensor on backend 0.
    let (k, n, m) = (6, 10, 3);
    let b0: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    let b1: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1));
    let w_all = Rng::new(7).vec(k * n, -1.0, 1.0);
    let x_all = Rng::new(8).vec(k * m, -1.0, 1.0);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[k, m]).unwrap();
    let mut parts = Vec::new();
    for (backend, rows) in [(&b1, 0..4), (&b0, 4..n)] {
        let id = g
            .input(&format!("w{rows:?}"), DType::F32, &[k, rows.len()])
            .unwrap();
        let bytes = rows.len() * k * 4;
        let buffer = backend.alloc_buffer(bytes, BufferUsage::Weights).unwrap();
        g.bind(id, TensorData { buffer, offset: 0 }).unwrap();
        backend
            .as_ref()
            .write_f32(&g, id, &w_all[rows.start * k..rows.end * k])
            .unwrap();
        let product = g.mul_mat(id, x).unwrap();
        parts.push((product, rows));
    }
    let full = g.empty("w*x", DType::F32, &[n, m]).unwrap();
    let row_stride = g.layout(full).nb[1];
    for (product, rows) in parts {
        let dst = g
            .view(full, &[rows.len(), m], &[row_stride], rows.start * 4)
            .unwrap();
        g.cpy(product, dst).unwrap();
    }
    let out = g.scale(full, 2.0).unwrap();
    g.set_output(out).unwrap();

    let mut sched = Scheduler::new(vec![b0, b1]).unwrap();
    let mut s = sched.schedule(&g).unwrap();
    let on: Vec<usize> = s.splits().iter().map(|s| s.backend).collect();
    assert_eq!(
        on,
        [1, 0],
        "the far part first, then the home part and the gather"
    );
    assert_eq!(s.placement(full).unwrap().0, 0);
    sched.allocate(&mut s).unwrap();
    sched.write_f32(&s, x, &x_all).unwrap();
    let stats = sched.compute(&s).unwrap();
    assert_eq!(
        stats.transfers, 2,
        "x (placed on backend 1, its first reader) and backend 1's product, both to backend 0"
    );
    let got = sched.read_f32(&s, out).unwrap();
    let want: Vec<f64> = (0..m)
        .flat_map(|j| {
            let (w_all, x_all) = (&w_all, &x_all);
            (0..n).map(move |i| {
                2.0 * (0..k)
                    .map(|p| f64::from(w_all[i * k + p]) * f64::from(x_all[j * k + p]))
                    .sum::<f64>()
            })
        })
        .collect();
    let err = nmse(&got, &want);
    assert!(err < 1e-10, "nmse {err}");
}
