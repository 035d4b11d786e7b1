// The cpu backend's tensor add: oneDNN's binary primitive forward, its reduction primitive
// backward; every implementation of every formulation is a candidate.
//
// Note [binary candidates]
// Forward, dst = alpha * broadcast(src) + beta * dst, has two formulations:
//   scaled_dst  binary_add(src0 = dst, src1 = src broadcast) with scales beta on src0 and alpha on
//               src1, written over src0 (in place). It reads dst, so beta = 0 would still turn a
//               NaN or Inf in dst into NaN (0 * NaN): unsupported then.
//   post_sum    binary_add(src0 = src, src1 = a zero scalar) with scale alpha on src0, and
//               beta * dst through the sum post-op; with beta = 0 there is no post-op and dst is
//               only written. oneDNN 3.2 broadcasts only src1, so src is described as a dst-shaped
//               tensor with stride 0 along the broadcast axes, which only its reference
//               implementation reads (jit ones too when nothing is broadcast).
// Backward, diff_src = alpha * sum of diff_dst over the broadcast axes:
//   matmul         products with a vector of ones (Note [bias gradients by matmul]);
//   reduction_sum  reduction (sum) from diff_dst to diff_src, alpha as an eltwise_linear post-op
//                  (oneDNN 3.2 has jit reductions over innermost axes in f32 only: bias gradients
//                  run on ref:any, some hundred times slower than matmul);
//   linear         without broadcast axes, eltwise_linear(alpha) (a reduction over nothing).
// Ids are "onednn:<impl>:<formulation>", listed per formulation in oneDNN's implementation order,
// ref:any implementations last; a formulation without any implementation is one unsupported
// "onednn:unavailable:<formulation>" candidate with oneDNN's message. Scales and post-ops are
// applied in f32 whatever the data type, so f16/bf16 results are rounded once. Every candidate is
// deterministic (Note [determinism] in conv_list.cpp); the parity test checks it bitwise.
//
// Note [f32-compute adds]
// f16/bf16 formulations whose native implementations are all ref:any or missing (oneDNN 3.2
// without avx512_core_fp16 / avx512_core: none at all) also run in f32 (Note [f32 compute] in
// layer_common.hpp): "onednn:<impl>:<formulation>:f32" converts src (and dst unless post_sum has
// beta = 0) or diff_dst to f32 in the workspace, runs the f32 primitive and converts dst or
// diff_src back. Its ref:any is listed only where the formulation has no native implementation at
// all (a native ref:any does the same work without the conversions). The matmul formulation in
// f32 needs no final reorder of its own: the conversion out writes diff_src.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/add_args.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

// A dense tensor of `dims` in the desc's layout.
memory::desc dense_md(const Dims& dims, const AddDesc& desc) {
  const Dims strides = dense_strides(dims, desc.layout);
  return memory::desc(memory::dims(dims.begin(), dims.end()), data_type_of(desc.dtype),
                      memory::dims(strides.begin(), strides.end()));
}

enum class Formulation : std::uint8_t { scaled_dst, post_sum, matmul, reduction_sum, linear };

std::string_view name_of(Formulation formulation) {
  switch (formulation) {
    case Formulation::scaled_dst: return "scaled_dst";
    case Formulation::post_sum: return "post_sum";
    case Formulation::matmul: return "matmul";
    case Formulation::reduction_sum: return "reduction_sum";
    case Formulation::linear: return "linear";
  }
  return "other";
}

