#!/usr/bin/env python3
"""Writes tests/data/dequant/: blocks of every quantized type wginfer reads
and their values as the `gguf` Python package (llama.cpp's gguf-py,
`gguf.quants.dequantize`) decodes them. tests/quant.rs checks that
wginfer's dequantization gives the same f32 values, bit for bit.

Usage: python3 scripts/make-dequant-fixture.py   (needs `pip install gguf numpy`)

The blocks are random bytes (a fixed seed) with their f16 scale fields set
to finite values, so every code, scale and sign pattern occurs.
"""
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

# Type name -> (ggml type, block bytes, byte offsets of its f16 fields).
TYPES = {
    "q4_0": (T.Q4_0, 18, [0]),
    "q4_1": (T.Q4_1, 20, [0, 2]),
    "q5_0": (T.Q5_0, 22, [0]),
    "q5_1": (T.Q5_1, 24, [0, 2]),
    "q8_0": (T.Q8_0, 34, [0]),
    "q4_K": (T.Q4_K, 144, [0, 2]),
    "q5_K": (T.Q5_K, 176, [0, 2]),
    "q6_K": (T.Q6_K, 210, [208]),
    # Last, so that the types above draw the same bytes as before they came.
    "q2_K": (T.Q2_K, 84, [80, 82]),
    "q3_K": (T.Q3_K, 110, [108]),
    # Later still, for the same reason.
    "iq4_nl": (T.IQ4_NL, 18, [0]),
    "iq4_xs": (T.IQ4_XS, 136, [0]),
}
BLOCKS = 8


def main() -> None:
    out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "dequant"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261204)
    for name, (qtype, size, halves) in TYPES.items():
        raw = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
        for at in halves:
            scales = rng.uniform(-2.0, 2.0, size=BLOCKS).astype(np.float16)
            raw[:, at : at + 2] = scales.view(np.uint8).reshape(BLOCKS, 2)
        values = dequantize(raw.reshape(-1), qtype).astype("<f4").reshape(-1)
        (out / f"{name}.blocks").write_bytes(raw.tobytes())
        (out / f"{name}.f32").write_bytes(values.tobytes())
        print(f"{name}: {BLOCKS} blocks, {values.size} values")


if __name__ == "__main__":
    main()
