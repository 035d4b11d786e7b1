// The reference dropout: one candidate, "reference:direct", plain loops over the logical row-major
// index: the inference forward copies, the training forward draws each Philox block with the
// shared code of core/philox.hpp and keeps the mask as bits (Note [dropout mask] in
// core/dropout_desc.cpp), the backward multiplies by the mask it reads.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/dropout_args.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo info_of(const DropoutDesc& desc, Direction direction) {
  AlgoInfo info = direct_info("direct loop (shared Philox draws)", {"reference", "philox"});
  if (direction == Direction::fwd_training) {
    info.saved_state_bytes = detail::mask_bits_bytes(desc.dims.product());
    info.saved_state_format = detail::mask_bits_format;
  } else if (direction == Direction::bwd_data) {
    info.saved_state_format = detail::mask_bits_format;
  }
  return info;
}

class DirectPlan final : public DirectPlanBase<DropoutDesc, detail::DropoutArgs> {
 public:
  DirectPlan(const DropoutDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction),
        geometry_(detail::geometry_of(desc.dims, desc.layout)) {}

  void execute(const detail::DropoutArgs& args, detail::Workspace) override {
    const bool forward = direction_ != Direction::bwd_data;
    const Tensor& in = host_tensor(forward ? args.src : args.diff_dst, forward ? "src" : "diff_dst",
                                   desc_.dims, desc_.dtype, context_);
    Tensor& out = host_tensor(forward ? args.dst : args.diff_src, forward ? "dst" : "diff_src",
                              desc_.dims, desc_.dtype, context_);
    DNNX_CHECK_ARG(out.is_dense(desc_.layout), "output ", describe(out), " is not dense ",
                   to_string(desc_.layout));
    const std::vector<float> values = in.to_f32();  // logical order
    const std::int64_t count = desc_.dims.product();
    if (direction_ == Direction::fwd) {
      for (std::int64_t i = 0; i < count; ++i)
        detail::store_drawn(out.data(), geometry_.offset(i), desc_.dtype,
                            values[static_cast<std::size_t>(i)]);
      return;
    }
    const std::size_t bytes = detail::mask_bits_bytes(count);
    if (const std::string problem =
            detail::mask_state_problem(args.state, detail::mask_bits_format, bytes, Device::cpu());
        !problem.empty()) {
      detail::raise(ErrorKind::InvalidArgument, problem, context_);
    }
    auto* mask = static_cast<std::uint32_t*>(args.state->data());
    if (direction_ == Direction::fwd_training) {
      if (bytes > 0) std::memset(mask, 0, bytes);
      detail::random::Words words{};
      for (std::int64_t i = 0; i < count; ++i) {
        if (i % 4 == 0)
          words = detail::random::block_words(args.seed,
                                              args.offset + static_cast<std::uint64_t>(i / 4));
        if (detail::random::keep(words.v[i % 4], desc_.p))
          mask[i / 32] |= std::uint32_t{1} << (i % 32);
      }
    }
    const float scale = desc_.scale();
    for (std::int64_t i = 0; i < count; ++i) {
      const bool kept = ((mask[i / 32] >> (i % 32)) & 1u) != 0;
      const float value =
          detail::random::mul(values[static_cast<std::size_t>(i)], kept ? scale : 0.0f);
      detail::store_drawn(out.data(), geometry_.offset(i), desc_.dtype, value);
    }
  }

 private:
  detail::random::Geometry geometry_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::dropout>> make_dropout_backend(
    const detail::OpBackends&) {
  return DirectBackend<DropoutDesc, detail::DropoutArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