// Note [bias gradients by matmul]
// Summing diff_dst over the broadcast axes is a product with a vector of ones, which oneDNN's
// matmul runs on its fast (brgemm) kernels in every dtype with f32 accumulation. In memory order
// the axes merge into groups that are all reduced (R) or all kept (K), and:
//   [R]         X(1 x R) . ones(R x 1)
//   [R, K]      ones(1 x R) . X(R x K)               e.g. a channels_last bias gradient
//   [K, R]      X(K x R) . ones(R x 1)
//   [K1, R, K2] ones(1 x R) . X(K1; R x K2)          batched over K1
//   [R1, K, R2] X(R1; K x R2) . ones(R2 x 1) into an f32 buffer T(R1; K) in the workspace, then
//               ones(1 x R1) . T(R1 x K)             e.g. a channels_first bias gradient
//               (for f16/bf16 into a second f32 buffer, reordered into diff_src: oneDNN 3.2 has no
//               f32 x f32 -> f16/bf16 matmul)
// diff_src is dense with the kept groups in the same order, so it is the product's output as is;
// alpha is an eltwise_linear post-op of the last product. More alternations are unsupported. The
// vectors of ones are held by the plan; the heavy product (the one reading diff_dst) names the
// candidate, the other one runs oneDNN's first implementation.
struct MatmulShape {
  std::string reason;    // why the pattern is not covered; empty when it is
  memory::desc a, b, c;  // the product reading diff_dst: a . b -> c
  bool diff_dst_is_a = true;
  std::int64_t ones = 0;  // length of the vector of ones of that product (desc.dtype)
  bool two_steps = false;
  memory::desc a2, b2, c2;  // the second product: ones(1 x R1) . T -> diff_src (f32 ones)
  std::int64_t ones2 = 0;
  std::size_t buffer_bytes = 0;  // T, f32
  bool convert = false;          // the second product writes f32, reordered into diff_src
  memory::desc result;           // diff_src as the reorder writes it
  std::size_t result_bytes = 0;  // the second product's f32 output before the reorder
};

MatmulShape matmul_shape(const AddDesc& desc) {
  // Merged groups in memory order (dense tensors of one layout share it; size-1 axes dropped).
  const int rank = desc.dst_dims.rank();
  std::vector<int> order;
  if (desc.layout == Layout::channels_last && rank >= 3) {
    order.push_back(0);
    for (int i = 2; i < rank; ++i) order.push_back(i);
    order.push_back(1);
  } else {
    for (int i = 0; i < rank; ++i) order.push_back(i);
  }
  std::vector<std::pair<std::int64_t, bool>> groups;  // size, reduced
  for (const int axis : order) {
    const std::int64_t size = desc.dst_dims[axis];
    if (size == 1) continue;
    const bool reduced = desc.src_dims[axis] == 1;
    if (!groups.empty() && groups.back().second == reduced) {
      groups.back().first *= size;
    } else {
      groups.emplace_back(size, reduced);
    }
  }
  MatmulShape m;
  const memory::data_type t = data_type_of(desc.dtype);
  const memory::data_type f32 = memory::data_type::f32;
  std::string pattern;
  for (const auto& [size, reduced] : groups) pattern += reduced ? 'R' : 'K';
  const auto md = [](const memory::dims& dims, memory::data_type type,
                     const memory::dims& strides) { return memory::desc(dims, type, strides); };
  if (pattern == "R") {
    const std::int64_t r = groups[0].first;
    m.a = md({1, r}, t, {r, 1});
    m.b = md({r, 1}, t, {1, 1});
    m.c = md({1, 1}, t, {1, 1});
    m.ones = r;
  } else if (pattern == "RK") {
    const std::int64_t r = groups[0].first, k = groups[1].first;
    m.a = md({1, r}, t, {r, 1});
    m.b = md({r, k}, t, {k, 1});
    m.c = md({1, k}, t, {k, 1});
    m.diff_dst_is_a = false;
    m.ones = r;
  } else if (pattern == "KR") {
    const std::int64_t k = groups[0].first, r = groups[1].first;
    m.a = md({k, r}, t, {r, 1});
    m.b = md({r, 1}, t, {1, 1});
    m.c = md({k, 1}, t, {1, 1});
    m.ones = r;
  } else if (pattern == "KRK") {
    const std::int64_t k1 = groups[0].first, r = groups[1].first, k2 = groups[2].first;
    m.a = md({1, 1, r}, t, {r, r, 1});
    m.b = md({k1, r, k2}, t, {r * k2, k2, 1});
    m.c = md({k1, 1, k2}, t, {k2, k2, 1});
    m.diff_dst_is_a = false;
    m.ones = r;
  } else if (pattern == "RKR") {
    const std::int64_t r1 = groups[0].first, k = groups[1].first, r2 = groups[2].first;
    m.a = md({r1, k, r2}, t, {k * r2, r2, 1});
    m.b = md({1, r2, 1}, t, {r2, 1, 1});
    m.c = md({r1, k, 1}, f32, {k, 1, 1});
    m.ones = r2;
    m.two_steps = true;
    m.a2 = md({1, r1}, f32, {r1, 1});
    m.b2 = md({r1, k}, f32, {k, 1});
    m.ones2 = r1;
    m.buffer_bytes = static_cast<std::size_t>(r1 * k) * sizeof(float);
    m.convert = desc.dtype != DType::f32;
    m.c2 = md({1, k}, m.convert ? f32 : t, {k, 1});
    if (m.convert) {
      m.result = md({1, k}, t, {k, 1});
      m.result_bytes = static_cast<std::size_t>(k) * sizeof(float);
    }
  } else if (pattern.find('R') == std::string::npos) {
    m.reason = "no broadcast axis: nothing to sum (the linear formulation scales diff_dst)";
  } else {
    m.reason =
        detail::cat("the broadcast axes of src ", desc.src_dims, " on dst ", desc.dst_dims,
                    " merge into the groups ", pattern,
                    " (R reduced, K kept, memory order); matmul covers R, RK, KR, KRK and RKR");
  }
  return m;
}

