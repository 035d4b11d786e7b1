// Note [stacked folds]
// A 3-tap kernel of dilation d with padding d on both sides (the "same" dilated convolution of
// DeepLab's backbones and ASPP) over a dim of size H <= 2d reads real input with at most two of
// its taps at each output o: for o < d tap 0 reads o - d < 0, for o >= d tap 2 reads
// o + d >= 2d >= H, both padding. The two halves read the same pairs of inputs (i, i + d): the
// first at i = o under taps 1 and 2, the second at i = o - d under taps 0 and 1. So one 2-tap
// convolution of dilation d over the input padded by 2d - H after (d outputs), whose output
// channels hold both weight sets, gives both halves: its positions [0, d) of the first set are
// outputs [0, d), its positions [0, H - d) of the second set are outputs [d, H), and its second
// set's positions [H - d, d) are computed and dropped. That is 4d / 3H of the products per such
// dim (0.74 for DeepLabV3's ASPP rate 36 on 65x65, 0.55 over both dims) where cuDNN's engines
// compute all of them, 60% of them on padding there. Where d >= H (a larger rate, or a smaller
// map) only the center tap of an odd kernel reaches the input at all: a 1-tap kernel, 1/k of the
// products. Each dim is thus whole, stacked or center (StackedDim); the weight sets are the
// products of the dims' sets (4 where two dims are stacked), set s on the inner convolution's
// output channels [s K, (s + 1) K). stacked_form() takes an ungrouped convolution with some dim
// stacked or center and its inner products at most stacked_work_max (0.8) of its own.
// The padding after is a copy: the inner convolution reads the input from a buffer of 2d per
// stacked dim (H, then 2d - H zeros), unpadded. Asked for the padding after alone, cuDNN's
// engines ran the inner convolution of DeepLabV3's rate 36 in f16 no faster than the whole one
// (1.4 ms, none of them chosen) where, unpadded over a copy, the fastest took 0.74 ms (on an H200:
// docs/benchmarks.md, "Stacked folds"); the copy is one pass over the input. Where no dim needs
// padding (center dims, or H = 2d) the inner convolution reads the caller's input as it lies.
// The plan runs the inner convolution (a candidate of it: Note [fold candidates] in
// conv_folds.cpp) with the sets' weights, its dst and the padded input in its workspace:
//   fwd          each set's taps copied into the stacked weights, the input into the padded
//                buffer (its padding zeroed), the inner forward into the stacked dst, each set's
//                real positions copied to their box of dst (the boxes tile dst);
//   bwd_data     the stacked weights as for fwd; the stacked diff_dst zeroed where a set has
//                positions past its outputs, each set's box of diff_dst copied in; the inner
//                backward data into diff_src, or into the padded buffer and its first H copied
//                out;
//   bwd_weights  the padded input and the stacked diff_dst as above; the inner backward weights
//                into the stacked weights' buffer; diff_weights zeroed and each set's gradient
//                added into its taps, in set order.
// The copies are dnnx's box-copy kernels (kernels/channel_pad.hpp; the padded input's zeros
// written in the same pass): through cudnnTransformTensor on strided views and cudnnSetTensor
// the same fp32 forward took 17.9 ms, 8.6 ms with them. Results are the convolution's sums less
// their products with padding, in another order; an f16 / bf16 weight gradient is rounded once
// more per further set that holds a tap (a stacked dim's middle tap is in both of its sets).
// Determinism is the inner candidate's.

#include "backends/cudnn/conv_stacked.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/kernels/channel_pad.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

// The treatment of desc's spatial dim i.
StackedDim dim_treatment(const ConvDesc& desc, int i) {
  const auto s = static_cast<std::size_t>(i);
  const std::int64_t k = desc.kernel[s], d = desc.dilation[s], h = desc.input[s];
  if (desc.stride[s] != 1 || k % 2 == 0 || k == 1) return StackedDim::whole;
  const std::int64_t half = d * (k - 1) / 2;
  if (desc.pad_before[s] != half || desc.pad_after[s] != half) return StackedDim::whole;
  if (h <= d) return StackedDim::center;
  if (k == 3 && h <= 2 * d) return StackedDim::stacked;
  return StackedDim::whole;
}

