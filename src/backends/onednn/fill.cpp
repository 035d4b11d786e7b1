// The cpu backend's fill: dnnx's own loop, candidate "cpu:kernel:fill" (oneDNN has no random
// fill). Threads split the Philox blocks into contiguous ranges (simd::parallel_blocks); each
// block's values depend only on its index (Note [counter-based random numbers] in
// core/philox.hpp), so the result is the same for any thread count and bit-identical to the
// reference's.

#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/simd.hpp"
#include "core/fill_args.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::onednn {
namespace {

constexpr const char* kernel_id = "cpu:kernel:fill";

// The values of blocks [first, end) of `count` elements of `dtype`, stored at `base`.
inline void fill_blocks(const detail::FillArgs& args, const detail::random::Geometry& geometry,
                        DType dtype, void* base, std::int64_t count, std::int64_t first,
                        std::int64_t end) {
  float values[4] = {};
  for (std::int64_t block = first; block < end; ++block) {
    detail::random::draw4(args.params, args.seed, args.offset + static_cast<std::uint64_t>(block),
                          values);
    const std::int64_t start = block * 4;
    const std::int64_t stop = std::min(count, start + 4);
    for (std::int64_t i = start; i < stop; ++i)
      detail::store_drawn(base, geometry.offset(i), dtype, values[i - start]);
  }
}

// Note [fused multiply-adds of the draws]
// The draws' multiply-adds (detail::random::fma in core/philox.hpp) are std::fma, which without
// an FMA target is a call into libm per multiply-add, about twenty for a pair of normal draws:
// most of the time of initialising a model's weights. A hardware FMA and libm's fmaf both round the
// exact result once, so a copy of the block loop compiled for FMA, flattened so that the draws'
// code is inlined into it and each fma is an instruction, stores the same bits; it runs where
// the CPU has FMA, the plain copy elsewhere.
__attribute__((target("fma"), flatten)) void fill_blocks_fma(
    const detail::FillArgs& args, const detail::random::Geometry& geometry, DType dtype, void* base,
    std::int64_t count, std::int64_t first, std::int64_t end) {
  fill_blocks(args, geometry, dtype, base, count, first, end);
}

bool cpu_has_fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return has;
}

struct Candidate {
  AlgoInfo info;
};

class KernelPlan final : public LayerPlan<detail::FillArgs> {
 public:
  KernelPlan(const FillDesc& desc, Direction direction, const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc),
        geometry_(detail::geometry_of(desc.dims, desc.layout)) {}

  void execute(const detail::FillArgs& args, detail::Workspace) override {
    check_dense_on_cpu(args.dst, "dst", desc_.dims, desc_.dtype, desc_.layout, context_);
    const std::int64_t count = desc_.dims.product();
    if (count == 0) return;
    void* base = data_of(args.dst, "dst");
    const std::int64_t blocks = (count + 3) / 4;
    const bool fma = cpu_has_fma();  // Note [fused multiply-adds of the draws]
    simd::parallel_blocks(blocks, count, [&](std::int64_t first, std::int64_t end) {
      if (fma) {
        fill_blocks_fma(args, geometry_, desc_.dtype, base, count, first, end);
      } else {
        fill_blocks(args, geometry_, desc_.dtype, base, count, first, end);
      }
    });
  }

 private:
  FillDesc desc_;
  detail::random::Geometry geometry_;
};

class FillBackend final : public LayerBackend<FillDesc, detail::FillArgs, Candidate> {
 public:
  explicit FillBackend(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cpu, std::move(runtime)) {}

 protected:
  std::vector<Candidate> enumerate(const FillDesc&, Direction) override {
    Candidate candidate{kernel_info_of(kernel_id, "dnnx Philox fill loop (threaded)")};
    candidate.info.notes = {"kernel", "philox"};
    return {std::move(candidate)};
  }
  std::shared_ptr<detail::OpPlan<detail::FillArgs>> build(const FillDesc& desc, Direction direction,
                                                          const Candidate& candidate) override {
    return std::make_shared<KernelPlan>(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::fill>> make_fill_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<FillBackend>(std::move(runtime));
}

}  // namespace dnnx::onednn
