// The cudnn backend's activation kernels.
//
// Note [vectorised elementwise kernels]
// Activations are memory-bound: on an H100 a 64x256x56x56 f16 relu moves 205 MB and its kernel
// takes about as long as HBM needs for that, so the kernel's job is to keep the memory system
// busy. Each thread loads `unroll` 16-byte packs (8 f16/bf16 or 4 f32 elements) before it computes
// and stores any; a block covers block_threads x unroll consecutive packs and the grid covers the
// tensor once (a grid-stride loop only guards against grids too large to launch). The memory
// system is kept busy by many resident threads rather than by several loads per thread: 1024-thread
// blocks of one pack per thread were the fastest geometry measured on an H100 (docs/benchmarks.md,
// "Kernel design measurements"). 16-byte accesses need the
// tensors to be 16-byte aligned alike: the first `head` elements (fewer than a pack) are done one
// by one to reach that alignment, as are the last `tail` ones; tensors that are aligned differently
// (views at odd offsets) take a scalar kernel. In place (dst == src, or diff_src == diff_dst) is
// safe: every element is read and then written by the one thread that owns it. Arithmetic is f32
// whatever the storage type, with the accurate CUDA math functions (tanhf, expf, expm1f), and each
// element is computed the same way on every run: the kernels are deterministic.

