// The cpu backend's optimizer and loss-scaling ops: dnnx's own loops (oneDNN has no optimizer
// primitive), one candidate per op, "cpu:kernel:<op>". A call's tensors are cut into chunks of at
// most chunk_elements values, every tensor's chunks in one list, and the list is split between the
// loop threads (Note [loop threads]): one parallel region for all tensors, as a multi-tensor
// kernel (Note [vectorised element loops] for the loops themselves). Arithmetic is f32
// (core/optim_math.hpp); each element is computed alone, so results do not depend on the thread
// count.

#include "backends/onednn/layers.hpp"
#include "backends/onednn/loop_pool.hpp"
#include "core/dtype.hpp"
#include "core/layer_backend.hpp"
#include "core/optim_args.hpp"
#include "core/optim_math.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace dnnx::onednn {
namespace {

namespace optim = detail::optim;

constexpr std::int64_t chunk_elements = 16384;

// One chunk of one tensor: [begin, end) of tensor `tensor`.
struct Chunk {
  std::size_t tensor;
  std::int64_t begin, end;
};

std::vector<Chunk> chunks_of(const std::vector<Dims>& shapes) {
  std::vector<Chunk> chunks;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::int64_t count = shapes[i].product();
    for (std::int64_t begin = 0; begin < count; begin += chunk_elements)
      chunks.push_back({i, begin, std::min(count, begin + chunk_elements)});
  }
  return chunks;
}

// Loads and stores of one storage dtype as f32.
struct F32 {
  static float load(const void* p, std::int64_t i) { return static_cast<const float*>(p)[i]; }
  static void store(void* p, std::int64_t i, float v) { static_cast<float*>(p)[i] = v; }
};
struct F16 {
  static float load(const void* p, std::int64_t i) {
    return detail::half_to_float(static_cast<const std::uint16_t*>(p)[i]);
  }
  static void store(void* p, std::int64_t i, float v) {
    static_cast<std::uint16_t*>(p)[i] = detail::float_to_half(v);
  }
};
struct BF16 {
  static float load(const void* p, std::int64_t i) {
    return detail::bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
  }
  static void store(void* p, std::int64_t i, float v) {
    static_cast<std::uint16_t*>(p)[i] = detail::float_to_bf16(v);
  }
};

// Calls f(Storage{}) for the storage type of `dtype`.
template <typename F>
void with_storage(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f16: f(F16{}); return;
    case DType::bf16: f(BF16{}); return;
    default: f(F32{}); return;
  }
}

float scalar_of(const Tensor* tensor) { return *static_cast<const float*>(tensor->data()); }

// Note [optimizer step count]: the step after this call's increment, or 0 when skipped.
float advance_step(Tensor* step, const Tensor* found_inf) {
  if (found_inf != nullptr && scalar_of(found_inf) != 0.0f) return 0.0f;
  float& count = *static_cast<float*>(step->data());
  count += 1.0f;
  return count;
}

void run_chunks(const std::vector<Chunk>& chunks, std::int64_t elements,
                const std::function<void(const Chunk&)>& body) {
  threads::run_ranges(static_cast<std::int64_t>(chunks.size()), elements,
                      [&](std::int64_t first, std::int64_t last) {
                        for (std::int64_t c = first; c < last; ++c)
                          body(chunks[static_cast<std::size_t>(c)]);
                      });
}

// Note [vectorised element loops]
// The element functions of core/optim_math.hpp take pointers to the state and branch on flags
// that are the same for every element. Run over a tensor's memory directly they stay scalar (the
// compiler cannot rule out aliasing between the lists); run over small local f32 arrays (a block
// of block_elements values: the gradient unscaled, the parameter or its master copy, the state)
// with the flags hoisted they vectorise, and the blocks stay in L1. This file is compiled without
// errno for sqrt (CMakeLists.txt): Adam's square roots are of non-negative values, and errno's
// branch around each one kept the loop scalar.
constexpr std::int64_t block_elements = 256;

void sgd_block(std::int64_t n, float* __restrict p, const float* __restrict g,
               float* __restrict buf, bool first, optim::SgdFlags flags,
               const optim::SgdScalars<float>& s) {
  for (std::int64_t k = 0; k < n; ++k)
    p[k] = optim::sgd_element(p[k], g[k], &buf[k], first, flags, s);
}

void adam_block(std::int64_t n, float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v, float* __restrict v_max, optim::AdamFlags flags,
                const optim::AdamScalars<float>& s) {
  for (std::int64_t k = 0; k < n; ++k)
    p[k] = optim::adam_element(p[k], g[k], &m[k], &v[k], &v_max[k], flags, s);
}

// The parameters of [e0, e0 + n) as f32 into `p` (from the master copy when there is one) and
// the gradients, divided by `scale` when `scaled`, into `g`.
template <typename S>
void load_block(std::int64_t e0, std::int64_t n, const void* param, const float* master,
                const void* grad, bool scaled, float scale, float* p, float* g) {
  for (std::int64_t k = 0; k < n; ++k) {
    const float value = S::load(grad, e0 + k);
    g[k] = scaled ? value / scale : value;
    p[k] = master != nullptr ? master[e0 + k] : S::load(param, e0 + k);
  }
}

