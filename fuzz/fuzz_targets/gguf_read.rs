//! Fuzzes the GGUF reader: `Gguf::parse` must never panic, and a file it
//! accepts must have every tensor's data inside the input and must survive a
//! write -> parse -> write round trip byte for byte.
//!
//! ```text
//! WGINFER_WRITE_FUZZ_SEEDS=fuzz/corpus/gguf_read cargo test --test gguf write_fuzz_seeds
//! RUSTC_BOOTSTRAP=1 cargo fuzz run gguf_read -- -max_total_time=120
//! ```
#![no_main]

use libfuzzer_sys::fuzz_target;
use wginfer::gguf::{Gguf, GgufWriter};

/// Writes `g` (with its tensor data from `file`) back out.
fn rewrite(g: &Gguf, file: &[u8]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for e in g.metadata() {
        w.add(e.key.clone(), e.value.clone());
    }
    for t in g.tensors() {
        let data = &file[g.tensor_range(t)];
        w.add_tensor_raw(t.name.clone(), t.ggml_type, t.shape(), data.to_vec())
            .expect("a parsed tensor is writable");
    }
    let mut out = Vec::new();
    w.write_to(&mut out).expect("a parsed file is writable");
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(g) = Gguf::parse(data) else {
        return;
    };
    let mut acc = 0u8;
    for t in g.tensors() {
        let range = g.tensor_range(t);
        // Plain indexing on purpose: a range outside the input is a bug.
        let bytes = &data[range.clone()];
        assert_eq!(bytes.len(), t.size, "{}", t.name);
        assert_eq!(range.start % g.alignment(), g.data_offset() % g.alignment());
        acc ^= bytes.first().copied().unwrap_or(0) ^ bytes.last().copied().unwrap_or(0);
        let _ = t.dtype();
    }
    for e in g.metadata() {
        let _ = e.value.to_string();
        assert!(g.get(&e.key).is_some());
    }
    let _ = g.architecture();
    std::hint::black_box(acc);

    let once = rewrite(&g, data);
    let g2 = Gguf::parse(&once).expect("a rewritten file parses");
    assert_eq!(
        g2.tensors(),
        g.tensors()
            .iter()
            .map(|t| {
                let mut t = t.clone();
                t.offset = g2.tensor(&t.name).map_or(0, |u| u.offset);
                t
            })
            .collect::<Vec<_>>()
            .as_slice()
    );
    assert_eq!(
        rewrite(&g2, &once),
        once,
        "write -> parse -> write is stable"
    );
});
