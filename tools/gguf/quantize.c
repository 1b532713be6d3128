/* Quantizes a GGUF file with llama.cpp's own quantizer (llama_model_quantize),
 * for test fixtures: make_fixtures.sh builds it against the llama.cpp
 * snapshot in ../shared/peers/llama.cpp (which ships no quantize tool).
 *
 *   gguf_quantize IN.gguf OUT.gguf FTYPE   (FTYPE: Q4_0 Q8_0 Q4_K_M Q5_K_M Q6_K) */
#include <stdio.h>
#include <string.h>

#include "llama.h"

static const struct {
  const char *name;
  enum llama_ftype ftype;
} kTypes[] = {
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
};

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s IN.gguf OUT.gguf FTYPE\n", argv[0]);
    return 2;
  }
  llama_model_quantize_params p = llama_model_quantize_default_params();
  int found = 0;
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i)
    if (strcmp(argv[3], kTypes[i].name) == 0) {
      p.ftype = kTypes[i].ftype;
      found = 1;
    }
  if (!found) {
    fprintf(stderr, "unknown FTYPE %s\n", argv[3]);
    return 2;
  }
  llama_backend_init();
  const uint32_t rc = llama_model_quantize(argv[1], argv[2], &p);
  llama_backend_free();
  return rc == 0 ? 0 : 1;
}
