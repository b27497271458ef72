//! Malformed GGUF files, made from a valid written one: each must give
//! `Err(Error::Gguf { .. })` naming the problem, never a panic.

use wginfer::gguf::{Array, Gguf, GgufWriter};
use wginfer::{DType, Error};

const T_A: &str = "tensor.alpha";
const T_B: &str = "tensor.bravo";
const T_C: &str = "tensor.charl";

/// A valid file: a few kinds of metadata, three tensors of odd sizes.
fn base() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", "test")
        .add("general.name", "malformed-base")
        .add("t.k1", 7u32)
        .add("t.k2", 8u32)
        .add("t.flag", true)
        .add("t.arr", vec![1u32, 2, 3])
        .add("t.strs", vec!["ab", "cd"])
        .add(
            "t.nested",
            vec![Array::from(vec![1u8]), Array::from(vec![2u8, 3])],
        );
    w.set_alignment(32).unwrap();
    w.add_tensor(T_A, DType::F32, &[5], vec![1u8; 20]).unwrap();
    w.add_tensor(T_B, DType::Q4_0, &[32, 2], vec![2u8; 36])
        .unwrap();
    w.add_tensor(T_C, DType::F16, &[3, 2], vec![3u8; 12])
        .unwrap();
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    out
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{needle:?} not in file"))
}

