#!/usr/bin/env bash
# Two builds' speed on one GPU as one command, for a machine with no Rust
# toolchain: release binaries of each build, made elsewhere, are passed in.
#
#   cargo build --release --example bench --example backend_ops --example synthetic
#   mkdir -p after && cp target/release/examples/{bench,backend_ops,synthetic} after/ && strip after/*
#   (the same from the build to compare against into before/)
#   bash scripts/compare-builds.sh before after OUT_DIR
#
# Writes the synthetic shapes' files once, then per shape runs the two
# builds' `bench -p P -n N -r 2` alternating, ROUNDS rounds, and prints one
# line per run (pp, tg and pipelined gen tok/s, dispatches per token); then
# one run of each with the GPU timer (WGINFER_GPU_TIMER=1: the GPU's busy
# time and first-to-last span per decoded token, beside the host's), the
# cooperative prompt product in `backend_ops --mode perf` and the after
# build's `backend_ops --mode test --op mul_mat`. Every JSON result and
# log is also written to OUT_DIR. SHAPES, P, N and ROUNDS override the
# defaults (the three shapes of ../shared/refs/h200.md, 512, 128, 2).
set -euo pipefail
BEFORE="${1:?usage: compare-builds.sh BEFORE_DIR AFTER_DIR [OUT_DIR]}"
AFTER="${2:?usage: compare-builds.sh BEFORE_DIR AFTER_DIR [OUT_DIR]}"
OUT="${3:-compare-out}"
ROUNDS="${ROUNDS:-2}"
. "$(dirname "$0")/bench-common.sh"
write_shapes "$BEFORE" "$OUT"

for shape in $SHAPES; do
    echo "== $shape: pp$P tg$N gen$N tok/s, dispatches per token"
    for round in $(seq 1 "$ROUNDS"); do
        for build in "$BEFORE" "$AFTER"; do
            json="$OUT/$shape-$(basename "$build")-$round.json"
            "$build/bench" --backend wgpu -m "$OUT/$shape.gguf" -p "$P" -n "$N" -r 2 --json > "$json"
            echo "$(basename "$build") pp $(field pp_tok_s "$json") tg $(field tg_tok_s "$json")" \
                "gen $(field gen_tok_s "$json") dispatches $(field dispatches_per_token "$json")"
        done
    done
    echo "-- GPU timer: per decoded token, us"
    for build in "$BEFORE" "$AFTER"; do
        json="$OUT/$shape-$(basename "$build")-timed.json"
        WGINFER_GPU_TIMER=1 "$build/bench" --backend wgpu -m "$OUT/$shape.gguf" -p 0 -n "$N" -r 2 \
            --json > "$json"
        echo "$(basename "$build") tg $(field tg_tok_s "$json")" \
            "gpu $(grep -oE '"decode_gpu_us": (null|\{[^}]*\})' "$json")" \
            "host $(grep -oE '"decode_host_us": \{[^}]*\}' "$json")"
    done
done

echo "== backend_ops --mode perf --op mul_mat --name n=$P"
for build in "$BEFORE" "$AFTER"; do
    echo "-- $(basename "$build")"
    "$build/backend_ops" --mode perf --op mul_mat --name "n=$P" 2>&1 |
        tee "$OUT/mm-perf-$(basename "$build").txt" | grep -E " x[0-9]+: "
done

echo "== backend_ops --mode test --op mul_mat ($(basename "$AFTER"))"
"$AFTER/backend_ops" --mode test --op mul_mat > "$OUT/mm-test.txt" 2>&1 || true
tail -n 1 "$OUT/mm-test.txt"
grep -E "FAIL" "$OUT/mm-test.txt" | head -n 20 || true
