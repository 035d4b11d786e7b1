// The optimizer and loss-scaling kernels.
//
// Note [multi-tensor launch]
// As PyTorch's multi_tensor_apply, the elements of a call's tensors are cut into chunks of
// chunk_elements; a block takes chunks in a grid-stride loop and finds each chunk's tensor by
// binary search over the tensors' first-chunk numbers. The table (every non-empty tensor's
// pointers, element count, first chunk and whether its pointers allow vector accesses) travels in
// the kernel's parameters, sized by a capacity tier (32, 192 or max_tensors = 384 tensors: a launch
// pays for the parameter bytes of its tier, not of max_tensors), so one launch serves every tensor
// and no table is copied to the device. A tensor whose every pointer is aligned to a pack of
// `vector` elements is read and written in packs (chunks start at multiples of `vector`); the rest
// of it, and every other tensor, element by element. The per-tensor form launches the same kernel
// with a table of one tensor, once per tensor.
//
// The table and the call's values are __grid_constant__ parameters: the kernels take references
// to them without the compiler copying the table into every thread's local memory.
//
// The step count (Note [optimizer step count]) is advanced by a one-thread kernel queued before
// the update, which then reads it: blocks never race on it.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/optim.hpp"
#include "core/optim_math.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace dnnx::cudnn::kernels::optim {
namespace {

namespace math = ::dnnx::detail::optim;

constexpr int block_threads = 256;
constexpr int vector = 4;
constexpr std::int64_t chunk_elements = 8192;  // a multiple of vector * block_threads
constexpr std::int64_t max_grid = 1 << 20;

static_assert(chunk_elements % (vector * block_threads) == 0);

template <int N>
struct Table {
  static constexpr int capacity = N;
  void* param[N];
  const void* grad[N];
  float* master[N];
  float* state[3][N];
  std::int64_t numel[N];
  std::int64_t first_chunk[N];
  bool aligned[N];
  int count;
  std::int64_t total_chunks;
};
// Every parameter of a launch together must fit CUDA's 32764 bytes: the largest table and the
// largest call values (AdamParams), with room to spare.
static_assert(sizeof(Table<max_tensors>) + 256 <= 32764,
              "the table must fit the kernel parameters");

// The tensor of `chunk`: the last with first_chunk <= chunk (every tensor of the table has at
// least one chunk).
template <int N>
__device__ __forceinline__ int tensor_of(const Table<N>& t, std::int64_t chunk) {
  int lo = 0;
  int hi = t.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (t.first_chunk[mid] <= chunk) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Runs op.run<V>(i, e) over every element of the table: packs of `vector` where the tensor is
// aligned, single elements elsewhere (Note [multi-tensor launch]).
template <int N, typename Op>
__device__ __forceinline__ void walk(const Table<N>& t, Op& op) {
  for (std::int64_t chunk = blockIdx.x; chunk < t.total_chunks; chunk += gridDim.x) {
    const int i = tensor_of(t, chunk);
    const std::int64_t begin = (chunk - t.first_chunk[i]) * chunk_elements;
    const std::int64_t end = min(t.numel[i], begin + chunk_elements);
    std::int64_t scalar_begin = begin;
    if (t.aligned[i]) {
      const std::int64_t packed_end = begin + (end - begin) / vector * vector;
      for (std::int64_t e = begin + static_cast<std::int64_t>(threadIdx.x) * vector; e < packed_end;
           e += static_cast<std::int64_t>(block_threads) * vector) {
        op.template run<vector>(i, e);
      }
      scalar_begin = packed_end;
    }
    for (std::int64_t e = scalar_begin + threadIdx.x; e < end; e += block_threads)
      op.template run<1>(i, e);
  }
}

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load(const void* base, std::int64_t e) {
  return *reinterpret_cast<const Pack<T, V>*>(static_cast<const T*>(base) + e);
}
template <typename T, int V>
__device__ __forceinline__ void store(void* base, std::int64_t e, const Pack<T, V>& pack) {
  *reinterpret_cast<Pack<T, V>*>(static_cast<T*>(base) + e) = pack;
}

// Whether the step runs (found_inf absent or zero).
__device__ __forceinline__ bool step_runs(const StepScalars& s) {
  return s.found_inf == nullptr || *s.found_inf == 0.0f;
}

__global__ void advance_step_kernel(StepScalars s) {
  if (step_runs(s)) *s.step += 1.0f;
}

__global__ void reset_kernel(float* value) { *value = 0.0f; }

// ---- sgd ----------------------------------------------------------------------------------------

struct SgdParams {
  math::SgdScalars<float> s;
  math::SgdFlags flags;
  StepScalars scalars;
};

template <typename T, int N>
struct SgdOp {
  const Table<N>& t;
  const SgdParams& p;
  bool first;
  float scale;  // the grad scale (1 without one)
  bool scaled;

  template <int V>
  __device__ __forceinline__ void run(int i, std::int64_t e) {
    const Pack<T, V> grad = load<T, V>(t.grad[i], e);
    float* master = t.master[i];
    Pack<float, V> value;
    if (master != nullptr) {
      value = load<float, V>(master, e);
    } else {
      const Pack<T, V> param = load<T, V>(t.param[i], e);
#pragma unroll
      for (int k = 0; k < V; ++k) value.v[k] = to_float(param.v[k]);
    }
    Pack<float, V> buf{};
    if (p.flags.momentum) buf = load<float, V>(t.state[0][i], e);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float g = to_float(grad.v[k]);
      if (scaled) g = g / scale;
      value.v[k] = math::sgd_element(value.v[k], g, &buf.v[k], first, p.flags, p.s);
      out.v[k] = from_float<T>(value.v[k]);
    }
    if (master != nullptr) store<float, V>(master, e, value);
    if (p.flags.momentum) store<float, V>(t.state[0][i], e, buf);
    store<T, V>(t.param[i], e, out);
  }
};

template <typename T, int N>
__global__ void __launch_bounds__(block_threads)
    sgd_kernel(const __grid_constant__ Table<N> t, const __grid_constant__ SgdParams p) {
  if (!step_runs(p.scalars)) return;
  const bool scaled = p.scalars.grad_scale != nullptr;
  SgdOp<T, N> op{t, p, *p.scalars.step == 1.0f, scaled ? *p.scalars.grad_scale : 1.0f, scaled};
  walk(t, op);
}

// ---- adam ---------------------------------------------------------------------------------------

struct AdamParams {
  double lr, beta1, beta2, eps, weight_decay;
  math::AdamFlags flags;
  StepScalars scalars;
};

template <typename T, int N>
struct AdamOp {
  const Table<N>& t;
  const AdamParams& p;
  math::AdamScalars<float> s;
  float scale;
  bool scaled;