// The new parameters `p` of [e0, e0 + n) into the master copy (when there is one) and the
// parameters.
template <typename S>
void store_block(std::int64_t e0, std::int64_t n, const float* p, float* master, void* param) {
  if (master != nullptr) std::copy_n(p, n, master + e0);
  for (std::int64_t k = 0; k < n; ++k) S::store(param, e0 + k, p[k]);
}

AlgoInfo kernel_info(const char* op) {
  AlgoInfo info;
  info.id = detail::cat("cpu:kernel:", op);
  info.name = "multi-tensor loop (f32, threaded)";
  info.supported = true;
  info.deterministic = true;
  info.notes = {"multi_tensor", "kernel"};
  return info;
}

template <typename Desc, typename Args>
class KernelPlan : public detail::LayerPlanBase<Args> {
 public:
  KernelPlan(const Desc& desc, AlgoInfo info)
      : detail::LayerPlanBase<Args>(
            info, detail::op_context(BackendKind::cpu, desc, Direction::fwd, info.id)),
        desc_(desc) {}

 protected:
  Desc desc_;
};

class SgdPlan final : public KernelPlan<SgdDesc, detail::SgdArgs> {
 public:
  SgdPlan(const SgdDesc& desc, AlgoInfo info)
      : KernelPlan(desc, std::move(info)), chunks_(chunks_of(desc.shapes)) {}

  void execute(const detail::SgdArgs& args, detail::Workspace) override {
    const SgdDesc& d = desc_;
    const SgdTensors& t = args.tensors;
    const float step = advance_step(t.step, t.found_inf);
    if (step == 0.0f) return;
    const auto s = optim::SgdScalars<float>::make(args.hyper.lr, args.hyper.momentum,
                                                  args.hyper.dampening, args.hyper.weight_decay);
    const optim::SgdFlags flags{d.momentum, d.nesterov, d.maximize};
    const bool first = step == 1.0f;
    const float scale = t.grad_scale != nullptr ? scalar_of(t.grad_scale) : 1.0f;
    const bool scaled = t.grad_scale != nullptr;
    with_storage(d.dtype, [&](auto storage) {
      using S = decltype(storage);
      run_chunks(chunks_, d.numel(), [&](const Chunk& c) {
        void* param = t.params[c.tensor].data();
        const void* grad = t.grads[c.tensor].data();
        float* master = d.master_weights ? static_cast<float*>(t.master[c.tensor].data()) : nullptr;
        float* buf =
            d.momentum ? static_cast<float*>(t.momentum_buffers[c.tensor].data()) : nullptr;
        alignas(64) float pb[block_elements], gb[block_elements], bb[block_elements];
        for (std::int64_t e0 = c.begin; e0 < c.end; e0 += block_elements) {
          const std::int64_t n = std::min(block_elements, c.end - e0);
          load_block<S>(e0, n, param, master, grad, scaled, scale, pb, gb);
          if (buf != nullptr) std::copy_n(buf + e0, n, bb);
          sgd_block(n, pb, gb, bb, first, flags, s);
          if (buf != nullptr) std::copy_n(bb, n, buf + e0);
          store_block<S>(e0, n, pb, master, param);
        }
      });
    });
  }

 private:
  std::vector<Chunk> chunks_;
};

class AdamPlan final : public KernelPlan<AdamDesc, detail::AdamArgs> {
 public:
  AdamPlan(const AdamDesc& desc, AlgoInfo info)
      : KernelPlan(desc, std::move(info)), chunks_(chunks_of(desc.shapes)) {}

  void execute(const detail::AdamArgs& args, detail::Workspace) override {
    const AdamDesc& d = desc_;
    const AdamTensors& t = args.tensors;
    const float step = advance_step(t.step, t.found_inf);
    if (step == 0.0f) return;
    const AdamHyper& h = args.hyper;
    const auto s =
        optim::AdamScalars<float>::make(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, step);
    const optim::AdamFlags flags{d.amsgrad, d.decoupled_weight_decay, d.maximize};
    const float scale = t.grad_scale != nullptr ? scalar_of(t.grad_scale) : 1.0f;
    const bool scaled = t.grad_scale != nullptr;
    with_storage(d.dtype, [&](auto storage) {
      using S = decltype(storage);
      run_chunks(chunks_, d.numel(), [&](const Chunk& c) {
        const std::size_t i = c.tensor;
        void* param = t.params[i].data();
        const void* grad = t.grads[i].data();
        float* master = d.master_weights ? static_cast<float*>(t.master[i].data()) : nullptr;
        auto* m = static_cast<float*>(t.exp_avg[i].data());
        auto* v = static_cast<float*>(t.exp_avg_sq[i].data());
        float* v_max = d.amsgrad ? static_cast<float*>(t.max_exp_avg_sq[i].data()) : nullptr;
        alignas(64) float pb[block_elements], gb[block_elements], mb[block_elements],
            vb[block_elements], vmb[block_elements];
        for (std::int64_t e0 = c.begin; e0 < c.end; e0 += block_elements) {
          const std::int64_t n = std::min(block_elements, c.end - e0);
          load_block<S>(e0, n, param, master, grad, scaled, scale, pb, gb);
          std::copy_n(m + e0, n, mb);
          std::copy_n(v + e0, n, vb);
          if (v_max != nullptr) std::copy_n(v_max + e0, n, vmb);
          adam_block(n, pb, gb, mb, vb, vmb, flags, s);
          std::copy_n(mb, n, m + e0);
          std::copy_n(vb, n, v + e0);
          if (v_max != nullptr) std::copy_n(vmb, n, v_max + e0);
          store_block<S>(e0, n, pb, master, param);
        }
      });
    });
  }

