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
    simd::parallel_blocks(blocks, count, [&](std::int64_t first, std::int64_t end) {
      float values[4] = {};
      for (std::int64_t block = first; block < end; ++block) {
        detail::random::draw4(args.params, args.seed,
                              args.offset + static_cast<std::uint64_t>(block), values);
        const std::int64_t start = block * 4;
        const std::int64_t stop = std::min(count, start + 4);
        for (std::int64_t i = start; i < stop; ++i)
          detail::store_drawn(base, geometry_.offset(i), desc_.dtype, values[i - start]);
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
