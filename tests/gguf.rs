//! GGUF writer -> reader round trips, and reading the default model.

mod fixtures;

use std::io::Write;
use std::path::PathBuf;

use wginfer::gguf::{Array, Gguf, GgufFile, GgufWriter, Value, ValueType};
use wginfer::{DType, Error};

/// Deterministic filler bytes.
fn bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// One value of every type, arrays of every element type (incl. empty and
/// nested ones).
fn all_values() -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = vec![
        ("t.u8".into(), Value::U8(200)),
        ("t.i8".into(), Value::I8(-100)),
        ("t.u16".into(), Value::U16(65000)),
        ("t.i16".into(), Value::I16(-32000)),
        ("t.u32".into(), Value::U32(4_000_000_000)),
        ("t.i32".into(), Value::I32(-2_000_000_000)),
        ("t.f32".into(), Value::F32(-1.5e-7)),
        ("t.bool_true".into(), Value::Bool(true)),
        ("t.bool_false".into(), Value::Bool(false)),
        ("t.string".into(), Value::from("héllo, wörld ✓")),
        ("t.empty_string".into(), Value::from("")),
        ("t.u64".into(), Value::U64(u64::MAX)),
        ("t.i64".into(), Value::I64(i64::MIN)),
        ("t.f64".into(), Value::F64(std::f64::consts::PI)),
        ("t.a.u8".into(), Value::from(vec![0u8, 1, 255])),
        ("t.a.i8".into(), Value::from(vec![-128i8, 0, 127])),
        ("t.a.u16".into(), Value::from(vec![1u16, 65535])),
        ("t.a.i16".into(), Value::from(vec![-1i16, 32767])),
        ("t.a.u32".into(), Value::from(vec![7u32; 33])),
        ("t.a.i32".into(), Value::from(vec![-7i32, 3, 3, 3])),
        ("t.a.f32".into(), Value::from(vec![0.25f32, -0.0, f32::MAX])),
        ("t.a.bool".into(), Value::from(vec![true, false, true])),
        ("t.a.string".into(), Value::from(vec!["a", "", "ccc", "Ġt"])),
        ("t.a.u64".into(), Value::from(vec![u64::MAX, 0])),
        ("t.a.i64".into(), Value::from(vec![i64::MIN, i64::MAX])),
        ("t.a.f64".into(), Value::from(vec![1e300f64, -2.0])),
        (
            "t.a.nested".into(),
            Value::from(vec![
                Array::from(vec![1u8, 2]),
                Array::from(vec!["x".to_string()]),
                Array::empty(ValueType::F64),
                Array::Array(vec![Array::Array(vec![Array::from(vec![true])])]),
            ]),
        ),
    ];
    for t in ValueType::ALL {
        v.push((format!("t.empty.{t}"), Value::Array(Array::empty(t))));
    }
    v
}

#[test]
fn every_value_type_round_trips() {
    let values = all_values();
    let mut w = GgufWriter::new();
    for (k, v) in &values {
        w.add(k.clone(), v.clone());
    }
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    assert_eq!(out.len() as u64, w.file_size().unwrap());
    let g = Gguf::parse(&out).unwrap();
    assert_eq!(g.version(), 3);
    assert_eq!(g.tensors().len(), 0);
    assert_eq!(g.metadata().len(), values.len());
    for ((k, v), e) in values.iter().zip(g.metadata()) {
        assert_eq!(&e.key, k, "file order");
        assert_eq!(&e.value, v, "{k}");
        assert_eq!(g.get(k), Some(v));
    }
    assert_eq!(g.get_u32("t.u8").unwrap(), 200);
    assert_eq!(g.get_u32("t.u64").ok(), None);
    assert_eq!(g.get_f32("t.f64").unwrap(), std::f32::consts::PI);
    assert!(g.get_bool("t.bool_true").unwrap());
    assert_eq!(g.get_str("t.string").unwrap(), "héllo, wörld ✓");
    assert_eq!(g.get_str_array("t.a.string").unwrap().len(), 4);
    assert_eq!(g.get_i64_array("t.a.i16").unwrap(), [-1, 32767]);
    assert_eq!(g.get_f32_array("t.a.f64").unwrap(), [1e300f64 as f32, -2.0]);
    let nested = g.get_array("t.a.nested").unwrap().as_arrays().unwrap();
    assert_eq!(nested.len(), 4);
    assert_eq!(nested[1].as_strs().unwrap(), ["x"]);
}

