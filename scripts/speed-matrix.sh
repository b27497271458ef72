#!/usr/bin/env bash
# One build's speed on one GPU with each prompt path, as one command for a
# machine with no Rust toolchain (release binaries made elsewhere):
#
#   cargo build --release --example bench --example backend_ops --example synthetic
#   mkdir -p build && cp target/release/examples/{bench,backend_ops,synthetic} build/ && strip build/*
#   bash scripts/speed-matrix.sh build OUT_DIR
#
# Per synthetic shape, `bench -p P -n N -r 2` with cooperative matrices on
# and off (WGINFER_COOP) and flash attention auto and off (--flash-attn),
# one line each (pp, tg and pipelined gen tok/s, dispatches per token);
# then the prompt products in `backend_ops --mode perf` (n = P) with
# cooperative matrices on and off, and `backend_ops --mode test --op
# mul_mat` with them on. Every JSON result and log is also written to
# OUT_DIR. SHAPES, P and N override the defaults (the three shapes of
# ../shared/refs/h200.md, 512, 128).
set -euo pipefail
BUILD="${1:?usage: speed-matrix.sh BUILD_DIR [OUT_DIR]}"
OUT="${2:-speed-matrix-out}"
. "$(dirname "$0")/bench-common.sh"
write_shapes "$BUILD" "$OUT"

for shape in $SHAPES; do
    echo "== $shape: pp$P tg$N gen$N tok/s, dispatches per token"
    for coop in 1 0; do
        for fa in auto off; do
            json="$OUT/$shape-coop$coop-fa$fa.json"
            WGINFER_COOP=$coop "$BUILD/bench" --backend wgpu -m "$OUT/$shape.gguf" \
                --flash-attn "$fa" -p "$P" -n "$N" -r 2 --json > "$json"
            echo "coop $coop fa $fa: pp $(field pp_tok_s "$json") tg $(field tg_tok_s "$json")" \
                "gen $(field gen_tok_s "$json") dispatches $(field dispatches_per_token "$json")"
        done
    done
done

for coop in 1 0; do
    echo "== backend_ops --mode perf --op mul_mat --name n=$P, WGINFER_COOP=$coop"
    WGINFER_COOP=$coop "$BUILD/backend_ops" --mode perf --op mul_mat --name "n=$P" 2>&1 |
        tee "$OUT/mm-perf-coop$coop.txt" | grep -E " x[0-9]+: " || true
done

echo "== backend_ops --mode test --op mul_mat (cooperative matrices where the adapter has them)"
"$BUILD/backend_ops" --mode test --op mul_mat > "$OUT/mm-test.txt" 2>&1 || true
tail -n 1 "$OUT/mm-test.txt"
grep -E "FAIL" "$OUT/mm-test.txt" | head -n 20 || true
