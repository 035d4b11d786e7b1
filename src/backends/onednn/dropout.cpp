// The cpu backend's dropout: dnnx's own loops (oneDNN has no dropout), one candidate per
// direction: "cpu:kernel:dropout". The inference forward copies; the training forward draws the
// mask as the reference does (Note [dropout mask] in core/dropout_desc.cpp), 32 elements (one
// mask word) per step, threads splitting the words into contiguous ranges (simd::parallel_blocks):
// the bits never depend on the thread count; the backward multiplies by the mask it reads.

#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/simd.hpp"
#include "core/dropout_args.hpp"
#include "core/dtype.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace dnnx::onednn {
namespace {

constexpr const char* kernel_id = "cpu:kernel:dropout";

struct Candidate {
  AlgoInfo info;
};

float load(const void* base, std::int64_t offset, DType dtype) {
  return detail::load_f32(
      static_cast<const char*>(base) + offset * static_cast<std::int64_t>(size_of(dtype)), dtype);
}

class KernelPlan final : public LayerPlan<detail::DropoutArgs> {
 public:
  KernelPlan(const DropoutDesc& desc, Direction direction, const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc),
        direction_(direction),
        geometry_(detail::geometry_of(desc.dims, desc.layout)) {}

  void execute(const detail::DropoutArgs& args, detail::Workspace) override {
    const bool forward = direction_ != Direction::bwd_data;
    const Tensor* in = forward ? args.src : args.diff_dst;
    Tensor* out = forward ? args.dst : args.diff_src;
    const char* in_role = forward ? "src" : "diff_dst";
    const char* out_role = forward ? "dst" : "diff_src";
    check_dense_on_cpu(in, in_role, desc_.dims, desc_.dtype, desc_.layout, context_);
    check_dense_on_cpu(out, out_role, desc_.dims, desc_.dtype, desc_.layout, context_);
    const std::int64_t count = desc_.dims.product();
    if (direction_ == Direction::fwd) {
      if (count > 0)
        std::memcpy(data_of(out, out_role), data_of(in, in_role),
                    static_cast<std::size_t>(count) * size_of(desc_.dtype));
      return;
    }
    const std::size_t bytes = detail::mask_bits_bytes(count);
    if (const std::string problem =
            detail::mask_state_problem(args.state, detail::mask_bits_format, bytes, Device::cpu());
        !problem.empty()) {
      detail::raise(ErrorKind::InvalidArgument, problem, context_);
    }
    if (count == 0) return;
    const void* src = data_of(in, in_role);
    void* dst = data_of(out, out_role);
    auto* mask = static_cast<std::uint32_t*>(args.state->data());
    const bool draw = direction_ == Direction::fwd_training;
    const float scale = desc_.scale();
    const std::int64_t words = (count + 31) / 32;
    simd::parallel_blocks(words, count, [&](std::int64_t first, std::int64_t end) {
      for (std::int64_t word = first; word < end; ++word) {
        const std::int64_t start = word * 32;
        const std::int64_t stop = std::min(count, start + 32);
        std::uint32_t bits = 0;
        if (draw) {
          for (std::int64_t i = start; i < stop; i += 4) {
            const detail::random::Words drawn = detail::random::block_words(
                args.seed, args.offset + static_cast<std::uint64_t>(i / 4));
            for (std::int64_t k = 0; k < 4 && i + k < stop; ++k) {
              if (detail::random::keep(drawn.v[k], desc_.p))
                bits |= std::uint32_t{1} << (i + k - start);
            }
          }
          mask[word] = bits;
        } else {
          bits = mask[word];
        }
        for (std::int64_t i = start; i < stop; ++i) {
          const std::int64_t at = geometry_.offset(i);
          const bool kept = ((bits >> (i - start)) & 1u) != 0;
          detail::store_drawn(dst, at, desc_.dtype,
                              detail::random::mul(load(src, at, desc_.dtype), kept ? scale : 0.0f));
        }
      }
    });
  }

 private:
  DropoutDesc desc_;
  Direction direction_;
  detail::random::Geometry geometry_;
};

class DropoutBackend final : public LayerBackend<DropoutDesc, detail::DropoutArgs, Candidate> {
 public:
  explicit DropoutBackend(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cpu, std::move(runtime)) {}

 protected:
  std::vector<Candidate> enumerate(const DropoutDesc& desc, Direction direction) override {
    Candidate candidate{kernel_info_of(
        kernel_id, direction == Direction::fwd ? "copy (inference)"
                                               : "dnnx Philox mask loop (threaded, bit mask)")};
    candidate.info.notes = {"kernel", "philox"};
    if (direction == Direction::fwd_training) {
      candidate.info.saved_state_bytes = detail::mask_bits_bytes(desc.dims.product());
      candidate.info.saved_state_format = detail::mask_bits_format;
    } else if (direction == Direction::bwd_data) {
      candidate.info.saved_state_format = detail::mask_bits_format;
    }
    return {std::move(candidate)};
  }
  std::shared_ptr<detail::OpPlan<detail::DropoutArgs>> build(const DropoutDesc& desc,
                                                             Direction direction,
                                                             const Candidate& candidate) override {
    return std::make_shared<KernelPlan>(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::dropout>> make_dropout_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<DropoutBackend>(std::move(runtime));
}

}  // namespace dnnx::onednn