  template <int V>
  __device__ __forceinline__ void run(int i, std::int64_t e) {
    const Pack<T, V> grad = load<T, V>(t.grad[i], e);
    float* master = t.master[i];
    Pack<float, V> value;
    if (master != nullptr) {
      value = load<float, V>(master, e);
    } else {
      const Pack<T, V> param = load<T, V>(t.param[i], e);
#pragma unroll
      for (int k = 0; k < V; ++k) value.v[k] = to_float(param.v[k]);
    }
    Pack<float, V> m = load<float, V>(t.state[0][i], e);
    Pack<float, V> v = load<float, V>(t.state[1][i], e);
    Pack<float, V> v_max{};
    if (p.flags.amsgrad) v_max = load<float, V>(t.state[2][i], e);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float g = to_float(grad.v[k]);
      if (scaled) g = g / scale;
      value.v[k] = math::adam_element(value.v[k], g, &m.v[k], &v.v[k], &v_max.v[k], p.flags, s);
      out.v[k] = from_float<T>(value.v[k]);
    }
    if (master != nullptr) store<float, V>(master, e, value);
    store<float, V>(t.state[0][i], e, m);
    store<float, V>(t.state[1][i], e, v);
    if (p.flags.amsgrad) store<float, V>(t.state[2][i], e, v_max);
    store<T, V>(t.param[i], e, out);
  }
};