/// Position just after the length-prefixed string `s` (a key or a name).
fn after(f: &[u8], s: &str) -> usize {
    let mut pat = (s.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(s.as_bytes());
    find(f, &pat) + pat.len()
}

/// Position of the value of metadata `key` (after its type field).
fn value_at(f: &[u8], key: &str) -> usize {
    after(f, key) + 4
}

/// Positions of a tensor's (n_dims, first dim, type, offset) fields.
fn tensor_fields(f: &[u8], name: &str) -> (usize, usize, usize, usize) {
    let nd_at = after(f, name);
    let nd = u32::from_le_bytes(f[nd_at..nd_at + 4].try_into().unwrap()) as usize;
    let dims = nd_at + 4;
    let ty = dims + 8 * nd;
    (nd_at, dims, ty, ty + 4)
}

fn set_u32(f: &mut [u8], at: usize, v: u32) {
    f[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn set_u64(f: &mut [u8], at: usize, v: u64) {
    f[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(f: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(f[at..at + 8].try_into().unwrap())
}

/// Parses `f`, which must fail with a GGUF error; returns the message.
fn gguf_err(f: &[u8]) -> String {
    match Gguf::parse(f) {
        Err(Error::Gguf { offset, msg }) => {
            assert!(offset <= f.len() as u64, "offset {offset} past {}", f.len());
            msg
        }
        Err(other) => panic!("not a GGUF error: {other:?}"),
        Ok(_) => panic!("malformed file parsed"),
    }
}

/// `f` must fail with a message containing `needle`.
#[track_caller]
fn expect(f: &[u8], needle: &str) {
    let msg = gguf_err(f);
    assert!(msg.contains(needle), "expected {needle:?} in {msg:?}");
}

/// Applies `patch` to a copy of the base file, which must then fail with
/// `needle` in its message.
#[track_caller]
fn patched(needle: &str, patch: impl FnOnce(&mut Vec<u8>)) {
    let mut f = base();
    patch(&mut f);
    expect(&f, needle);
}

#[test]
fn base_is_valid() {
    let f = base();
    let g = Gguf::parse(&f).unwrap();
    assert_eq!(g.tensors().len(), 3);
    // Version 2 has the same layout and is accepted.
    let mut v2 = f.clone();
    set_u32(&mut v2, 4, 2);
    assert_eq!(Gguf::parse(&v2).unwrap().version(), 2);
}

#[test]
fn truncated_at_every_header_byte_and_in_the_data() {
    let f = base();
    let g = Gguf::parse(&f).unwrap();
    let data_end = g
        .tensors()
        .iter()
        .map(|t| g.tensor_range(t).end)
        .max()
        .unwrap();
    for len in 0..g.data_offset() {
        gguf_err(&f[..len]);
    }
    for len in (g.data_offset()..data_end).step_by(3) {
        let msg = gguf_err(&f[..len]);
        assert!(
            msg.contains("runs past the end of the file"),
            "{len}: {msg}"
        );
    }
    // The trailing padding of the last tensor is optional.
    assert!(Gguf::parse(&f[..data_end]).is_ok());
}

#[test]
fn magic_and_version() {
    expect(b"", "magic");
    expect(b"GGU", "magic");
    expect(b"GGUF\x03\x00", "version");
    patched("bad magic", |f| f[3] = b'X');
    patched("bad magic", |f| f[..4].copy_from_slice(b"FUGG"));
    patched("version 1 is not supported", |f| set_u32(f, 4, 1));
    patched("unsupported GGUF version 4", |f| set_u32(f, 4, 4));
    patched("unsupported GGUF version 0", |f| set_u32(f, 4, 0));
    patched("big-endian", |f| f[4..8].copy_from_slice(&[0, 0, 0, 3]));
}

#[test]
fn absurd_counts() {
    for n in [u64::MAX, 1 << 40, 1 << 20] {
        patched("tensor count", |f| set_u64(f, 8, n));
        patched("metadata entry count", |f| set_u64(f, 16, n));
    }
    // Plausible but wrong counts read the wrong bytes and fail somewhere.
    let f = base();
    let (n_tensors, n_kv) = (get_u64(&f, 8), get_u64(&f, 16));
    for n in [n_kv - 1, n_kv + 1, n_kv + 2] {
        let mut f = f.clone();
        set_u64(&mut f, 16, n);
        gguf_err(&f);
    }
    for n in [n_tensors + 1, n_tensors + 2] {
        let mut f = f.clone();
        set_u64(&mut f, 8, n);
        gguf_err(&f);
    }
}

#[test]
fn absurd_string_and_array_lengths() {
    for n in [u64::MAX, 1 << 40, (1 << 24) + 1] {
        patched("string length", |f| {
            let at = value_at(f, "general.name");
            set_u64(f, at, n)
        });
        patched("string length", |f| {
            let at = after(f, "t.k1") - "t.k1".len() - 8;
            set_u64(f, at, n)
        });
        patched("string length", |f| {
            let at = after(f, T_B) - T_B.len() - 8;
            set_u64(f, at, n)
        });
        patched("array length", |f| {
            let at = value_at(f, "t.arr") + 4;
            set_u64(f, at, n)
        });
        patched("array length", |f| {
            let at = value_at(f, "t.strs") + 4;
            set_u64(f, at, n)
        });
        patched("array length", |f| {
            let at = value_at(f, "t.nested") + 4;
            set_u64(f, at, n)
        });
        patched("array length", |f| {
            let at = value_at(f, "t.nested") + 12 + 4;
            set_u64(f, at, n)
        });
    }
    // One more string element than the bytes hold.
    patched("", |f| {
        let at = value_at(f, "t.strs") + 4;
        set_u64(f, at, 3)
    });
}

#[test]
fn bad_values() {
    patched("unknown value type 13", |f| {
        let at = after(f, "t.k1");
        set_u32(f, at, 13)
    });
    patched("unknown value type 4294967295", |f| {
        let at = after(f, "t.k1");
        set_u32(f, at, u32::MAX)
    });
    patched("unknown array element type 99", |f| {
        let at = value_at(f, "t.arr");
        set_u32(f, at, 99)
    });
    patched("not 0 or 1", |f| {
        let at = value_at(f, "t.flag");
        f[at] = 2
    });
    patched("not valid UTF-8", |f| {
        let at = value_at(f, "general.name") + 8;
        f[at] = 0xff
    });
    patched("not valid UTF-8", |f| {
        let at = after(f, T_A) - 1;
        f[at] = 0xc3
    });
    patched("duplicate metadata key 't.k1'", |f| {
        let at = after(f, "t.k2") - 1;
        f[at] = b'1'
    });
}

#[test]
fn too_deeply_nested_arrays() {
    let mut f = b"GGUF".to_vec();
    f.extend_from_slice(&3u32.to_le_bytes());
    f.extend_from_slice(&0u64.to_le_bytes());
    f.extend_from_slice(&1u64.to_le_bytes());
    f.extend_from_slice(&4u64.to_le_bytes());
    f.extend_from_slice(b"deep");
    f.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..100 {
        f.extend_from_slice(&9u32.to_le_bytes());
        f.extend_from_slice(&1u64.to_le_bytes());
    }
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&0u64.to_le_bytes());
    expect(&f, "nested more than 8");
}

#[test]
fn bad_alignment() {
    patched("non-zero power of two", |f| {
        let at = value_at(f, "general.alignment");
        set_u32(f, at, 0)
    });
    patched("non-zero power of two", |f| {
        let at = value_at(f, "general.alignment");
        set_u32(f, at, 3)
    });
    patched("general.alignment must be a u32, not i32", |f| {
        let at = after(f, "general.alignment");
        set_u32(f, at, 5)
    });
    // A larger valid alignment makes the existing offsets misaligned.
    patched("not a multiple of the alignment 64", |f| {
        let at = value_at(f, "general.alignment");
        set_u32(f, at, 64)
    });
}

#[test]
fn bad_tensor_infos() {
    patched("unknown ggml type id 4", |f| {
        let at = tensor_fields(f, T_B).2;
        set_u32(f, at, 4)
    });
    patched("unknown ggml type id 99", |f| {
        let at = tensor_fields(f, T_B).2;
        set_u32(f, at, 99)
    });
    patched("has 0 dimensions", |f| {
        let at = tensor_fields(f, T_A).0;
        set_u32(f, at, 0)
    });
    patched("has 5 dimensions", |f| {
        let at = tensor_fields(f, T_A).0;
        set_u32(f, at, 5)
    });
    patched("dimension 0 is 0", |f| {
        let at = tensor_fields(f, T_A).1;
        set_u64(f, at, 0)
    });
    patched("dimension 1 is 0", |f| {
        let at = tensor_fields(f, T_C).1 + 8;
        set_u64(f, at, 0)
    });
    patched("element count overflows", |f| {
        let d = tensor_fields(f, T_C).1;
        set_u64(f, d, 1 << 33);
        set_u64(f, d + 8, 1 << 33);
    });
    patched("element count overflows", |f| {
        let at = tensor_fields(f, T_A).1;
        set_u64(f, at, u64::MAX)
    });
    patched("byte size overflows", |f| {
        let at = tensor_fields(f, T_A).1;
        set_u64(f, at, 1 << 62)
    });
    patched("runs past the end of the file", |f| {
        let at = tensor_fields(f, T_A).1;
        set_u64(f, at, 1 << 40)
    });
    patched("not a multiple of the block size", |f| {
        let d = tensor_fields(f, T_B).1;
        set_u64(f, d, 16);
        set_u64(f, d + 8, 4);
    });
    patched("duplicate tensor name 'tensor.alpha'", |f| {
        let at = after(f, T_C) - 5;
        f[at..at + 5].copy_from_slice(b"alpha")
    });
}

#[test]
fn bad_tensor_offsets() {
    let f = base();
    let len = f.len() as u64;
    patched("runs past the end of the file", |f| {
        let at = tensor_fields(f, T_C).3;
        set_u64(f, at, len.next_multiple_of(32))
    });
    patched("runs past the end of the file", |f| {
        let at = tensor_fields(f, T_C).3;
        set_u64(f, at, !31)
    });
    patched("not a multiple of the alignment 32", |f| {
        let at = tensor_fields(f, T_B).3;
        let off = get_u64(f, at);
        set_u64(f, at, off + 1)
    });
    patched("overlaps tensor", |f| {
        let at = tensor_fields(f, T_B).3;
        set_u64(f, at, 0)
    });
    patched("overlaps tensor", |f| {
        let b = get_u64(f, tensor_fields(f, T_B).3);
        {
            let at = tensor_fields(f, T_C).3;
            set_u64(f, at, b)
        }
    });
    // B's data is 36 bytes: C 32 bytes after B's start overlaps its tail.
    patched("overlaps tensor 'tensor.bravo'", |f| {
        let b = get_u64(f, tensor_fields(f, T_B).3);
        {
            let at = tensor_fields(f, T_C).3;
            set_u64(f, at, b + 32)
        }
    });
}

/// Cheap in-test fuzzing: random byte and field mutations of the header
/// region must never panic.
#[test]
fn random_mutations_never_panic() {
    let base = base();
    let header_len = Gguf::parse(&base).unwrap().data_offset();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut errors = 0;
    for _ in 0..4000 {
        let mut f = base.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % header_len;
            if at >= f.len() {
                continue;
            }
            match next() % 4 {
                0 => f[at] = next() as u8,
                1 => f[at] ^= 1 << (next() % 8),
                2 if at + 8 <= f.len() => {
                    set_u64(&mut f, at, [0, 1, u64::MAX, 1 << 40][next() as usize % 4])
                }
                _ => f.truncate(at.max(1)),
            }
        }
        match Gguf::parse(&f) {
            Ok(_) => {}
            Err(Error::Gguf { .. }) => errors += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(errors > 1000, "{errors}");
}
