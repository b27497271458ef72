//! The CPU backend's worker threads. A decode step hands a few hundred
//! small ops to the workers, a few microseconds of work each; a pool whose
//! idle threads sleep pays a wake-up per op (rayon's did: with two threads
//! a step spent 11% in the kernel, yielding and stealing). These workers
//! spin between ops for a while, as ggml's do, and only then sleep.
//!
//! [`Workers::run`] runs one task on every worker, the calling thread
//! included, and returns when all have finished; ops reach the workers of
//! the backend that computes them through [`Workers::enter`].

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps: longer than the host's
/// work between two ops of a step, far shorter than a user's pause. With
/// more workers than the process may run at once, spinning would take the
/// cores from the workers with work (the default model decoded 10 tok/s
/// with four spinning threads on two cores): then they sleep at once and
/// waiting threads yield.
const SPIN: Duration = Duration::from_micros(200);

/// One job: called once per worker with the worker's index.
type Task<'a> = dyn Fn(usize) + Sync + 'a;

struct Shared {
    /// Bumped once per job; workers wait for it to change.
    epoch: Padded<AtomicUsize>,
    /// The current job (a reference to the caller's reference to it), set
    /// before `epoch` is bumped and valid until `pending` is back to zero
    /// (see `Workers::run`). An atomic rather than a lock: sixteen workers
    /// taking one lock per op queued on it.
    task: Padded<AtomicPtr<&'static Task<'static>>>,
    /// Workers (not counting the caller) still running the current job.
    pending: Padded<AtomicUsize>,
    /// Set when a worker's part of the current job panicked.
    panicked: AtomicBool,
    /// Workers asleep or about to be, so a new job knows to wake them.
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
    /// How long idle workers spin: [`SPIN`], or zero when oversubscribed.
    spin: Duration,
}

/// A value alone on its cache lines (two, for CPUs that fetch lines in
/// pairs): the epoch the idle workers spin on is not invalidated by each
/// worker's count of `pending`.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Threads kept for a backend's life, `threads - 1` of them: the thread
/// that calls [`Workers::run`] is worker 0.
pub struct Workers {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    /// Held by the thread whose job the workers run: a backend shared by
    /// threads runs one job at a time there.
    busy: Mutex<()>,
}

thread_local! {
    /// The workers of the compute running on this thread, if any.
    static CURRENT: Cell<Option<*const Workers>> = const { Cell::new(None) };
}

impl Workers {
    /// `threads` workers (at least 2), or the error of the first thread
    /// that could not be spawned.
    pub fn new(threads: usize) -> std::io::Result<Workers> {
        let threads = threads.max(2);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shared = Arc::new(Shared {
            epoch: Padded(AtomicUsize::new(0)),
            task: Padded(AtomicPtr::new(std::ptr::null_mut())),
            pending: Padded(AtomicUsize::new(0)),
            panicked: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            spin: if threads <= cores {
                SPIN
            } else {
                Duration::ZERO
            },
        });
        let mut workers = Workers {
            shared,
            handles: Vec::new(),
            busy: Mutex::new(()),
        };
        for index in 1..threads {
            let shared = Arc::clone(&workers.shared);
            let handle = std::thread::Builder::new()
                .name(format!("wginfer-cpu-{index}"))
                .spawn(move || work(&shared, index))?;
            // Pushed at once, so that Drop stops those already started.
            workers.handles.push(handle);
        }
        Ok(workers)
    }

    /// Number of workers, the calling thread included.
    pub fn threads(&self) -> usize {
        self.handles.len() + 1
    }