template <typename T, int N>
__global__ void __launch_bounds__(block_threads)
    adam_kernel(const __grid_constant__ Table<N> t, const __grid_constant__ AdamParams p) {
  if (!step_runs(p.scalars)) return;
  const bool scaled = p.scalars.grad_scale != nullptr;
  // The bias corrections in double from the advanced step (two pow calls): once per block.
  __shared__ math::AdamScalars<float> shared;
  if (threadIdx.x == 0) {
    shared = math::AdamScalars<float>::make(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay,
                                            static_cast<double>(*p.scalars.step));
  }
  __syncthreads();
  AdamOp<T, N> op{t, p, shared, scaled ? *p.scalars.grad_scale : 1.0f, scaled};
  walk(t, op);
}

// ---- unscale ------------------------------------------------------------------------------------

struct UnscaleParams {
  float* found_inf;
  const float* inv_scale;
  bool from_scale;
};

template <typename T, int N>
struct UnscaleOp {
  const Table<N>& t;
  float inv_scale;
  bool found = false;

  template <int V>
  __device__ __forceinline__ void run(int i, std::int64_t e) {
    Pack<T, V> grad = load<T, V>(t.param[i], e);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float g = to_float(grad.v[k]);
      found |= !isfinite(g);
      grad.v[k] = from_float<T>(math::unscale_element(g, inv_scale));
    }
    store<T, V>(t.param[i], e, grad);
  }
};

template <typename T, int N>
__global__ void __launch_bounds__(block_threads)
    unscale_kernel(const __grid_constant__ Table<N> t, const UnscaleParams p) {
  float inv_scale = *p.inv_scale;
  if (p.from_scale) inv_scale = math::inverse_scale(inv_scale);
  UnscaleOp<T, N> op{t, inv_scale};
  walk(t, op);
  // Every writer stores the same 1 (torch's kernel does the same): no ordering needed.
  if (op.found) *p.found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, std::int32_t* growth_tracker,
                                    const float* found_inf, double growth_factor,
                                    double backoff_factor, std::int32_t growth_interval) {
  math::update_scale(scale, growth_tracker, *found_inf, growth_factor, backoff_factor,
                     growth_interval);
}

// ---- launching ----------------------------------------------------------------------------------

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

bool aligned_to(const void* pointer, std::size_t bytes) {
  return pointer == nullptr || reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

std::size_t element_bytes(Element element) { return element == Element::f32 ? 4 : 2; }

// The table of tensors [first, last) of `tensors` that have elements; `last - first` of them fit.
template <int N>
Table<N> make_table(const TensorRef* tensors, int first, int last, Element element) {
  Table<N> t{};
  const std::size_t storage_pack = element_bytes(element) * vector;
  const std::size_t f32_pack = sizeof(float) * vector;
  std::int64_t chunks = 0;
  for (int j = first; j < last; ++j) {
    const TensorRef& r = tensors[j];
    if (r.numel == 0) continue;
    const int i = t.count++;
    t.param[i] = r.param;
    t.grad[i] = r.grad;
    t.master[i] = r.master;
    for (int k = 0; k < 3; ++k) t.state[k][i] = r.state[k];
    t.numel[i] = r.numel;
    t.first_chunk[i] = chunks;
    t.aligned[i] = aligned_to(r.param, storage_pack) && aligned_to(r.grad, storage_pack) &&
                   aligned_to(r.master, f32_pack) && aligned_to(r.state[0], f32_pack) &&
                   aligned_to(r.state[1], f32_pack) && aligned_to(r.state[2], f32_pack);
    chunks += ceil_div(r.numel, chunk_elements);
  }
  t.total_chunks = chunks;
  return t;
}

unsigned grid_of(std::int64_t chunks) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(chunks, 1, max_grid));
}

// Launches kernel<T, N> on the table of tensors [first, last) (nothing when they are all empty).
template <int N, typename Launcher>
cudaError_t launch_table(const TensorRef* tensors, int first, int last, Element element,
                         const Launcher& launcher) {
  const Table<N> t = make_table<N>(tensors, first, last, element);
  if (t.count == 0) return cudaSuccess;
  launcher(t, grid_of(t.total_chunks));
  return cudaGetLastError();
}