namespace box = kernels::channel_pad;

// Geometry-space values of a tensor of g (dims, an origin or extents: N or O, C, spatial) in the
// memory order of `layout` (channels_last: N, spatial, C; weights alike), as the copy kernels take
// them: five axes, outermost first, leading axes of `fill`.
box::Box in_memory_order(const Geometry& g, Layout layout,
                         const std::array<std::int64_t, 5>& values, std::int64_t fill = 1) {
  const auto n = static_cast<std::size_t>(g.nb_dims);
  std::array<std::size_t, 5> order{0, 1, 2, 3, 4};
  if (layout == Layout::channels_last) {
    for (std::size_t i = 1; i + 1 < n; ++i) order[i] = i + 1;
    order[n - 1] = 1;
  }
  box::Box out;
  for (std::size_t i = 0; i < 5 - n; ++i) out.dims[i] = fill;
  for (std::size_t i = 0; i < n; ++i) out.dims[5 - n + i] = values[order[i]];
  return out;
}

// A region of a tensor of g: its dims and the origin, in memory order.
box::Region region(const Geometry& g, Layout layout, const std::array<std::int64_t, 5>& dims,
                   const std::array<std::int64_t, 5>& origin) {
  box::Region r;
  r.dims = in_memory_order(g, layout, dims);
  const box::Box at = in_memory_order(g, layout, origin, 0);
  for (int i = 0; i < 5; ++i) r.origin[i] = at.dims[i];
  return r;
}

box::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return box::Element::f16;
    case DType::bf16: return box::Element::bf16;
    default: return box::Element::f32;
  }
}

// One set of one dim: its first tap, its outputs, the first of them.
struct DimSet {
  std::int64_t tap_first, outputs, out_begin;
};