#include "backends/cudnn/kernels/activation.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dnnx::cudnn::kernels::activation {
namespace {

constexpr int block_threads = 1024;
constexpr int unroll = 1;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// f(x). The comparisons let NaN through, as PyTorch does.
template <Function F>
__device__ __forceinline__ float forward_value(float x, float alpha, float ceiling) {
  if constexpr (F == Function::identity) {
    return x;
  } else if constexpr (F == Function::relu) {
    return x < 0.0f ? 0.0f : x;
  } else if constexpr (F == Function::clipped_relu) {
    return x < 0.0f ? 0.0f : (x > ceiling ? ceiling : x);
  } else if constexpr (F == Function::tanh) {
    return tanhf(x);
  } else if constexpr (F == Function::sigmoid) {
    return sigmoid(x);
  } else if constexpr (F == Function::elu) {
    return x > 0.0f ? x : alpha * expm1f(x);
  } else {
    return x * sigmoid(x);
  }
}

// diff_dst * f'(x) from the forward input, with PyTorch's values at the kinks (relu' = 0 at 0,
// hardtanh' = 0 at 0 and at the ceiling, elu' = alpha at 0). Gradients that are masked select
// instead of multiplying, so an infinite diff_dst outside the mask gives 0, not NaN.
template <Function F>
__device__ __forceinline__ float backward_from_src(float x, float dy, float alpha, float ceiling) {
  if constexpr (F == Function::identity) {
    return dy;
  } else if constexpr (F == Function::relu) {
    return x > 0.0f ? dy : 0.0f;
  } else if constexpr (F == Function::clipped_relu) {
    return x > 0.0f && x < ceiling ? dy : 0.0f;
  } else if constexpr (F == Function::tanh) {
    const float t = tanhf(x);
    return dy * (1.0f - t * t);
  } else if constexpr (F == Function::sigmoid) {
    const float s = sigmoid(x);
    return dy * (s * (1.0f - s));
  } else if constexpr (F == Function::elu) {
    return x > 0.0f ? dy : dy * (alpha * expf(x));
  } else {
    const float s = sigmoid(x);
    return dy * (s * (1.0f + x * (1.0f - s)));
  }
}

// diff_dst * f'(x) from the forward output y (Note [backward from dst] in activation_desc.cpp).
template <Function F>
__device__ __forceinline__ float backward_from_dst(float y, float dy, float alpha, float ceiling) {
  static_assert(F != Function::swish, "swish has no derivative as a function of dst");
  if constexpr (F == Function::identity) {
    return dy;
  } else if constexpr (F == Function::relu) {
    return y > 0.0f ? dy : 0.0f;
  } else if constexpr (F == Function::clipped_relu) {
    return y > 0.0f && y < ceiling ? dy : 0.0f;
  } else if constexpr (F == Function::tanh) {
    return dy * (1.0f - y * y);
  } else if constexpr (F == Function::sigmoid) {
    return dy * (y * (1.0f - y));
  } else {
    return y > 0.0f ? dy : dy * (y + alpha);
  }
}

// The operation of one launch: forward, or backward from src or from dst.
enum class Mode : int { forward, from_src, from_dst };

template <Function F, Mode M>
__device__ __forceinline__ float compute(float value, float dy, float alpha, float ceiling) {
  if constexpr (M == Mode::forward) {
    return forward_value<F>(value, alpha, ceiling);
  } else if constexpr (M == Mode::from_src) {
    return backward_from_src<F>(value, dy, alpha, ceiling);
  } else {
    return backward_from_dst<F>(value, dy, alpha, ceiling);
  }
}

template <typename T>
struct alignas(16) Pack {
  static constexpr int size = 16 / static_cast<int>(sizeof(T));
  T v[size];
};

// Note [streaming accesses]
// Every byte is read once and written once, and a ResNet-sized tensor is several times L2, so the
// stores carry the evict-first hint (.cs): they do not push other data out of L2 for nothing. The
// forward's loads carry it too; the backward's loads are plain (normal priority). Evict-first lines
// are the first victims, so a kernel whose every access is evict-first never displaces the normal
// lines that earlier work (another kernel, a copy) left in L2: loop after loop it streams through
// the part of L2 those lines leave it, and its time depends on what ran before it. With .cs loads
// the backward's time moved by about 2% with what earlier work left in L2, so :dst and :src (Note
// [cudnn activation candidates]), which differ only in the buffer they read, swapped places from
// run to run; with plain loads it is the same in every L2 state and the two time alike. The
// forward's .cs loads showed no such dependence and no loss, so they stay. ld.global.nc behaves as
// .cs. Figures: docs/benchmarks.md, "Kernel design measurements".
template <typename P>
__device__ __forceinline__ P load_streaming(const P* p) {
  static_assert(sizeof(P) == sizeof(uint4));
  const uint4 raw = __ldcs(reinterpret_cast<const uint4*>(p));
  P value;
  memcpy(&value, &raw, sizeof raw);
  return value;
}
template <typename P>
__device__ __forceinline__ P load_normal(const P* p) {
  static_assert(sizeof(P) == sizeof(uint4));
  const uint4 raw = __ldca(reinterpret_cast<const uint4*>(p));  // ld.global.ca: the default
  P value;
  memcpy(&value, &raw, sizeof raw);
  return value;
}
template <typename P>
__device__ __forceinline__ void store_streaming(P* p, const P& value) {
  uint4 raw;
  memcpy(&raw, &value, sizeof raw);
  __stcs(reinterpret_cast<uint4*>(p), raw);
}

// Note [vectorised elementwise kernels]. `in` is src (forward) or the saved tensor (backward),
// `dy` diff_dst (backward only, else null), `out` dst or diff_src. Elements [0, head) and
// [head + packs * size, count) are done one by one by the first threads of block 0.
template <typename T, Function F, Mode M>
__global__ void __launch_bounds__(block_threads)
    vector_kernel(const T* in, const T* dy, T* out, std::int64_t head, std::int64_t packs,
                  std::int64_t count, float alpha, float ceiling) {
  using P = Pack<T>;
  const P* in_packs = reinterpret_cast<const P*>(in + head);
  const P* dy_packs = M == Mode::forward ? nullptr : reinterpret_cast<const P*>(dy + head);
  P* out_packs = reinterpret_cast<P*>(out + head);
  constexpr std::int64_t per_block = std::int64_t{block_threads} * unroll;
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * per_block + threadIdx.x;
       base < packs; base += static_cast<std::int64_t>(gridDim.x) * per_block) {
    P values[unroll];
    P grads[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const std::int64_t i = base + static_cast<std::int64_t>(u) * block_threads;
      if (i < packs) {
        if constexpr (M == Mode::forward) {
          values[u] = load_streaming(in_packs + i);
        } else {  // Note [streaming accesses]
          values[u] = load_normal(in_packs + i);
          grads[u] = load_normal(dy_packs + i);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const std::int64_t i = base + static_cast<std::int64_t>(u) * block_threads;
      if (i < packs) {
        P result;
#pragma unroll
        for (int k = 0; k < P::size; ++k) {
          const float g = M == Mode::forward ? 0.0f : to_float(grads[u].v[k]);
          result.v[k] = from_float<T>(compute<F, M>(to_float(values[u].v[k]), g, alpha, ceiling));
        }
        store_streaming(out_packs + i, result);
      }
    }
  }
  if (blockIdx.x == 0) {
    // head < P::size and count - tail < P::size, both at most block_threads.
    const std::int64_t t = threadIdx.x;
    const std::int64_t tail = head + packs * P::size;
    const std::int64_t edges[2] = {t < head ? t : count, tail + t};
    for (const std::int64_t i : edges) {
      if (i < count) {
        const float g = M == Mode::forward ? 0.0f : to_float(dy[i]);
        out[i] = from_float<T>(compute<F, M>(to_float(in[i]), g, alpha, ceiling));
      }
    }
  }
}

// One element at a time, for tensors whose alignments differ (Note [vectorised elementwise
// kernels]): a grid-stride loop.
template <typename T, Function F, Mode M>
__global__ void __launch_bounds__(block_threads)
    scalar_kernel(const T* in, const T* dy, T* out, std::int64_t count, float alpha,
                  float ceiling) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    const float g = M == Mode::forward ? 0.0f : to_float(dy[i]);
    out[i] = from_float<T>(compute<F, M>(to_float(in[i]), g, alpha, ceiling));
  }
}