int non_empty(const TensorRef* tensors, int count) {
  int n = 0;
  for (int j = 0; j < count; ++j) n += tensors[j].numel > 0 ? 1 : 0;
  return n;
}

// Runs `launcher.template operator()<N>` over the tensors as `launch` says: one launch of the
// smallest tier that holds them all, or one launch of a one-tensor table per tensor.
template <typename Launcher>
cudaError_t launch_all(const TensorRef* tensors, int count, Launch launch, Element element,
                       const Launcher& launcher) {
  if (launch == Launch::per_tensor) {
    for (int j = 0; j < count; ++j) {
      const cudaError_t status = launch_table<1>(tensors, j, j + 1, element, launcher);
      if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
  }
  const int n = non_empty(tensors, count);
  if (n <= 32) return launch_table<32>(tensors, 0, count, element, launcher);
  if (n <= 192) return launch_table<192>(tensors, 0, count, element, launcher);
  if (n <= max_tensors) return launch_table<max_tensors>(tensors, 0, count, element, launcher);
  return cudaErrorInvalidValue;  // the caller lists the multi-tensor candidate unsupported
}

// Calls f(T{}) with the storage type of `element`.
template <typename F>
void with_type(Element element, F&& f) {
  switch (element) {
    case Element::f16: f(__half{}); return;
    case Element::bf16: f(__nv_bfloat16{}); return;
    case Element::f32: f(float{}); return;
  }
}

}  // namespace

cudaError_t sgd(const SgdCall& call, const TensorRef* tensors, int count, Launch launch,
                cudaStream_t stream) {
  SgdParams p;
  p.s = math::SgdScalars<float>::make(call.lr, call.momentum_value, call.dampening,
                                      call.weight_decay);
  p.flags = {call.momentum, call.nesterov, call.maximize};
  p.scalars = call.scalars;
  advance_step_kernel<<<1, 1, 0, stream>>>(call.scalars);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  with_type(call.element, [&](auto type) {
    using T = decltype(type);
    status = launch_all(tensors, count, launch, call.element, [&](const auto& t, unsigned grid) {
      constexpr int n = std::remove_reference_t<decltype(t)>::capacity;
      sgd_kernel<T, n><<<grid, block_threads, 0, stream>>>(t, p);
    });
  });
  return status;
}

cudaError_t adam(const AdamCall& call, const TensorRef* tensors, int count, Launch launch,
                 cudaStream_t stream) {
  AdamParams p{call.lr,     call.beta1,        call.beta2,
               call.eps,    call.weight_decay, {call.amsgrad, call.decoupled, call.maximize},
               call.scalars};
  advance_step_kernel<<<1, 1, 0, stream>>>(call.scalars);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  with_type(call.element, [&](auto type) {
    using T = decltype(type);
    status = launch_all(tensors, count, launch, call.element, [&](const auto& t, unsigned grid) {
      constexpr int n = std::remove_reference_t<decltype(t)>::capacity;
      adam_kernel<T, n><<<grid, block_threads, 0, stream>>>(t, p);
    });
  });
  return status;
}

cudaError_t unscale(const UnscaleCall& call, const TensorRef* tensors, int count, Launch launch,
                    cudaStream_t stream) {
  if (call.reset_found_inf) {
    reset_kernel<<<1, 1, 0, stream>>>(call.found_inf);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
  }
  const UnscaleParams p{call.found_inf, call.inv_scale, call.from_scale};
  cudaError_t status = cudaSuccess;
  with_type(call.element, [&](auto type) {
    using T = decltype(type);
    status = launch_all(tensors, count, launch, call.element, [&](const auto& t, unsigned grid) {
      constexpr int n = std::remove_reference_t<decltype(t)>::capacity;
      unscale_kernel<T, n><<<grid, block_threads, 0, stream>>>(t, p);
    });
  });
  return status;
}

cudaError_t update_scale(float* scale, std::int32_t* growth_tracker, const float* found_inf,
                         double growth_factor, double backoff_factor, std::int32_t growth_interval,
                         cudaStream_t stream) {
  update_scale_kernel<<<1, 1, 0, stream>>>(scale, growth_tracker, found_inf, growth_factor,
                                           backoff_factor, growth_interval);
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::optim