class StackedPlan final : public detail::ConvPlan {
 public:
  StackedPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, const StackedForm& form,
              Direction direction, const AlgoInfo& info, std::shared_ptr<detail::ConvPlan> inner)
      : runtime_(std::move(runtime)),
        desc_(desc),
        inner_desc_(form.inner),
        direction_(direction),
        inner_(std::move(inner)),
        info_(info),
        context_(conv_context(desc, direction, info.id)) {
    const Geometry whole = conv_geometry(desc);
    const Geometry stacked = conv_geometry(form.inner);
    const Layout layout = desc.layout;
    const std::int64_t k = desc.out_channels;
    for (std::size_t s = 0; s < form.sets.size(); ++s) {
      const StackedSet& set = form.sets[s];
      std::array<std::int64_t, 5> taps = stacked.weights, box = stacked.dst;
      std::array<std::int64_t, 5> taps_at{}, box_at{}, stacked_taps_at{}, stacked_box_at{};
      taps[0] = k;
      box[1] = k;
      stacked_taps_at[0] = static_cast<std::int64_t>(s) * k;
      stacked_box_at[1] = static_cast<std::int64_t>(s) * k;
      for (int i = 0; i < desc.spatial_dims; ++i) {
        const auto d = static_cast<std::size_t>(i);
        const std::size_t at = geometry_dim(desc, i);
        box[at] = set.outputs[d];
        taps_at[at] = set.tap_first[d];
        box_at[at] = set.out_begin[d];
        zero_stacked_dst_ |= set.outputs[d] < form.inner.output_size(i);
      }
      Copy copy;
      copy.taps = in_memory_order(whole, layout, taps);
      copy.weights = region(whole, layout, whole.weights, taps_at);
      copy.stacked_weights = region(whole, layout, stacked.weights, stacked_taps_at);
      copy.box = in_memory_order(whole, layout, box);
      copy.dst = region(whole, layout, whole.dst, box_at);
      copy.stacked_dst = region(whole, layout, stacked.dst, stacked_box_at);
      copies_.push_back(copy);
    }
    copied_ = stacked_input_copied(form);
    x_box_ = in_memory_order(whole, layout, whole.src);
    padded_box_ = in_memory_order(whole, layout, stacked.src);
    const std::size_t element = size_of(desc.dtype);
    auto bytes = [&](const Geometry& g, const std::array<std::int64_t, 5>& dims) {
      return static_cast<std::size_t>(elements_of(g, dims)) * element;
    };
    dst_bytes_ = bytes(stacked, stacked.dst);
    whole_weights_bytes_ = bytes(whole, whole.weights);
    weights_at_ = workspace_aligned(inner_->algo().workspace_bytes);
    dst_at_ = weights_at_ + workspace_aligned(bytes(stacked, stacked.weights));
    src_at_ = dst_at_ + workspace_aligned(dst_bytes_);
    const std::size_t needed = src_at_ + (copied_ ? bytes(stacked, stacked.src) : 0);
    if (info_.workspace_bytes < needed) {
      detail::raise(ErrorKind::BackendFailure,
                    detail::cat("the listed workspace (", info_.workspace_bytes,
                                " bytes) is less than the plan's (", needed, ")"),
                    context_);
    }
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    std::byte* const base =
        carved_workspace(workspace, info_.workspace_bytes, "stacked plans", context_);
    runtime_->make_current();
    const cudaStream_t stream = runtime_->stream();
    const auto element = static_cast<int>(size_of(desc_.dtype));
    std::byte* stacked_weights = base + weights_at_;
    std::byte* stacked_dst = base + dst_at_;
    const TensorRoles roles = tensor_roles(t, direction_);
    const bool fwd = direction_ == Direction::fwd, data = direction_ == Direction::bwd_data;
    const void* x = roles.x;
    const void* y = roles.y;
    const void* w = roles.w;
    auto check = [&](cudaError_t status, const char* what) {
      DNNX_CUDNN_CHECK(status, context_, what);
    };
    void* inner_x = const_cast<void*>(x);
    if (copied_) {  // the input padded by its copy (Note [stacked folds])
      inner_x = base + src_at_;
      if (!data) {
        check(box::copy(x, x_box_, inner_x, padded_box_, element, stream),
              "copying the input into its padded buffer");
      }
    }
    if (direction_ != Direction::bwd_weights) {
      for (const Copy& c : copies_) {
        check(box::copy_region(w, c.weights, stacked_weights, c.stacked_weights, c.taps, element,
                               stream),
              "copying a set's taps");
      }
    }
    if (!fwd) {
      if (zero_stacked_dst_) {
        check(cudaMemsetAsync(stacked_dst, 0, dst_bytes_, stream),
              "zeroing the stacked output gradient");
      }
      for (const Copy& c : copies_) {
        check(box::copy_region(y, c.dst, stacked_dst, c.stacked_dst, c.box, element, stream),
              "copying a set's box of the output gradient");
      }
    }
    const Device device = (args.src != nullptr ? args.src : args.diff_dst)->device();
    execute_at(*inner_, inner_desc_, direction_, {inner_x, stacked_dst, stacked_weights}, device,
               base);
    if (fwd) {
      for (const Copy& c : copies_) {
        check(box::copy_region(stacked_dst, c.stacked_dst, t.output, c.dst, c.box, element, stream),
              "writing a set's box of the output");
      }
    } else if (data) {
      if (copied_) {
        check(box::copy(inner_x, padded_box_, t.output, x_box_, element, stream),
              "copying the input gradient out of its padded buffer");
      }
    } else {
      check(cudaMemsetAsync(t.output, 0, whole_weights_bytes_, stream),
            "zeroing the weight gradient");
      for (const Copy& c : copies_) {
        check(box::add_region(stacked_weights, c.stacked_weights, t.output, c.weights, c.taps,
                              element_of(desc_.dtype), stream),
              "adding a set's weight gradient into its taps");
      }
    }
  }

 private:
  // One set's copies, in memory order: its taps (extents `taps`) between the whole weights and
  // the stacked ones, its box of outputs (extents `box`) between the whole dst and the stacked
  // one.
  struct Copy {
    box::Box taps, box;
    box::Region weights, stacked_weights, dst, stacked_dst;
  };

  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_, inner_desc_;
  Direction direction_;
  std::shared_ptr<detail::ConvPlan> inner_;
  AlgoInfo info_;
  ErrorContext context_;
  std::vector<Copy> copies_;
  // Where the inner convolution reads a padded copy of the input: the caller's src / diff_src
  // and the copy, in memory order.
  bool copied_ = false;
  box::Box x_box_, padded_box_;
  bool zero_stacked_dst_ = false;
  std::size_t dst_bytes_ = 0, whole_weights_bytes_ = 0;
  std::size_t weights_at_ = 0, dst_at_ = 0, src_at_ = 0;
};

}  // namespace

