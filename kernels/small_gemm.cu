#include "small_gemm.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kOutPerWarp = 2;  // output columns per warp
constexpr size_t kMaxSmem = sizeof(bf16) * kSmallGemmMaxRows * kSmallGemmMaxK;

__device__ __forceinline__ float dot8(const float *a, const float *b) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) s = fmaf(a[e], b[e], s);
  return s;
}

// R weight rows per warp: kOutPerWarp, or 2 * kOutPerWarp for SwiGLU (gate and
// up of each output column).
template <int R>
__global__ void __launch_bounds__(kThreads) small_gemm_kernel(SmallGemmParams p) {
  pdl_enter();
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *xs = reinterpret_cast<bf16 *>(smem);  // [m][k]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k = p.k, m_rows = p.m;

  // Stage the input rows, normalised when they come from the f32 residual.
  if (p.x_f32 != nullptr) {
    for (int m = warp; m < m_rows; m += kWarps) {
      const int64_t xr = p.x_row_index != nullptr ? p.x_row_index[m] : m;
      const float4 *x = reinterpret_cast<const float4 *>(p.x_f32 + xr * k);
      float ss = 0.0f;
      for (int i = lane; i < k / 4; i += 32) {
        const float4 v = x[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      const float inv = rsqrtf(warp_sum(ss) / k + p.eps);
      for (int i = lane; i < k / 4; i += 32) {
        const float4 v = x[i];
        const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          xs[m * k + 4 * i + e] =
              __float2bfloat16(f[e] * inv * __bfloat162float(p.norm_weight[4 * i + e]));
      }
    }
  } else {
    const uint4 *src = reinterpret_cast<const uint4 *>(p.x_bf16);
    uint4 *dst = reinterpret_cast<uint4 *>(xs);
    for (int i = threadIdx.x; i < m_rows * k / 8; i += kThreads) dst[i] = src[i];
  }
  __syncthreads();

  const int out0 = (blockIdx.x * kWarps + warp) * kOutPerWarp;
  if (out0 >= p.n) return;
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const bf16 *rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    // SwiGLU: r = 2c is the gate row of column out0 + c, r = 2c + 1 its up row.
    const int col = swiglu ? out0 + r / 2 : out0 + r;
    const int wrow = swiglu ? (r % 2 ? p.n + col : col) : col;
    rows[r] = col < p.n ? p.w + static_cast<int64_t>(wrow) * k : nullptr;
  }
  float acc[R][kSmallGemmMaxRows];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < kSmallGemmMaxRows; ++m) acc[r][m] = 0.0f;

  for (int k0 = lane * 8; k0 < k; k0 += 32 * 8) {
    float wf[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (rows[r] != nullptr)
        unpack8(*reinterpret_cast<const uint4 *>(rows[r] + k0), wf[r]);
      else
#pragma unroll
        for (int e = 0; e < 8; ++e) wf[r][e] = 0.0f;
    }
#pragma unroll
    for (int m = 0; m < kSmallGemmMaxRows; ++m) {
      if (m >= m_rows) break;
      float xf[8];
      unpack8(*reinterpret_cast<const uint4 *>(xs + m * k + k0), xf);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][m] += dot8(wf[r], xf);
    }
  }

#pragma unroll
  for (int m = 0; m < kSmallGemmMaxRows; ++m) {
    if (m >= m_rows) break;
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][m] = warp_sum(acc[r][m]);
  }
  // Lane c writes output column out0 + c of every row.
  if (lane >= kOutPerWarp) return;
  const int col = out0 + lane;
  if (col >= p.n) return;
#pragma unroll
  for (int m = 0; m < kSmallGemmMaxRows; ++m) {
    if (m >= m_rows) break;
    const int64_t at = static_cast<int64_t>(m) * p.n + col;
    if (swiglu) {
      float g = 0.0f, u = 0.0f;
#pragma unroll
      for (int c = 0; c < kOutPerWarp; ++c)
        if (c == lane) {
          g = acc[2 * c % R][m];
          u = acc[(2 * c + 1) % R][m];
        }
      small_gemm_store_swiglu(p, at, g, u);
    } else {
      float v = 0.0f;
#pragma unroll
      for (int c = 0; c < kOutPerWarp; ++c)
        if (c == lane) v = acc[c % R][m];
      small_gemm_store(p, at, v);
    }
  }
}

// VEGAS_CUDA_SMALL_GEMM=fma keeps every shape on the CUDA-core kernel (A/B timing).
bool mma_enabled() {
  static const bool enabled = variant_enabled("VEGAS_CUDA_SMALL_GEMM", "fma");
  return enabled;
}

}  // namespace

bool small_gemm_supports(int32_t m, int32_t k) {
  const bool mma = k <= kSmallGemmMmaMaxK && mma_enabled();
  return m >= 1 && m <= (mma ? kSmallGemmMmaMaxRows : kSmallGemmMaxRows) && k >= 8 && k % 8 == 0 &&
         k <= kSmallGemmMaxK;
}

cudaError_t small_gemm(const SmallGemmParams &p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return cudaSuccess;
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const bool f32_out = p.epilogue == SmallGemmParams::Epilogue::kAddF32 ||
                       p.epilogue == SmallGemmParams::Epilogue::kStoreF32;
  if (!small_gemm_supports(p.m, p.k) || p.n < 0 || p.w == nullptr ||
      (p.x_f32 == nullptr) == (p.x_bf16 == nullptr) ||
      (p.x_f32 != nullptr && p.norm_weight == nullptr) ||
      (p.x_row_index != nullptr && p.x_f32 == nullptr) ||
      (f32_out ? p.y_f32 == nullptr : p.y_bf16 == nullptr))
    return cudaErrorInvalidValue;
  if (p.k <= kSmallGemmMmaMaxK && mma_enabled()) return small_gemm_mma(p, stream);
  const size_t smem = sizeof(bf16) * static_cast<size_t>(p.m) * p.k;
  const int per_block = kWarps * kOutPerWarp;
  const unsigned blocks = static_cast<unsigned>((p.n + per_block - 1) / per_block);
  return swiglu
             ? launch_kernel(small_gemm_kernel<2 * kOutPerWarp>, blocks, kThreads, smem, stream, p)
             : launch_kernel(small_gemm_kernel<kOutPerWarp>, blocks, kThreads, smem, stream, p);
}

cudaError_t small_gemm_init() {
  cudaError_t e = small_gemm_mma_init();
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(small_gemm_kernel<kOutPerWarp>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxSmem));
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(small_gemm_kernel<2 * kOutPerWarp>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kMaxSmem));
}

}  // namespace vegas::kernels