    /// Runs `f` with these workers as the ones [`Workers::with_current`] gives
    /// on this thread.
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Restore(Option<*const Workers>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(Some(self as *const Workers))));
        f()
    }

    /// Runs `f` with the workers entered on this thread, if any.
    pub fn with_current<T>(f: impl FnOnce(Option<&Workers>) -> T) -> T {
        let current = CURRENT.with(Cell::get);
        // SAFETY: `enter` sets the pointer from a reference that outlives
        // its call and restores the previous value when the call ends, so
        // a pointer found here points at live workers.
        f(current.map(|p| unsafe { &*p }))
    }

    /// Calls `task(i)` for every worker index i (0 on this thread) and
    /// returns when all calls have returned: `false` when one on another
    /// thread panicked (this thread's own panic is resumed here, after the
    /// others have finished). While another thread's job runs, this thread
    /// makes every call itself.
    #[must_use]
    pub fn run(&self, task: &Task<'_>) -> bool {
        let Ok(_busy) = self.busy.try_lock() else {
            for i in 0..self.threads() {
                task(i);
            }
            return true;
        };
        let shared = &*self.shared;
        // SAFETY: the workers use the task only between the epoch bump
        // below and their decrement of `pending`, and this function does
        // not return (nor unwind) before `pending` is zero, so the task
        // outlives every use of this lifetime-erased reference, and so
        // does `erased` itself, the slot on this stack they read it from.
        let mut erased: &'static Task<'static> = unsafe { std::mem::transmute(task) };
        shared.task.store(&mut erased, Ordering::Relaxed);
        shared.panicked.store(false, Ordering::Relaxed);
        shared.pending.store(self.handles.len(), Ordering::Relaxed);
        // Publishes the task and the count with it (SeqCst, for the
        // sleepers' check below).
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        if shared.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = lock(&shared.sleep);
            shared.wake.notify_all();
        }
        let own = panic::catch_unwind(AssertUnwindSafe(|| task(0)));
        let started = Instant::now();
        let mut spins = 0u32;
        while shared.pending.load(Ordering::Acquire) > 0 {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            // A worker still running may need this core.
            if spins.is_multiple_of(256) && started.elapsed() >= shared.spin {
                std::thread::yield_now();
            }
        }
        shared.task.store(std::ptr::null_mut(), Ordering::Relaxed);
        if let Err(payload) = own {
            panic::resume_unwind(payload);
        }
        !shared.panicked.load(Ordering::Relaxed)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        {
            let _guard = lock(&self.shared.sleep);
            self.shared.wake.notify_all();
        }
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

/// A worker's loop: wait for a new epoch (spinning, then asleep), run its
/// part of the job, report it done.
fn work(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        let started = Instant::now();
        let mut spins = 0u32;
        while shared.epoch.load(Ordering::Acquire) == seen {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            // Reading the clock every few hundred spins keeps it cheap.
            if spins.is_multiple_of(256) && started.elapsed() >= shared.spin {
                sleep_until_new_epoch(shared, seen);
            }
        }
        seen = shared.epoch.load(Ordering::Acquire);
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        // SAFETY: set before the epoch this worker saw (read with Acquire)
        // and valid until this worker decrements `pending` (see `run`).
        let task = unsafe { shared.task.load(Ordering::Relaxed).as_ref() };
        if let Some(task) = task {
            if panic::catch_unwind(AssertUnwindSafe(|| task(index))).is_err() {
                shared.panicked.store(true, Ordering::Relaxed);
            }
        }
        shared.pending.fetch_sub(1, Ordering::Release);
    }
}

fn sleep_until_new_epoch(shared: &Shared, seen: usize) {
    let mut guard = lock(&shared.sleep);
    // Counted before the last check: a job posted after that check sees
    // the sleeper and wakes it (both sides use SeqCst).
    shared.sleepers.fetch_add(1, Ordering::SeqCst);
    while shared.epoch.load(Ordering::SeqCst) == seen {
        guard = shared.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
    }
    shared.sleepers.fetch_sub(1, Ordering::SeqCst);
}

/// A lock that a panicked holder does not poison for the others (the data
/// behind these locks stays valid whatever a task did).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_runs_each_task_once() {
        let workers = Workers::new(3).unwrap();
        assert_eq!(workers.threads(), 3);
        for round in 0..1000 {
            let counts: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            assert!(workers.run(&|i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
            }));
            let counts: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            assert_eq!(counts, [1, 1, 1], "round {round}");
            if round % 100 == 0 {
                // Long enough for the workers to fall asleep.
                std::thread::sleep(SPIN * 3);
            }
        }
    }

    #[test]
    fn a_panicking_worker_is_reported_after_the_others_finish() {
        let workers = Workers::new(2).unwrap();
        let done = AtomicUsize::new(0);
        let finished = workers.run(&|i| {
            if i == 1 {
                panic!("worker 1 fails");
            }
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert!(!finished);
        assert_eq!(done.load(Ordering::Relaxed), 1);
        // The pool still works afterwards.
        let ran = AtomicUsize::new(0);
        assert!(workers.run(&|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn threads_sharing_the_workers_each_get_every_call() {
        let workers = Workers::new(2).unwrap();
        let calls = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        assert!(workers.run(&|_| {
                            calls.fetch_add(1, Ordering::Relaxed);
                        }));
                    }
                });
            }
        });
        assert_eq!(calls.load(Ordering::Relaxed), 4 * 200 * 2);
    }

    #[test]
    fn current_is_the_entered_pool_only_inside_enter() {
        let workers = Workers::new(2).unwrap();
        assert!(Workers::with_current(|w| w.is_none()));
        let inside = workers.enter(|| Workers::with_current(|w| w.map(Workers::threads)));
        assert_eq!(inside, Some(2));
        assert!(Workers::with_current(|w| w.is_none()));
    }
}
