// The reference reorder: one candidate, "reference:direct". Reads src and (unless beta = 0) dst
// in logical row-major order through Tensor::to_f32, whatever their strides, computes
// alpha * src + beta * dst in f64 and rounds once to dst's dtype (Note [rounding once] in
// conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/reorder_args.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo info_of(const ReorderDesc&, Direction) {
  return direct_info("direct loop (f64)", {"reference"});
}

class DirectPlan final : public DirectPlanBase<ReorderDesc, detail::ReorderArgs> {
 public:
  DirectPlan(const ReorderDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const detail::ReorderArgs& args, detail::Workspace) override {
    const std::vector<float> src =
        host_tensor(args.src, "src", desc_.dims, desc_.src_dtype, context_).to_f32();
    Tensor& dst = host_tensor(args.dst, "dst", desc_.dims, desc_.dst_dtype, context_);
    const double alpha = desc_.alpha;
    std::vector<double> out(src.size());
    if (desc_.beta == 0) {
      // dst is not read: whatever it holds (NaN included) does not matter.
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = alpha * src[i];
    } else {
      const std::vector<float> old = dst.to_f32();
      const double beta = desc_.beta;
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = alpha * src[i] + beta * old[i];
    }
    store(out, dst);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::reorder>> make_reorder_backend(
    const detail::OpBackends&) {
  return DirectBackend<ReorderDesc, detail::ReorderArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