dnnl::primitive_attr matmul_attr(float alpha) {
  dnnl::primitive_attr attr = user_scratchpad();
  if (alpha != 1) {
    dnnl::post_ops ops;
    ops.append_eltwise(dnnl::algorithm::eltwise_linear, alpha, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// Note [binary candidates]: the formulations of (desc, direction) in priority order, with the
// reason dnnx rules one out (empty if it does not).
std::vector<std::pair<Formulation, std::string>> formulations(const AddDesc& desc,
                                                              Direction direction) {
  if (direction == Direction::fwd) {
    std::string scaled_dst_reason;
    if (desc.beta == 0) {
      scaled_dst_reason =
          "reads dst as binary source 0, so beta = 0 would still turn NaN or Inf in dst into NaN "
          "(post_sum does not read dst)";
    }
    return {{Formulation::scaled_dst, scaled_dst_reason}, {Formulation::post_sum, {}}};
  }
  std::vector<std::pair<Formulation, std::string>> list;
  if (desc.src_dims != desc.dst_dims)
    list.emplace_back(Formulation::matmul, matmul_shape(desc).reason);
  list.emplace_back(Formulation::reduction_sum, std::string());
  if (desc.src_dims == desc.dst_dims) list.emplace_back(Formulation::linear, std::string());
  return list;
}

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc pd;  // null if unsupported
  Formulation formulation = Formulation::scaled_dst;
  dnnl::primitive_desc second;        // matmul with two steps: the second product
  dnnl::primitive_desc_base convert;  // and, for f16/bf16, its f32 -> dtype reorder
  // f32 compute (Note [f32-compute adds]): the conversions around the primitives, which then run
  // on compute_desc(desc, true); null for native candidates.
  std::shared_ptr<const F32Conversion> conversion;
};

// The desc a candidate's primitives compute: `desc` itself, or its f32 twin for f32 compute.
AddDesc compute_desc(const AddDesc& desc, bool f32_compute) {
  AddDesc compute = desc;
  if (f32_compute) compute.dtype = DType::f32;
  return compute;
}

// The caller's tensors an f32-compute candidate converts (Note [f32-compute adds]), in the order
// its plan passes them: src then dst forward, diff_src then diff_dst backward.
std::vector<ConvertedTensor> converted_tensors(const AddDesc& desc, Direction direction,
                                               Formulation formulation) {
  const memory::desc src = dense_md(desc.src_dims, desc);
  const memory::desc dst = dense_md(desc.dst_dims, desc);
  if (direction == Direction::fwd) {
    const bool reads_dst = formulation == Formulation::scaled_dst || desc.beta != 0;
    return {{src, Access::read}, {dst, reads_dst ? Access::read_write : Access::write}};
  }
  return {{src, Access::write}, {dst, Access::read}};
}

// src read as a dst-shaped tensor: stride 0 along the broadcast axes (binary source 0 of
// post_sum; oneDNN 3.2 broadcasts only source 1, but its reference implementation reads any
// strides).
memory::desc broadcast_md(const AddDesc& desc) {
  Dims strides = dense_strides(desc.src_dims, desc.layout);
  for (int i = 0; i < strides.rank(); ++i) {
    if (desc.broadcasts(i)) strides[i] = 0;
  }
  return memory::desc(memory::dims(desc.dst_dims.begin(), desc.dst_dims.end()),
                      data_type_of(desc.dtype), memory::dims(strides.begin(), strides.end()));
}

// A scalar of 1s in every dim: binary source 1 of post_sum.
memory::desc scalar_md(const AddDesc& desc) {
  const memory::dims ones(static_cast<std::size_t>(desc.dst_dims.rank()), 1);
  return memory::desc(ones, data_type_of(desc.dtype), memory::dims(ones.size(), 1));
}

// The primitive descriptor of `formulation`, positioned at oneDNN's first implementation; null
// with `failure` set when oneDNN has none. Other oneDNN errors throw.
dnnl::primitive_desc create_pd(const dnnl::engine& engine, const AddDesc& desc,
                               Formulation formulation, const ErrorContext& context,
                               std::string& failure) {
  const memory::desc src = dense_md(desc.src_dims, desc);
  const memory::desc dst = dense_md(desc.dst_dims, desc);
  dnnl::primitive_attr attr = user_scratchpad();
  // oneDNN reports some combinations it cannot run as invalid arguments rather than
  // unimplemented (e.g. binary source 0 with a broadcast shape): both mean "no implementation".
  const auto create = [&]() -> dnnl::primitive_desc {
    switch (formulation) {
      case Formulation::scaled_dst:
        if (desc.beta != 1) attr.set_scales_mask(DNNL_ARG_SRC_0, 0);
        if (desc.alpha != 1) attr.set_scales_mask(DNNL_ARG_SRC_1, 0);
        return dnnl::binary::primitive_desc(engine, dnnl::algorithm::binary_add, dst, src, dst,
                                            attr);
      case Formulation::post_sum: {
        if (desc.alpha != 1) attr.set_scales_mask(DNNL_ARG_SRC_0, 0);
        if (desc.beta != 0) {
          dnnl::post_ops ops;
          ops.append_sum(desc.beta);
          attr.set_post_ops(ops);
        }
        return dnnl::binary::primitive_desc(engine, dnnl::algorithm::binary_add, broadcast_md(desc),
                                            scalar_md(desc), dst, attr);
      }
      case Formulation::matmul: {
        // The product reading diff_dst; with two steps alpha goes on the second.
        const MatmulShape m = matmul_shape(desc);
        if (!m.reason.empty()) {
          failure = m.reason;
          return {};
        }
        return dnnl::matmul::primitive_desc(engine, m.a, m.b, m.c,
                                            matmul_attr(m.two_steps ? 1.0f : desc.alpha));
      }
      case Formulation::reduction_sum:
        if (desc.alpha != 1) {
          dnnl::post_ops ops;
          ops.append_eltwise(dnnl::algorithm::eltwise_linear, desc.alpha, 0.0f);
          attr.set_post_ops(ops);
        }
        return dnnl::reduction::primitive_desc(engine, dnnl::algorithm::reduction_sum, dst, src,
                                               0.0f, 0.0f, attr);
      case Formulation::linear:
        return dnnl::eltwise_forward::primitive_desc(engine, dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::eltwise_linear, dst, src,
                                                     desc.alpha, 0.0f, attr);
    }
    return {};
  };
  return create_or_unavailable(create, detail::cat(name_of(formulation), " primitive descriptor"),
                               context, failure, Unavailable::unimplemented_or_invalid);
}

// Appends a candidate per implementation of `pd` (positioned at its first) of `formulation` on
// `compute` (desc, or its f32 twin when `conversion` is set; then without ref:any when
// `skip_reference`). `why` rules them all out when not empty. Returns how many were appended.
std::size_t append_implementations(std::vector<Candidate>& list, std::set<std::string>& seen,
                                   const dnnl::engine& engine, const AddDesc& compute,
                                   Formulation formulation, const std::string& why,
                                   dnnl::primitive_desc& pd,
                                   const std::shared_ptr<const F32Conversion>& conversion,
                                   bool skip_reference, const ErrorContext& context) {
  const std::size_t before = list.size();
  do {
    const std::string impl = sanitize(pd.impl_info_str());
    const bool reference = impl.starts_with("ref");
    if (conversion && skip_reference && reference) continue;
    Candidate candidate;
    candidate.formulation = formulation;
    candidate.info.id = detail::cat("onednn:", impl, ":", name_of(formulation),
                                    conversion ? f32_compute_suffix : "");
    if (!seen.insert(candidate.info.id).second) continue;
    candidate.info.name =
        detail::cat(impl, " (", name_of(formulation),
                    conversion ? detail::cat(", ", f32_compute_name) : std::string(), ")");
    candidate.info.deterministic = true;
    candidate.info.notes = {std::string(name_of(formulation))};
    if (conversion) candidate.info.notes.emplace_back(f32_compute_note);
    if (reference) {
      detail::mark_naive(candidate.info);
    }
    if (!why.empty()) {
      candidate.info.reason = why;
      list.push_back(std::move(candidate));
      continue;
    }
    candidate.pd = clone(pd, context);
    candidate.conversion = conversion;
    candidate.info.supported = true;
    candidate.info.workspace_bytes = pd.scratchpad_desc().get_size();
    if (formulation == Formulation::matmul) {
      if (contains(impl, "brg")) candidate.info.notes.emplace_back("brgemm");
      const MatmulShape m = matmul_shape(compute);
      if (m.two_steps) {
        candidate.second = dnnl_call(context, "creating the second matmul", [&] {
          return dnnl::primitive_desc(
              dnnl::matmul::primitive_desc(engine, m.a2, m.b2, m.c2, matmul_attr(compute.alpha)));
        });
        std::size_t scratch =
            std::max(candidate.info.workspace_bytes, candidate.second.scratchpad_desc().get_size());
        if (m.convert) {
          candidate.convert = dnnl_call(context, "creating the result reorder", [&] {
            return dnnl::primitive_desc_base(
                dnnl::reorder::primitive_desc(engine, m.c2, engine, m.result, user_scratchpad()));
          });
          scratch = std::max(scratch, candidate.convert.scratchpad_desc().get_size());
        }
        // Workspace: T, the f32 result (when converted), then the largest scratchpad.
        candidate.info.workspace_bytes =
            round_up(m.buffer_bytes) + round_up(m.result_bytes) + scratch;
      }
    }
    // Note [f32 compute]: the copies come first.
    if (conversion) candidate.info.workspace_bytes += conversion->bytes();
    list.push_back(std::move(candidate));
  } while (pd.next_impl());
  return list.size() - before;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const AddDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = detail::op_context(BackendKind::cpu, desc, direction);
  std::vector<Candidate> list;
  std::set<std::string> seen;
  for (const auto& [formulation, why] : formulations(desc, direction)) {
    std::string failure;
    std::size_t listed = 0;
    bool native_fast = false;  // a native implementation other than ref:any
    dnnl::primitive_desc pd = create_pd(engine, desc, formulation, context, failure);
    if (pd) {
      const std::size_t first = list.size();
      listed += append_implementations(list, seen, engine, desc, formulation, why, pd, nullptr,
                                       false, context);
      native_fast = std::any_of(list.begin() + static_cast<std::ptrdiff_t>(first), list.end(),
                                [](const Candidate& c) { return !c.info.naive; });
    }
    // Note [f32-compute adds]
    if (desc.dtype != DType::f32 && !native_fast) {
      const AddDesc f32 = compute_desc(desc, true);
      std::string f32_failure;
      dnnl::primitive_desc f32_pd = create_pd(engine, f32, formulation, context, f32_failure);
      if (f32_pd) {
        listed += append_implementations(
            list, seen, engine, f32, formulation, why, f32_pd,
            std::make_shared<const F32Conversion>(converted_tensors(desc, direction, formulation)),
            listed > 0, context);
      } else if (f32_failure != failure) {
        failure = detail::cat(failure, "; in f32 (", f32_compute_name, "): ", f32_failure);
      }
    }
    if (listed > 0) continue;
    Candidate candidate;
    candidate.formulation = formulation;
    candidate.info =
        unavailable_info(name_of(formulation), why,
                         detail::cat("add ", to_string(direction), " ", to_string(desc.dtype), ' ',
                                     to_string(desc.layout)),
                         isa, failure);
    list.push_back(std::move(candidate));
  }
  order_supported_first(list);
  return list;
}

// Runs one binary, reduction or eltwise primitive on the caller's memory, or on f32 copies of it
// (Note [f32-compute adds]). Built once; execute() only rebinds pointers (Note [one stream] in
// runtime.hpp).
class Plan final : public LayerPlan<detail::AddArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const AddDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        direction_(direction) {
    const dnnl::engine& engine = runtime_->engine;
    const AddDesc compute = compute_desc(desc, candidate.conversion != nullptr);
    const memory::desc src = candidate.formulation == Formulation::post_sum
                                 ? broadcast_md(compute)
                                 : dense_md(compute.src_dims, compute);
    const memory::desc dst = dense_md(compute.dst_dims, compute);
    const memory::desc scale = memory::desc({1}, memory::data_type::f32, memory::dims{1});
    dnnl_call(context_, "building the primitive", [&] {
      if (candidate.conversion) conversions_ = F32Conversions(candidate.conversion);
      primitive_ = dnnl::primitive(candidate.pd.get());
      src_ = dnnl::memory(src, engine, DNNL_MEMORY_NONE);
      dst_ = dnnl::memory(dst, engine, DNNL_MEMORY_NONE);
      const memory::desc scratchpad = candidate.pd.scratchpad_desc();
      if (scratchpad.get_size() > 0)
        scratchpad_ = dnnl::memory(scratchpad, engine, DNNL_MEMORY_NONE);
      switch (candidate.formulation) {
        case Formulation::scaled_dst:
          args_ = {{DNNL_ARG_SRC_0, dst_.get()},
                   {DNNL_ARG_SRC_1, src_.get()},
                   {DNNL_ARG_DST, dst_.get()}};
          if (desc.beta != 1) add_scale(DNNL_ARG_SRC_0, desc.beta, scale, engine);
          if (desc.alpha != 1) add_scale(DNNL_ARG_SRC_1, desc.alpha, scale, engine);
          break;
        case Formulation::post_sum:
          zero_ = dnnl::memory(scalar_md(compute), engine, zero_bytes_.data());
          args_ = {{DNNL_ARG_SRC_0, src_.get()},
                   {DNNL_ARG_SRC_1, zero_.get()},
                   {DNNL_ARG_DST, dst_.get()}};
          if (desc.alpha != 1) add_scale(DNNL_ARG_SRC_0, desc.alpha, scale, engine);
          break;
        case Formulation::matmul: DNNX_ASSERT(false, "matmul candidates run as MatmulPlan"); break;
        case Formulation::reduction_sum:
        case Formulation::linear:
          // Backward: dst_ is bound to diff_dst, src_ to diff_src.
          args_ = {{DNNL_ARG_SRC, dst_.get()}, {DNNL_ARG_DST, src_.get()}};
          break;
      }
      if (scratchpad_) args_.push_back({DNNL_ARG_SCRATCHPAD, scratchpad_.get()});
    });
  }

  void execute(const detail::AddArgs& args, detail::Workspace workspace) override {
    void* src = nullptr;
    void* dst = nullptr;
    if (direction_ == Direction::fwd) {
      src = data_of(args.src, "src");
      dst = data_of(args.dst, "dst");
    } else {
      src = data_of(args.diff_src, "diff_src");
      dst = data_of(args.diff_dst, "diff_dst");
    }
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    if (conversions_) conversions_.use_copies(base, src, dst);
    bind(src_, src);
    bind(dst_, dst);
    if (scratchpad_) bind(scratchpad_, base + conversions_.bytes());
    DNNX_DNNL_CHECK(dnnl_primitive_execute(primitive_.get(), stream, static_cast<int>(args_.size()),
                                           args_.data()),
                    context_, "executing");
    if (conversions_) conversions_.convert_out(base, stream, context_);
    wait(stream, context_);
  }

 private:
  // A runtime scale of one f32 value, held by the plan.
  void add_scale(int arg, float value, const memory::desc& md, const dnnl::engine& engine) {
    const std::size_t slot = scale_count_++;
    scale_values_[slot] = value;
    scales_[slot] = dnnl::memory(md, engine, &scale_values_[slot]);
    args_.push_back({DNNL_ARG_ATTR_SCALES | arg, scales_[slot].get()});
  }

  std::shared_ptr<Runtime> runtime_;
  Direction direction_;
  F32Conversions conversions_;
  dnnl::primitive primitive_;
  dnnl::memory src_, dst_, scratchpad_, zero_;
  std::array<float, 2> scale_values_{};
  std::array<dnnl::memory, 2> scales_;
  std::size_t scale_count_ = 0;
  alignas(64) std::array<std::byte, 8> zero_bytes_{};  // 0 in f32, f16 and bf16 alike
  std::vector<dnnl_exec_arg_t> args_;
};

// Note [bias gradients by matmul]: one or two matmul primitives against the plan's vectors of
// ones, on the caller's memory or on f32 copies of it (Note [f32-compute adds]); built once,
// execute() only rebinds pointers (Note [one stream] in runtime.hpp).
class MatmulPlan final : public LayerPlan<detail::AddArgs> {
 public:
  MatmulPlan(std::shared_ptr<Runtime> runtime, const AddDesc& desc, const Candidate& candidate)
      : LayerPlan(candidate.info, detail::op_context(BackendKind::cpu, desc, Direction::bwd_data,
                                                     candidate.info.id)),
        runtime_(std::move(runtime)) {
    const AddDesc compute = compute_desc(desc, candidate.conversion != nullptr);
    const MatmulShape m = matmul_shape(compute);
    DNNX_ASSERT(m.reason.empty(), m.reason);
    const dnnl::engine& engine = runtime_->engine;
    ones_ = ones(m.ones, compute.dtype);
    dnnl_call(context_, "building the matmul primitives", [&] {
      if (candidate.conversion) conversions_ = F32Conversions(candidate.conversion);
      diff_dst_ = dnnl::memory(m.diff_dst_is_a ? m.a : m.b, engine, DNNL_MEMORY_NONE);
      ones_memory_ = dnnl::memory(m.diff_dst_is_a ? m.b : m.a, engine, ones_.data());
      output_ = dnnl::memory(m.c, engine, DNNL_MEMORY_NONE);
      first_ = make_step(candidate.pd,
                         {{m.diff_dst_is_a ? DNNL_ARG_SRC : DNNL_ARG_WEIGHTS, diff_dst_.get()},
                          {m.diff_dst_is_a ? DNNL_ARG_WEIGHTS : DNNL_ARG_SRC, ones_memory_.get()},
                          {DNNL_ARG_DST, output_.get()}},
                         engine);
      if (m.two_steps) {
        // output_ is T in the workspace; the second product writes diff_src.
        ones2_ = ones(m.ones2, DType::f32);
        buffer_offset_ = 0;
        scratch_offset_ = round_up(m.buffer_bytes);
        ones2_memory_ = dnnl::memory(m.a2, engine, ones2_.data());
        buffer_ = dnnl::memory(m.b2, engine, DNNL_MEMORY_NONE);
        diff_src_ = dnnl::memory(m.c2, engine, DNNL_MEMORY_NONE);
        second_ = make_step(candidate.second,
                            {{DNNL_ARG_SRC, ones2_memory_.get()},
                             {DNNL_ARG_WEIGHTS, buffer_.get()},
                             {DNNL_ARG_DST, diff_src_.get()}},
                            engine);
        if (m.convert) {
          // diff_src_ is then the f32 result in the workspace, reordered into the caller's.
          result_offset_ = round_up(m.buffer_bytes);
          scratch_offset_ = result_offset_ + round_up(m.result_bytes);
          converted_ = dnnl::memory(m.result, engine, DNNL_MEMORY_NONE);
          third_ = make_step(candidate.convert,
                             {{DNNL_ARG_FROM, diff_src_.get()}, {DNNL_ARG_TO, converted_.get()}},
                             engine);
        }
      }
    });
  }

  void execute(const detail::AddArgs& args, detail::Workspace workspace) override {
    if (args.diff_dst == nullptr || args.diff_dst->data() == nullptr || args.diff_src == nullptr ||
        args.diff_src->data() == nullptr) {
      detail::raise(ErrorKind::InvalidArgument, "diff_dst or diff_src is null", context_);
    }
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    void* diff_src = args.diff_src->data();
    void* diff_dst = args.diff_dst->data();
    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    if (conversions_) {
      conversions_.use_copies(base, diff_src, diff_dst);
      base += conversions_.bytes();
    }
    bind(diff_dst_, diff_dst);
    if (second_.primitive) {
      bind(output_, base + buffer_offset_);
      bind(buffer_, base + buffer_offset_);
      if (third_.primitive) {
        bind(diff_src_, base + result_offset_);
        bind(converted_, diff_src);
      } else {
        bind(diff_src_, diff_src);
      }
    } else {
      bind(output_, diff_src);
    }
    for (Step* step : {&first_, &second_, &third_}) {
      if (step->primitive) run_step(*step, stream, base + scratch_offset_, context_);
    }
    if (conversions_) {
      conversions_.convert_out(static_cast<std::byte*>(workspace.data), stream, context_);
    }
    wait(stream, context_);
  }

 private:
  // `count` ones in `dtype`.
  static std::vector<std::byte> ones(std::int64_t count, DType dtype) {
    const std::size_t size = size_of(dtype);
    std::vector<std::byte> bytes(static_cast<std::size_t>(count) * size);
    for (std::int64_t i = 0; i < count; ++i)
      detail::store_f32(bytes.data() + static_cast<std::size_t>(i) * size, dtype, 1.0f);
    return bytes;
  }

  std::shared_ptr<Runtime> runtime_;
  F32Conversions conversions_;
  std::vector<std::byte> ones_, ones2_;
  Step first_, second_, third_;
  dnnl::memory diff_dst_, ones_memory_, output_, ones2_memory_, buffer_, diff_src_, converted_;
  std::size_t buffer_offset_ = 0;
  std::size_t result_offset_ = 0;
  std::size_t scratch_offset_ = 0;
};

class OneDnnAdd final
    : public ListedLayerBackend<AddDesc, detail::AddArgs, Candidate, list_candidates, Plan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<detail::AddArgs>> build(const AddDesc& desc, Direction direction,
                                                         const Candidate& candidate) override {
    if (candidate.formulation == Formulation::matmul)
      return std::make_shared<MatmulPlan>(runtime_, desc, candidate);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::add>> make_add_backend(std::shared_ptr<Runtime> runtime,
                                                                   const detail::OpBackends&) {
  return std::make_unique<OneDnnAdd>(std::move(runtime));
}

}  // namespace dnnx::onednn
