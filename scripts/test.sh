#!/usr/bin/env bash
# The project's test command: what CI runs (.ci/run) on a fresh machine.
# Installs what the tests need (lavapipe when no Vulkan driver is present,
# the default model when missing), then checks formatting, lints, docs, the
# other platforms' builds and the tests. GPU tests fail here, rather than
# skip, when no adapter opens (WGINFER_REQUIRE_ADAPTER).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-vulkan.sh
bash scripts/fetch-model.sh
# One build from scratch gains nothing from incremental caches (~1 GB).
export CARGO_INCREMENTAL=0
export NODEVICE_SELECT=1 XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" WGINFER_REQUIRE_ADAPTER=1
cargo fmt --check
cargo clippy --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
bash scripts/check-targets.sh
cargo test
# The default model's decode again with a GPU's defaults where lavapipe, a
# CPU-type adapter, has its own: folds, a submission every 64 dispatches,
# 128 x 128 tiles from 128 of them and mat-vecs of uncast activations.
WGINFER_FOLD_ACTIVATIONS=1 WGINFER_SUBMIT_EVERY=64 WGINFER_TILE_WIDE_FROM=128 \
    WGINFER_MATVEC_CAST_FROM=18446744073709551615 \
    cargo test --test model -- greedy_matches_llama_cpp_on_wgpu pipelined reused_plans