#[test]
fn replacing_a_key_keeps_its_place() {
    let mut w = GgufWriter::new();
    w.add("a", 1u32).add("b", 2u32).add("a", "one");
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    let g = Gguf::parse(&out).unwrap();
    let keys: Vec<&str> = g.metadata().iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(g.get_str("a").unwrap(), "one");
}

/// (name, type id, ne) of tensors whose sizes are mostly not multiples of
/// the alignment, so every offset after the first needs padding.
fn tensor_specs() -> Vec<(&'static str, u32, Vec<usize>)> {
    vec![
        ("f32.odd", DType::F32.ggml_id(), vec![3]),
        ("q4_0", DType::Q4_0.ggml_id(), vec![32, 3]),
        ("q4_1", DType::Q4_1.ggml_id(), vec![64, 1, 1]),
        ("q8_0", DType::Q8_0.ggml_id(), vec![32, 2, 1, 3]),
        ("f16", DType::F16.ggml_id(), vec![5, 7]),
        ("q6_K", DType::Q6K.ggml_id(), vec![256, 3]),
        ("q4_K", DType::Q4K.ggml_id(), vec![256, 1, 2]),
        ("q5_0", DType::Q5_0.ggml_id(), vec![32, 3]),
        ("q5_1", DType::Q5_1.ggml_id(), vec![96]),
        ("i32", DType::I32.ggml_id(), vec![1]),
        ("q5_K", DType::Q5K.ggml_id(), vec![512]),
        ("q2_K", DType::Q2K.ggml_id(), vec![256, 3]),
        ("q3_K", DType::Q3K.ggml_id(), vec![512, 1, 1]),
        ("iq4_xs", DType::IQ4XS.ggml_id(), vec![512]),
        ("iq3_s.unsupported", 21, vec![512]),
        ("iq2_xxs.unsupported", 16, vec![256]),
        ("mxfp4.unsupported", 39, vec![32, 3]),
    ]
}

/// A writer holding [`tensor_specs`] with filler data, and that data.
fn tensor_writer(alignment: Option<usize>) -> (GgufWriter<'static>, Vec<Vec<u8>>) {
    let specs = tensor_specs();
    let datas: Vec<Vec<u8>> = specs
        .iter()
        .enumerate()
        .map(|(i, (_, ty, ne))| {
            let t = wginfer::gguf::GgmlType::from_id(*ty).unwrap();
            let n: usize = ne.iter().product();
            bytes(n / t.block_elems * t.block_bytes, i as u32)
        })
        .collect();
    let mut w = GgufWriter::new();
    w.add("general.architecture", "test");
    if let Some(a) = alignment {
        w.set_alignment(a).unwrap();
    }
    for ((name, ty, ne), data) in specs.iter().zip(&datas) {
        if let Some(d) = DType::from_ggml_id(*ty) {
            w.add_tensor(*name, d, ne, data.clone()).unwrap();
        } else {
            w.add_tensor_raw(*name, *ty, ne, data.clone()).unwrap();
        }
    }
    (w, datas)
}

