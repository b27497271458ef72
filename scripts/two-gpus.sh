#!/usr/bin/env bash
# The two-GPU measurement (issue 15) as one command, for a machine with two
# GPUs and no Rust toolchain: release binaries built elsewhere are passed in.
#
#   cargo build --release --example adapters --example bench --example generate
#   mkdir -p bin && cp target/release/examples/{adapters,bench,generate} bin/ && strip bin/*
#   bash scripts/two-gpus.sh bin OUT_DIR
#
# Prints the adapters, then bench of the 8B-class shape on one device and on
# two in layer and row mode (--tensor-split 1,1), and checks that the
# default shape's 32 greedy tokens are the same on one device and on two in
# layer mode. Every JSON result is also written to OUT_DIR.
set -euo pipefail
BIN="${1:?usage: two-gpus.sh BIN_DIR [OUT_DIR]}"
OUT="${2:-two-gpus-out}"
mkdir -p "$OUT"

echo "== adapters"
"$BIN/adapters" | tee "$OUT/adapters.txt"

bench() {
    local name="$1"; shift
    echo "== bench 8b $name"
    "$BIN/bench" --synthetic 8b -p 512 -n 128 -r 3 --json "$@" | tee "$OUT/bench-8b-$name.json"
}
bench one --devices 0
bench layer --devices 0,1 --split-mode layer
bench row --devices 0,1 --split-mode row --tensor-split 1,1

greedy() {
    "$BIN/generate" --synthetic smollm2-135m -p "Once upon a time" -n 32 --temp 0 --json "$@"
}
echo "== greedy, default shape"
greedy --devices 0 > "$OUT/greedy-one.json"
greedy --devices 0,1 --split-mode layer > "$OUT/greedy-layer.json"
tokens() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"])' "$1"; }
one="$(tokens "$OUT/greedy-one.json")"
layer="$(tokens "$OUT/greedy-layer.json")"
echo "one device: $one"
echo "layer mode: $layer"
if [ "$one" = "$layer" ]; then
    echo "greedy: the same 32 tokens on one device and on two"
else
    echo "greedy: the tokens differ" >&2
    exit 1
fi
