// FP8 checkpoints (issue P1 "quantized weights"): Hugging Face models whose
// Linear weights are stored as F8_E4M3 with a scale tensor beside each, in
// the two common layouts:
//   - "fp8" (Qwen's and DeepSeek's *-FP8 releases): NAME_scale_inv, one f32
//     per block of the weight (128 x 128), value = fp8 * scale;
//   - "compressed-tensors" float-quantized (llm-compressor's FP8 models):
//     NAME_scale per tensor ([] or [1]), per output channel ([N] or [N, 1])
//     or per group of inputs ([N, K / G]), value = fp8 * scale.
// They are dequantized to bf16 when the checkpoint is opened, so every
// backend reads them as it reads a bf16 checkpoint; where the scales repeat
// over whole groups of 128 inputs, the codes and a scale per 128 values of a
// row stay beside the bf16 values (TensorView::fp8), for the CUDA backend's
// FP8 GEMV. Activation scales (NAME.input_scale) are dropped (both backends
// compute in bf16/f32).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace vegas {

// OCP FP8 E4M3 (no infinities; S.1111.111 is NaN) as a float, exactly.
float fp8_e4m3_to_f32(uint8_t bits);

// Replaces every F8_E4M3 tensor of `tensors` by its bf16 dequantization
// (buffers appended to `owners`) and removes the scale and input-scale
// tensors it used. FORMAT (naming `source` and the tensor) for an F8 tensor
// that is not a 2-D weight, has no scale, or whose scale's shape fits no
// layout above.
void dequantize_fp8_weights(std::map<std::string, TensorView> &tensors,
                            std::vector<std::shared_ptr<const void>> &owners,
                            const std::string &source);

}  // namespace vegas