fn round_trip_tensors(alignment: Option<usize>) {
    let specs = tensor_specs();
    let (mut w, datas) = tensor_writer(alignment);
    let dir = std::env::temp_dir().join(format!("wginfer-gguf-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("align-{}.gguf", alignment.unwrap_or(0)));
    w.write_file(&path).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let align = alignment.unwrap_or(32);
    assert_eq!(f.alignment(), align);
    assert_eq!(f.data_offset() % align, 0);
    assert_eq!(f.file_size() as u64, w.file_size().unwrap());
    assert_eq!(f.tensors().len(), specs.len());
    for (((name, ty, ne), data), t) in specs.iter().zip(&datas).zip(f.tensors()) {
        assert_eq!(t.name, *name);
        assert_eq!(t.ggml_type, *ty);
        assert_eq!(t.shape(), ne.as_slice());
        assert_eq!(t.size, data.len());
        assert_eq!(t.offset % align as u64, 0, "{name} offset");
        assert_eq!(f.tensor_data(t), data.as_slice(), "{name} data");
        match DType::from_ggml_id(*ty) {
            Some(d) => assert_eq!(t.dtype().unwrap(), d),
            None => match t.dtype() {
                Err(Error::UnsupportedType(m)) => {
                    assert!(m.contains(name) && m.contains(t.type_name()), "{m}")
                }
                other => panic!("{other:?}"),
            },
        }
    }
    let (info, data) = f.tensor_by_name("q6_K").unwrap();
    assert_eq!((info.ne, data.len()), ([256, 3, 1, 1], 3 * 210));
    drop(f);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn tensors_round_trip_default_alignment() {
    round_trip_tensors(None);
}

#[test]
fn tensors_round_trip_alignment_1_and_64_and_4096() {
    round_trip_tensors(Some(1));
    round_trip_tensors(Some(64));
    round_trip_tensors(Some(4096));
}

#[test]
fn writer_rejects_bad_tensors() {
    let mut w = GgufWriter::new();
    assert!(w.add_tensor("a", DType::F32, &[4], vec![0u8; 15]).is_err());
    assert!(w.add_tensor("a", DType::Q4_0, &[16], vec![0u8; 9]).is_err());
    assert!(w.add_tensor("a", DType::F32, &[], vec![]).is_err());
    assert!(w
        .add_tensor("a", DType::F32, &[1, 1, 1, 1, 1], vec![0u8; 4])
        .is_err());
    assert!(w.add_tensor("a", DType::F32, &[0], vec![]).is_err());
    assert!(w
        .add_tensor("a", DType::F32, &[usize::MAX, 3], vec![])
        .is_err());
    assert!(w.add_tensor_raw("a", 4, &[32], vec![]).is_err());
    assert!(w.set_alignment(3).is_err() && w.set_alignment(0).is_err());
    w.add_tensor("a", DType::F32, &[1], vec![0u8; 4]).unwrap();
    assert!(w.add_tensor("a", DType::F32, &[1], vec![0u8; 4]).is_err());
    // A producer that writes the wrong amount is an error, not a bad file.
    let mut w = GgufWriter::new();
    w.add_tensor_with("short", DType::F32, &[4], |o| o.write_all(&[0; 8]))
        .unwrap();
    assert!(w.write_to(Vec::new()).is_err());
    let mut w = GgufWriter::new();
    w.add_tensor_with("long", DType::F32, &[4], |o| o.write_all(&[0; 17]))
        .unwrap();
    assert!(w.write_to(Vec::new()).is_err());
}

/// Counts bytes and keeps the first few KiB (the header).
struct Sink {
    n: u64,
    head: Vec<u8>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let keep = (64 * 1024usize)
            .saturating_sub(self.head.len())
            .min(buf.len());
        self.head.extend_from_slice(&buf[..keep]);
        self.n += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A synthetic model over 4 GiB is written with producers (nothing held in
/// memory); its header parses with offsets past 4 GiB.
#[test]
fn streams_a_4_gib_model() {
    const MIB: usize = 1 << 20;
    let chunk = vec![0x5au8; MIB];
    let mut w = GgufWriter::new();
    w.add("general.architecture", "synthetic");
    for i in 0..5 {
        // 1 GiB + 17 bytes of f16 per tensor: odd sizes, so padding matters.
        let ne = [(1 << 29) + 17, 1];
        let size = ne[0] * 2;
        let chunk = &chunk;
        w.add_tensor_with(format!("big.{i}"), DType::F16, &ne, move |o| {
            let mut left = size;
            while left > 0 {
                let k = left.min(MIB);
                o.write_all(&chunk[..k])?;
                left -= k;
            }
            Ok(())
        })
        .unwrap();
    }
    let mut sink = Sink {
        n: 0,
        head: Vec::new(),
    };
    w.write_to(&mut sink).unwrap();
    assert_eq!(sink.n, w.file_size().unwrap());
    assert!(sink.n > 5 << 30);
    // The header alone is not a valid file (the data is missing), but its
    // error must be about tensor data, not the header.
    match Gguf::parse(&sink.head) {
        Err(Error::Gguf { msg, .. }) => assert!(msg.contains("runs past the end"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn reads_the_default_model() {
    let f = GgufFile::open(fixtures::default_model()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.metadata().len(), 33);
    assert_eq!(f.architecture().unwrap(), "llama");
    assert_eq!(f.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(f.get_u32("llama.context_length").unwrap(), 8192);
    assert_eq!(f.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(f.get_u32("llama.feed_forward_length").unwrap(), 1536);
    assert_eq!(f.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(f.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(f.get_u32("llama.rope.dimension_count").unwrap(), 64);
    assert_eq!(f.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(
        f.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(),
        1e-5
    );
    assert_eq!(f.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(f.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    let tokens = f.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[..3], ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]);
    assert_eq!(
        f.get_str_array("tokenizer.ggml.merges").unwrap().len(),
        48900
    );
    assert_eq!(
        f.get_i64_array("tokenizer.ggml.token_type").unwrap().len(),
        49152
    );
    assert_eq!(f.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(f.get_u32("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert!(!f.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    assert!(f
        .get_str("tokenizer.chat_template")
        .unwrap()
        .contains("<|im_start|>"));

    assert_eq!(f.tensors().len(), 272);
    let count = |ty: u32| f.tensors().iter().filter(|t| t.ggml_type == ty).count();
    assert_eq!((count(0), count(3), count(8)), (61, 210, 1));
    let embd = f.require_tensor("token_embd.weight").unwrap();
    assert_eq!(embd.dtype().unwrap(), DType::Q8_0);
    assert_eq!(embd.shape(), &[576, 49152]);
    assert_eq!(embd.size, 576 / 32 * 34 * 49152);
    assert_eq!(f.tensor_range(embd).start, f.data_offset());
    assert_eq!(f.data_offset(), 1785664);
    let q = f.require_tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(
        (q.dtype().unwrap(), q.shape()),
        (DType::Q4_1, &[576usize, 576][..])
    );
    let k = f.require_tensor("blk.29.attn_k.weight").unwrap();
    assert_eq!(k.shape(), &[576, 192]);
    assert!(f.tensor("output.weight").is_none(), "embeddings are tied");
    let norm = f.require_tensor("output_norm.weight").unwrap();
    assert_eq!(f.tensor_range(norm).end, f.file_size());
    // Every tensor's data is a readable slice of the right size.
    let total: usize = f.tensors().iter().map(|t| f.tensor_data(t).len()).sum();
    let sizes: usize = f.tensors().iter().map(|t| t.size).sum();
    assert_eq!(total, sizes);
    // f32 norms look like norms.
    let w = f.tensor_data(norm);
    let first = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    assert!(first.is_finite() && first.abs() < 100.0, "{first}");
}

/// Writes small seed files for the fuzzer and checks each parses back. They
/// go to `WGINFER_WRITE_FUZZ_SEEDS` when it names a directory:
/// `WGINFER_WRITE_FUZZ_SEEDS=fuzz/corpus/gguf_read cargo test --test gguf fuzz_seeds`
#[test]
fn fuzz_seeds_parse() {
    let dir = std::env::var_os("WGINFER_WRITE_FUZZ_SEEDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("wginfer-seeds-{}", std::process::id()))
        });
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in all_values() {
        w.add(k, v);
    }
    w.write_file(dir.join("seed-values.gguf")).unwrap();
    for (name, alignment) in [("seed-tensors.gguf", None), ("seed-align1.gguf", Some(1))] {
        tensor_writer(alignment)
            .0
            .write_file(dir.join(name))
            .unwrap();
    }
    let mut w = GgufWriter::new();
    w.add("general.architecture", "llama")
        .add("llama.block_count", 1u32);
    w.add_tensor("token_embd.weight", DType::Q8_0, &[32, 2], vec![7u8; 68])
        .unwrap();
    w.add_tensor("output_norm.weight", DType::F32, &[2], vec![0u8; 8])
        .unwrap();
    w.write_file(dir.join("seed-tiny.gguf")).unwrap();
    for name in [
        "seed-values.gguf",
        "seed-tensors.gguf",
        "seed-align1.gguf",
        "seed-tiny.gguf",
    ] {
        let file = GgufFile::open(dir.join(name)).unwrap();
        assert!(file.metadata().len() + file.tensors().len() > 0, "{name}");
    }
}
