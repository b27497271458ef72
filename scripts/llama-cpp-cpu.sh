#!/usr/bin/env bash
# Builds llama.cpp's llama-bench for this machine's CPU (a native build, as
# llama.cpp's own instructions build it), so that the CPU backend's speed
# can be compared with llama.cpp's in one run on the same machine:
#
#   scripts/llama-cpp-cpu.sh            # builds into .llama-cpp/ (git-ignored)
#   .llama-cpp/bench -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -p 64 -n 32
#
# The source is the llama.cpp that llama-cpp-python 0.3.36 vendors (its
# sdist on PyPI, checked by sha256), since PyPI is reachable where GitHub
# may not be. Needs a C/C++ compiler; cmake and ninja come from pip when
# they are missing. Takes about ten minutes on two cores.
set -euo pipefail

VERSION="0.3.36"
SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$ROOT/.llama-cpp"
say() { echo "llama-cpp-cpu: $*" >&2; }

mkdir -p "$WORK"
TARBALL="$WORK/llama_cpp_python-$VERSION.tar.gz"
if ! { [ -f "$TARBALL" ] && echo "$SHA256  $TARBALL" | sha256sum --check --status; }; then
    say "downloading llama-cpp-python $VERSION's source from PyPI"
    # The file's address from PyPI's simple index (PEP 503).
    URL=$(curl -fsSL "https://pypi.org/simple/llama-cpp-python/" |
        grep -o "https://[^\"#]*/llama_cpp_python-$VERSION.tar.gz" | head -n 1)
    curl -fsSL -o "$TARBALL" "$URL"
    echo "$SHA256  $TARBALL" | sha256sum --check --status || {
        say "checksum mismatch for $TARBALL"
        exit 1
    }
fi
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -d "$SRC" ] || tar -xzf "$TARBALL" -C "$WORK"
command -v cmake >/dev/null && command -v ninja >/dev/null || python3 -m pip install --quiet cmake ninja
# AMX stays off: containers and VMs may list AMX and still fault on its
# tile instructions (llama.cpp then dies with SIGILL in its AMX mul_mat);
# -march=native would turn it on whatever GGML_AMX_* say.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
cmake --build "$WORK/build" --target llama-bench -j "$(nproc)"
cat >"$WORK/bench" <<WRAP
#!/usr/bin/env bash
LD_LIBRARY_PATH="$WORK/build/bin" exec "$WORK/build/bin/llama-bench" "\$@"
WRAP
chmod +x "$WORK/bench"
say "built: $WORK/bench (llama-bench)"
