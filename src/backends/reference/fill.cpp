// The reference fill: one candidate, "reference:direct", a plain loop over the logical row-major
// index drawing each Philox block with the shared code of core/philox.hpp (Note [counter-based
// random numbers]); the values are f32 by definition, so there is nothing to accumulate in f64.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/fill_args.hpp"

#include <cstdint>
#include <memory>

namespace dnnx::reference {
namespace {

AlgoInfo info_of(const FillDesc&, Direction) {
  return direct_info("direct loop (shared Philox draws)", {"reference", "philox"});
}

class DirectPlan final : public DirectPlanBase<FillDesc, detail::FillArgs> {
 public:
  DirectPlan(const FillDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction),
        geometry_(detail::geometry_of(desc.dims, desc.layout)) {}

  void execute(const detail::FillArgs& args, detail::Workspace) override {
    Tensor& dst = host_tensor(args.dst, "dst", desc_.dims, desc_.dtype, context_);
    DNNX_CHECK_ARG(dst.is_dense(desc_.layout), "dst ", describe(dst), " is not dense ",
                   to_string(desc_.layout));
    const std::int64_t count = desc_.dims.product();
    void* base = dst.data();
    float values[4] = {};
    for (std::int64_t i = 0; i < count; ++i) {
      if (i % 4 == 0) {
        detail::random::draw4(args.params, args.seed,
                              args.offset + static_cast<std::uint64_t>(i / 4), values);
      }
      detail::store_drawn(base, geometry_.offset(i), desc_.dtype, values[i % 4]);
    }
  }

 private:
  detail::random::Geometry geometry_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::fill>> make_fill_backend(const detail::OpBackends&) {
  return DirectBackend<FillDesc, detail::FillArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
