#!/usr/bin/env bash
# Checks that the library compiles for the platforms wginfer supports beyond
# this machine: Windows (DX12 and Vulkan), macOS on Apple silicon (Metal) and
# the web (wasm32 with wgpu's WebGPU backend). `cargo check` needs only the
# target's standard library, which rustup adds when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

check() {
    local target="$1"; shift
    if ! rustup target list --installed | grep -qx "$target"; then
        echo "check-targets: adding $target" >&2
        rustup target add "$target"
    fi
    echo "check-targets: cargo check --lib --target $target $*" >&2
    cargo check --quiet --lib --target "$target" "$@"
}

check x86_64-pc-windows-msvc
check aarch64-apple-darwin
check wasm32-unknown-unknown --features webgpu
echo "check-targets: all targets compile" >&2
