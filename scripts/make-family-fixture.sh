#!/usr/bin/env bash
# Writes llama.cpp's logits for the synthetic `tiny` model of each llama-like
# architecture (tests/data/llamacpp/families/ARCH.f32) and of each weight
# type (SHAPE.TYPE.f32), which tests/families.rs compares wginfer's with.
# Needs llama.cpp built by
# scripts/llama-cpp-cpu.sh; run once, when the fixture's models change.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=.llama-cpp/llama_cpp_python-0.3.36/vendor/llama.cpp
[ -d .llama-cpp/build/bin ] || bash scripts/llama-cpp-cpu.sh
cc -O2 -I"$SRC/include" -I"$SRC/ggml/include" scripts/llama-cpp-logits.c \
    -L.llama-cpp/build/bin -lllama -o .llama-cpp/logits
cargo build --release --example synthetic
OUT=tests/data/llamacpp/families
mkdir -p "$OUT"
# The token ids tests/families.rs evaluates (TOKENS there).
TOKENS="5 17 200 42 99 13 250 7 64 128 3 77 180 21 9 111 45 66 233 2 150 88 31 290"
# tiny@ARCH is written to ARCH.f32, SHAPE:TYPE to SHAPE.TYPE.f32.
for preset in tiny@llama tiny@llama3 tiny@qwen2 tiny@qwen3 tiny@smollm3 tiny@phi3 tiny@mistral3 tiny@granite tiny@gemma2 tiny@gemma tiny@ernie4_5 tiny@exaone tiny@mixtral tiny@qwen3moe tiny@granitemoe tiny@olmoe tiny@qwen2moe tiny@olmo2 tiny@olmo3 tiny@glm4 tiny@exaone4 tiny@exaone4-swa tiny@hunyuan-dense tiny@cohere2 tiny@starcoder2 tiny@stablelm tiny@minicpm tiny@arcee tiny@qwen2vl \
    tiny:q5_0 tiny:iq4_nl tiny-k:q2_K tiny-k:q3_K tiny-k:q4_K tiny-k:q5_K tiny-k:q6_K tiny-k:iq4_xs tiny-k@qwen3moe:q4_K; do
    name="${preset#tiny@}"
    name="${name/:/.}"
    model="$(mktemp --suffix=.gguf)"
    target/release/examples/synthetic "$preset" "$model" --seed 1
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=.llama-cpp/build/bin .llama-cpp/logits "$model" "$OUT/$name.f32" $TOKENS
    rm -f "$model"
done
echo "wrote $OUT"
