// `vegas quantize --type fp8`: a Hugging Face model directory written as an
// FP8 one, in the layout of Qwen's and DeepSeek's *-FP8 releases (which
// fp8_weights.h loads, and which the CUDA backend keeps in FP8): each layer's
// projection matrices as F8_E4M3 codes with a NAME_scale_inv per 128 x 128
// block (the block's max |w| / 448, codes rounded to nearest even), every
// other tensor as stored; config.json with quantization_config
// {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
// "activation_scheme": "dynamic"}; the tokenizer files copied.
#pragma once

#include <cstdint>
#include <string>

namespace vegas {

// The e4m3 code nearest x (ties to even), saturated at +-448; NaN's code for NaN.
uint8_t f32_to_fp8_e4m3(float x);

// Writes model_dir's checkpoint to out_dir, which must not exist or be empty
// (it is created). IO for an unreadable model or an unwritable or non-empty
// out_dir, FORMAT for a bad checkpoint; a failed write removes what it wrote.
void export_fp8(const std::string &model_dir, const std::string &out_dir);

}  // namespace vegas