unsigned grid_for(std::int64_t work_items, std::int64_t per_block) {
  const std::int64_t blocks = (work_items + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, INT_MAX));
}

template <typename T, Function F, Mode M>
cudaError_t launch(const void* in_raw, const void* dy_raw, void* out_raw, std::int64_t count,
                   const Params& p, cudaStream_t stream) {
  const auto* in = static_cast<const T*>(in_raw);
  const auto* dy = static_cast<const T*>(dy_raw);
  auto* out = static_cast<T*>(out_raw);
  constexpr std::uintptr_t bytes = 16;
  const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(in) % bytes;
  bool aligned_alike =
      reinterpret_cast<std::uintptr_t>(out) % bytes == offset && offset % sizeof(T) == 0;
  if (M != Mode::forward) aligned_alike &= reinterpret_cast<std::uintptr_t>(dy) % bytes == offset;
  if (aligned_alike) {
    const std::int64_t head = std::min<std::int64_t>(
        static_cast<std::int64_t>((bytes - offset) % bytes / sizeof(T)), count);
    const std::int64_t packs = (count - head) / Pack<T>::size;
    vector_kernel<T, F, M>
        <<<grid_for(packs, std::int64_t{block_threads} * unroll), block_threads, 0, stream>>>(
            in, dy, out, head, packs, count, p.alpha, p.ceiling);
  } else {
    scalar_kernel<T, F, M><<<grid_for(count, block_threads), block_threads, 0, stream>>>(
        in, dy, out, count, p.alpha, p.ceiling);
  }
  return cudaGetLastError();
}

template <typename T, Mode M>
cudaError_t dispatch_function(const Params& p, const void* in, const void* dy, void* out,
                              std::int64_t count, cudaStream_t stream) {
  switch (p.function) {
    case Function::identity: return launch<T, Function::identity, M>(in, dy, out, count, p, stream);
    case Function::relu: return launch<T, Function::relu, M>(in, dy, out, count, p, stream);
    case Function::clipped_relu:
      return launch<T, Function::clipped_relu, M>(in, dy, out, count, p, stream);
    case Function::tanh: return launch<T, Function::tanh, M>(in, dy, out, count, p, stream);
    case Function::sigmoid: return launch<T, Function::sigmoid, M>(in, dy, out, count, p, stream);
    case Function::elu: return launch<T, Function::elu, M>(in, dy, out, count, p, stream);
    case Function::swish:
      if constexpr (M == Mode::from_dst) {
        return cudaErrorInvalidValue;  // backward_from_dst() rules it out first
      } else {
        return launch<T, Function::swish, M>(in, dy, out, count, p, stream);
      }
  }
  return cudaErrorInvalidValue;
}

template <Mode M>
cudaError_t dispatch(const Params& p, const void* in, const void* dy, void* out, std::int64_t count,
                     cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (p.element) {
    case Element::f32: return dispatch_function<float, M>(p, in, dy, out, count, stream);
    case Element::f16: return dispatch_function<__half, M>(p, in, dy, out, count, stream);
    case Element::bf16: return dispatch_function<__nv_bfloat16, M>(p, in, dy, out, count, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool backward_from_dst(const Params& params) {
  switch (params.function) {
    case Function::swish: return false;
    case Function::elu: return params.alpha >= 0.0f;
    default: return true;
  }
}

cudaError_t forward(const Params& params, const void* src, void* dst, std::int64_t count,
                    cudaStream_t stream) {
  // The identity in place has nothing to do.
  if (params.function == Function::identity && src == dst) return cudaSuccess;
  return dispatch<Mode::forward>(params, src, nullptr, dst, count, stream);
}

cudaError_t backward(const Params& params, Saved which, const void* saved, const void* diff_dst,
                     void* diff_src, std::int64_t count, cudaStream_t stream) {
  if (params.function == Function::identity) {
    if (diff_dst == diff_src) return cudaSuccess;
    saved = diff_dst;  // the identity reads no forward tensor, which may be null
  }
  if (which == Saved::dst) {
    if (!backward_from_dst(params)) return cudaErrorInvalidValue;
    return dispatch<Mode::from_dst>(params, saved, diff_dst, diff_src, count, stream);
  }
  return dispatch<Mode::from_src>(params, saved, diff_dst, diff_src, count, stream);
}

}  // namespace dnnx::cudnn::kernels::activation