 private:
  std::vector<Chunk> chunks_;
};

class UnscalePlan final : public KernelPlan<UnscaleDesc, detail::UnscaleArgs> {
 public:
  UnscalePlan(const UnscaleDesc& desc, AlgoInfo info)
      : KernelPlan(desc, std::move(info)), chunks_(chunks_of(desc.shapes)) {}

  void execute(const detail::UnscaleArgs& args, detail::Workspace) override {
    float inv_scale = scalar_of(args.inv_scale);
    if (desc_.from_scale) inv_scale = optim::inverse_scale(inv_scale);
    float& found_inf = *static_cast<float*>(args.found_inf->data());
    if (desc_.reset_found_inf) found_inf = 0.0f;
    std::atomic<bool> found{false};
    with_storage(desc_.dtype, [&](auto storage) {
      using S = decltype(storage);
      run_chunks(chunks_, desc_.numel(), [&](const Chunk& c) {
        void* grad = args.grads[c.tensor].data();
        bool local = false;
        for (std::int64_t e = c.begin; e < c.end; ++e) {
          const float g = S::load(grad, e);
          local |= !std::isfinite(g);
          S::store(grad, e, optim::unscale_element(g, inv_scale));
        }
        if (local) found.store(true, std::memory_order_relaxed);
      });
    });
    if (found.load()) found_inf = 1.0f;
  }

 private:
  std::vector<Chunk> chunks_;
};

class UpdateScalePlan final : public KernelPlan<UpdateScaleDesc, detail::UpdateScaleArgs> {
 public:
  using KernelPlan::KernelPlan;

  void execute(const detail::UpdateScaleArgs& args, detail::Workspace) override {
    optim::update_scale(static_cast<float*>(args.scale->data()),
                        static_cast<std::int32_t*>(args.growth_tracker->data()),
                        scalar_of(args.found_inf), args.hyper.growth_factor,
                        args.hyper.backoff_factor,
                        static_cast<std::int32_t>(args.hyper.growth_interval));
  }
};

struct Candidate {
  AlgoInfo info;
};

// The one candidate of an op, whose plans are Plan(desc, info).
template <typename Desc, typename Args, typename Plan>
class KernelBackend final : public detail::ListedOpBackend<Desc, Args, Candidate> {
 public:
  explicit KernelBackend(const char* op)
      : detail::ListedOpBackend<Desc, Args, Candidate>(BackendKind::cpu), op_(op) {}

 private:
  std::vector<Candidate> enumerate(const Desc&, Direction) override {
    return {Candidate{kernel_info(op_)}};
  }
  std::shared_ptr<detail::OpPlan<Args>> build(const Desc& desc, Direction,
                                              const Candidate& candidate) override {
    return std::make_shared<Plan>(desc, candidate.info);
  }
  const char* op_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::sgd>> make_sgd_backend(std::shared_ptr<Runtime>,
                                                                   const detail::OpBackends&) {
  return std::make_unique<KernelBackend<SgdDesc, detail::SgdArgs, SgdPlan>>("sgd");
}

std::unique_ptr<detail::OpBackendOf<OpKind::adam>> make_adam_backend(std::shared_ptr<Runtime>,
                                                                     const detail::OpBackends&) {
  return std::make_unique<KernelBackend<AdamDesc, detail::AdamArgs, AdamPlan>>("adam");
}

std::unique_ptr<detail::OpBackendOf<OpKind::unscale>> make_unscale_backend(
    std::shared_ptr<Runtime>, const detail::OpBackends&) {
  return std::make_unique<KernelBackend<UnscaleDesc, detail::UnscaleArgs, UnscalePlan>>("unscale");
}

std::unique_ptr<detail::OpBackendOf<OpKind::update_scale>> make_update_scale_backend(
    std::shared_ptr<Runtime>, const detail::OpBackends&) {
  return std::make_unique<KernelBackend<UpdateScaleDesc, detail::UpdateScaleArgs, UpdateScalePlan>>(
      "update_scale");
}

}  // namespace dnnx::onednn