std::optional<StackedForm> stacked_form(const ConvDesc& desc, std::string& why) {
  if (desc.groups != 1) {
    why = "a grouped convolution";
    return std::nullopt;
  }
  StackedForm form;
  form.inner = desc;
  form.outer_input = desc.input;
  std::vector<std::vector<DimSet>> per_dim;
  bool any = false;
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const StackedDim treatment = dim_treatment(desc, i);
    form.dims[s] = treatment;
    const std::int64_t k = desc.kernel[s], d = desc.dilation[s], h = desc.input[s];
    switch (treatment) {
      case StackedDim::whole: per_dim.push_back({{0, desc.output_size(i), 0}}); break;
      case StackedDim::stacked:
        any = true;
        form.inner.kernel[s] = 2;
        form.inner.input[s] = 2 * d;  // the padding after, copied (Note [stacked folds])
        form.inner.pad_before[s] = form.inner.pad_after[s] = 0;
        form.work *= 4.0 * static_cast<double>(d) / (3.0 * static_cast<double>(h));
        per_dim.push_back({{1, d, 0}, {0, h - d, d}});
        break;
      case StackedDim::center:
        any = true;
        form.inner.kernel[s] = 1;
        form.inner.pad_before[s] = form.inner.pad_after[s] = 0;
        form.inner.dilation[s] = 1;
        form.work /= static_cast<double>(k);
        per_dim.push_back({{(k - 1) / 2, h, 0}});
        break;
    }
  }
  if (!any) {
    why =
        "no dim whose dilated taps mostly read padding (an odd kernel of stride 1, padded by "
        "dilation x (kernel - 1) / 2 on both sides, over a size of at most 2 x dilation for a "
        "3-tap kernel or at most the dilation for any)";
    return std::nullopt;
  }
  if (form.work > stacked_work_max) {
    why = detail::cat("the stacked form computes ", form.work, " of the products, over ",
                      stacked_work_max);
    return std::nullopt;
  }
  // The sets: every combination of the dims' sets, the first dim's slowest.
  form.sets.emplace_back();
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    std::vector<StackedSet> next;
    for (const StackedSet& set : form.sets) {
      for (const DimSet& part : per_dim[s]) {
        StackedSet grown = set;
        grown.tap_first[s] = part.tap_first;
        grown.outputs[s] = part.outputs;
        grown.out_begin[s] = part.out_begin;
        next.push_back(grown);
      }
    }
    form.sets = std::move(next);
  }
  form.inner.out_channels = desc.out_channels * static_cast<std::int64_t>(form.sets.size());
  form.inner.validate();
  return form;
}

bool stacked_input_copied(const StackedForm& form) {
  for (std::size_t s = 0; s < 3; ++s) {
    if (form.dims[s] == StackedDim::stacked && form.inner.input[s] != form.outer_input[s])
      return true;
  }
  return false;
}

std::size_t stacked_buffers_bytes(const StackedForm& form) {
  const Geometry g = conv_geometry(form.inner);
  const std::size_t element = size_of(form.inner.dtype);
  auto bytes = [&](const std::array<std::int64_t, 5>& dims) {
    return workspace_aligned(static_cast<std::size_t>(elements_of(g, dims)) * element);
  };
  return bytes(g.weights) + bytes(g.dst) + (stacked_input_copied(form) ? bytes(g.src) : 0);
}

std::shared_ptr<detail::ConvPlan> make_stacked_plan(std::shared_ptr<Runtime> runtime,
                                                    const ConvDesc& desc, const StackedForm& form,
                                                    Direction direction, const AlgoInfo& info,
                                                    std::shared_ptr<detail::ConvPlan> inner) {
  return std::make_shared<StackedPlan>(std::move(runtime), desc, form, direction, info,
                                       std::move(inner));
}

}  // namespace dnnx::cudnn
