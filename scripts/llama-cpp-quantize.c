// Requantizes a GGUF model with llama.cpp's quantizer, so that a type no
// published file here comes in (IQ4_XS, IQ4_NL, Q2_K, Q3_K) can be compared
// with llama.cpp on real weights:
//
//   cc -O2 -I$SRC/include -I$SRC/ggml/include scripts/llama-cpp-quantize.c \
//      -L.llama-cpp/build/bin -lllama -o .llama-cpp/quantize
//   .llama-cpp/quantize IN.gguf OUT.gguf FTYPE
//
// FTYPE is llama.cpp's llama_ftype number (25 IQ4_NL, 30 IQ4_XS, 10 Q2_K,
// 12 Q3_K_M). Quantized inputs are requantized (allow_requantize), as
// llama-quantize --allow-requantize does.
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IN OUT FTYPE\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    struct llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = (enum llama_ftype)atoi(argv[3]);
    p.allow_requantize = true;
    p.nthread = 2;
    uint32_t rc = llama_model_quantize(argv[1], argv[2], &p);
    llama_backend_free();
    return rc == 0 ? 0 : 1;
}
