// The cpu backend's matrix multiply: oneDNN's matmul and inner-product primitives; every
// implementation of each is a candidate.
//
// Note [matmul formulations]
// Every direction is one product X . Y -> Z of row-major matrices, batched, which oneDNN's matmul
// takes with any strides, so transposed operands are described as strided views and nothing is
// copied. Z is always the direction's output, dense as the caller holds it; where that output is
// stored transposed, the product is turned around ((P Q)^T = Q^T P^T):
//   fwd:          dst            = op(a) . op(b)            (+ bias, + beta * dst)
//   bwd_data:     diff_a         = diff_dst . op(b)^T       (transpose_a: op(b) . diff_dst^T)
//   bwd_weights:  diff_b         = op(a)^T . diff_dst       (transpose_b: diff_dst^T . op(a))
// A b shared by the batch (broadcast_b) is a batch dim of 1, which oneDNN broadcasts; its
// gradient sums over the batch, so there the batch is folded into the reduction: a as one
// (batch * m) x k matrix, which it is in memory unless transpose_a, where a reorder first copies
// it so into the workspace. A shared a (broadcast_a) is broadcast the same way; its gradient
// (bwd_data) folds the batch into the reduction too: diff_dst as one m x (batch * n) matrix and
// op(b)^T as one (batch * n) x k matrix, which reorders copy them into (diff_dst always; b unless
// transpose_b, where it already is that matrix); with transpose_a the product is turned around
// on the same copies. alpha is a runtime scale of the product's first operand, beta the
// sum post-op (absent for beta = 0: the output is then only written). The bias gradient is a
// column sum of diff_dst, run by the plan after the product (f32 accumulation).
//   inner_product  a linear layer as oneDNN's inner product (batch 1, a not transposed, b
//                  transposed, alpha 1; the backward ones with beta 0, since oneDNN's backward
//                  primitives take no post-ops). Its backward weights computes the bias gradient
//                  itself.
// Ids are "onednn:<impl>:<formulation>"; f16/bf16 descs also list every implementation of the
// same product in f32 (Note [f32 compute] in layer_common.hpp), "onednn:<impl>:<formulation>:f32":
// oneDNN 3.2 has no f16 matmul without avx512_core_fp16. A formulation without any implementation
// is one unsupported "onednn:unavailable:<formulation>" with oneDNN's message. Every candidate is
// deterministic (Note [determinism] in conv_list.cpp); the parity test checks it bitwise.

#include "backends/onednn/check.hpp"
#include "backends/onednn/convert.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/matmul_activation.hpp"
#include "core/matmul_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

enum class Formulation : std::uint8_t { matmul, inner_product };

std::string_view name_of(Formulation formulation) {
  return formulation == Formulation::matmul ? "matmul" : "inner_product";
}

// The caller's tensors of a direction, in the order plans bind and convert them:
//   fwd: a, b, dst[, bias]   bwd_data: diff_dst, b, diff_a   bwd_weights: a, diff_dst, diff_b
// (the bias gradient reads diff_dst itself).
enum Slot : std::size_t { first = 0, second = 1, output = 2, bias_slot = 3 };

// A row-major batch x rows x cols matrix with element strides (batch, row, col), in `type`.
memory::desc matrix(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                    memory::data_type type, std::int64_t batch_stride, std::int64_t row_stride,
                    std::int64_t col_stride) {
  return memory::desc({batch, rows, cols}, type, {batch_stride, row_stride, col_stride});
}

// Note [matmul formulations]: one product src . weights -> dst, each bound to a slot.
struct Product {
  memory::desc src, weights, dst, bias;  // bias: only when has_bias
  bool has_bias = false;
  Slot src_slot = first, weights_slot = second;
  // Slots copied before the product (bwd_weights of a broadcast b with transpose_a: a;
  // bwd_data of a broadcast a: diff_dst and maybe b): each reordered from `from` (a strided view
  // of the slot) into a dense copy `to` in the workspace, which the operand reading that slot
  // (src or weights) then reads.
  struct Copy {
    Slot slot = first;
    memory::desc from, to;
  };
  std::vector<Copy> copies;
};

Product product_of(const MatmulDesc& d, Direction direction, memory::data_type t) {
  const std::int64_t B = d.batch, m = d.m, n = d.n, k = d.k;
  const std::int64_t ab = d.broadcast_a ? 1 : B;
  const std::int64_t ab_stride = d.broadcast_a ? 0 : m * k;
  const std::int64_t bb = d.broadcast_b ? 1 : B;
  const std::int64_t bb_stride = d.broadcast_b ? 0 : k * n;
  // op(a) (m x k), op(b) (k x n), dst / diff_dst (m x n) as stored, and their transposes.
  const auto op_a = [&] {
    return d.transpose_a ? matrix(ab, m, k, t, ab_stride, 1, m)
                         : matrix(ab, m, k, t, ab_stride, k, 1);
  };
  const auto op_a_t = [&] {
    return d.transpose_a ? matrix(ab, k, m, t, ab_stride, m, 1)
                         : matrix(ab, k, m, t, ab_stride, 1, k);
  };
  const auto op_b = [&] {
    return d.transpose_b ? matrix(bb, k, n, t, bb_stride, 1, k)
                         : matrix(bb, k, n, t, bb_stride, n, 1);
  };
  const auto op_b_t = [&] {
    return d.transpose_b ? matrix(bb, n, k, t, bb_stride, k, 1)
                         : matrix(bb, n, k, t, bb_stride, 1, n);
  };
  const auto g = [&] { return matrix(B, m, n, t, m * n, n, 1); };
  const auto g_t = [&] { return matrix(B, n, m, t, m * n, 1, n); };
  Product p;
  switch (direction) {
    case Direction::fwd:
      p.src = op_a(), p.weights = op_b(), p.dst = g();
      p.src_slot = first, p.weights_slot = second;
      if (d.bias) {
        p.bias = memory::desc({1, 1, n}, t, {n, n, 1});
        p.has_bias = true;
      }
      break;
    case Direction::bwd_data:  // slots: diff_dst, b, diff_a
      if (d.broadcast_a) {
        // The batch folded into the reduction: diff_dst as m x (B*n), op(b)^T as (B*n) x k.
        const std::int64_t cols = B * n;
        p.copies.push_back({first, memory::desc({m, B, n}, t, {n, m * n, 1}),
                            memory::desc({m, B, n}, t, {B * n, n, 1})});
        if (!d.transpose_b) {  // b is [B][k][n]: op(b)^T's rows (p, j) are its columns
          p.copies.push_back({second, memory::desc({B, n, k}, t, {k * n, 1, n}),
                              memory::desc({B, n, k}, t, {n * k, k, 1})});
        }
        const memory::desc g2 = matrix(1, m, cols, t, m * cols, cols, 1);
        const memory::desc g2_t = matrix(1, cols, m, t, m * cols, 1, cols);
        const memory::desc b2 = matrix(1, cols, k, t, cols * k, k, 1);
        const memory::desc b2_t = matrix(1, k, cols, t, cols * k, 1, k);
        if (!d.transpose_a) {
          p.src = g2, p.weights = b2, p.dst = matrix(1, m, k, t, m * k, k, 1);
          p.src_slot = first, p.weights_slot = second;
        } else {
          p.src = b2_t, p.weights = g2_t, p.dst = matrix(1, k, m, t, m * k, m, 1);
          p.src_slot = second, p.weights_slot = first;
        }
      } else if (!d.transpose_a) {
        p.src = g(), p.weights = op_b_t(), p.dst = matrix(B, m, k, t, m * k, k, 1);
        p.src_slot = first, p.weights_slot = second;
      } else {
        p.src = op_b(), p.weights = g_t(), p.dst = matrix(B, k, m, t, m * k, m, 1);
        p.src_slot = second, p.weights_slot = first;
      }
      break;
    case Direction::bwd_weights: {  // slots: a, diff_dst, diff_b
      if (!d.broadcast_b) {
        if (!d.transpose_b) {
          p.src = op_a_t(), p.weights = g(), p.dst = matrix(B, k, n, t, k * n, n, 1);
          p.src_slot = first, p.weights_slot = second;
        } else {
          p.src = g_t(), p.weights = op_a(), p.dst = matrix(B, n, k, t, n * k, k, 1);
          p.src_slot = second, p.weights_slot = first;
        }
        break;
      }
      // The batch folded into the reduction: a as (B*m) x k, diff_dst as (B*m) x n.
      const std::int64_t rows = B * m;
      const memory::desc a2 = matrix(1, rows, k, t, rows * k, k, 1);
      const memory::desc a2_t = matrix(1, k, rows, t, rows * k, 1, k);
      const memory::desc g2 = matrix(1, rows, n, t, rows * n, n, 1);
      const memory::desc g2_t = matrix(1, n, rows, t, rows * n, 1, n);
      if (!d.transpose_b) {
        p.src = a2_t, p.weights = g2, p.dst = matrix(1, k, n, t, k * n, n, 1);
        p.src_slot = first, p.weights_slot = second;
      } else {
        p.src = g2_t, p.weights = a2, p.dst = matrix(1, n, k, t, n * k, k, 1);
        p.src_slot = second, p.weights_slot = first;
      }
      if (d.transpose_a)  // [B][k][m] read as B x m x k
        p.copies.push_back({first, op_a(), matrix(B, m, k, t, m * k, k, 1)});
      break;
    }
    case Direction::fwd_training: break;  // not a matmul direction
  }
  return p;
}

// The caller's tensors an f32-compute candidate converts, in slot order (the bias last).
std::vector<ConvertedTensor> converted_tensors(const MatmulDesc& desc, Direction direction) {
  const memory::data_type t = data_type_of(desc.dtype);
  const auto dense = [&](const Dims& dims) {
    return memory::desc(memory::dims(dims.begin(), dims.end()), t,
                        dims.rank() == 3 ? memory::format_tag::abc : memory::format_tag::ab);
  };
  const Access out = desc.beta != 0 ? Access::read_write : Access::write;
  switch (direction) {
    case Direction::fwd: {
      std::vector<ConvertedTensor> tensors = {
          {dense(desc.a_dims()), Access::read}, {dense(desc.b_dims()), Access::read},
          {dense(desc.dst_dims()), out}};
      if (desc.bias)
        tensors.push_back(
            {memory::desc({desc.n}, t, memory::format_tag::a), Access::read});
      return tensors;
    }
    case Direction::bwd_data:
      return {{dense(desc.dst_dims()), Access::read},
              {dense(desc.b_dims()), Access::read},
              {dense(desc.a_dims()), out}};
    case Direction::bwd_weights:
      return {{dense(desc.a_dims()), Access::read},
              {dense(desc.dst_dims()), Access::read},
              {dense(desc.b_dims()), out}};
    case Direction::fwd_training: break;
  }
  return {};
}

// Why the inner-product formulation cannot run (desc, direction); empty when it can.
std::string inner_product_reason(const MatmulDesc& desc, Direction direction) {
  if (desc.batch != 1 || desc.transpose_a || !desc.transpose_b)
    return "an inner product is a linear layer: batch 1, a not transposed, b transposed "
           "(out x in)";
  if (desc.alpha != 1) return "oneDNN's inner product has no scale for alpha != 1 (matmul has)";
  if (direction != Direction::fwd && desc.beta != 0)
    return "oneDNN's backward inner products take no sum post-op, so beta must be 0 (matmul "
           "accumulates)";
  return {};
}

struct Candidate {
  AlgoInfo info;
  Formulation formulation = Formulation::matmul;
  dnnl::primitive_desc pd;    // null if unsupported
  dnnl::primitive_desc hint;  // backward inner product: its forward (oneDNN keeps a pointer)
  // Product::copies: the reorders, and where each copy starts in the copies' part of the
  // workspace.
  std::vector<dnnl::primitive_desc_base> reorders;
  std::vector<std::size_t> copy_offsets;
  std::size_t copy_bytes = 0;  // the copies in the workspace
  // f32 compute: the conversions around the primitives; null for native candidates.
  std::shared_ptr<const F32Conversion> conversion;
};

// Whether alpha is a runtime scale of the product's src rather than a post-op: with a bias,
// which oneDNN adds after the scales but before the post-ops (dst = alpha * AB + bias).
bool alpha_as_scale(const MatmulDesc& desc) { return desc.alpha != 1 && desc.bias; }

// alpha (as a scale or an eltwise_linear post-op) and beta (the sum post-op, after it).
dnnl::primitive_attr attr_of(const MatmulDesc& desc, bool with_alpha) {
  dnnl::primitive_attr attr = user_scratchpad();
  dnnl::post_ops ops;
  if (with_alpha && desc.alpha != 1) {
    if (alpha_as_scale(desc)) {
      attr.set_scales_mask(DNNL_ARG_SRC, 0);
    } else {
      ops.append_eltwise(dnnl::algorithm::eltwise_linear, desc.alpha, 0.0f);
    }
  }
  if (desc.beta != 0) ops.append_sum(desc.beta);
  // Note [matmul activation candidates]: the activation after everything else.
  if (desc.activation == MatmulActivation::relu)
    ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (desc.activation == MatmulActivation::gelu_tanh)
    ops.append_eltwise(dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  if (ops.len() > 0) attr.set_post_ops(ops);
  return attr;
}

// The inner product's 2-D descriptors: src m x k, weights n x k, dst m x n, bias n.
struct LinearMds {
  memory::desc src, weights, dst, bias;
};
LinearMds linear_mds(const MatmulDesc& d, memory::data_type t) {
  return {memory::desc({d.m, d.k}, t, memory::format_tag::ab),
          memory::desc({d.n, d.k}, t, memory::format_tag::ab),
          memory::desc({d.m, d.n}, t, memory::format_tag::ab),
          d.bias ? memory::desc({d.n}, t, memory::format_tag::a) : memory::desc()};
}

// The inner product's forward primitive descriptor (also the backward ones' hint).
dnnl::inner_product_forward::primitive_desc inner_product_fwd(const dnnl::engine& engine,
                                                              const MatmulDesc& d,
                                                              memory::data_type t,
                                                              const dnnl::primitive_attr& attr) {
  const LinearMds md = linear_mds(d, t);
  if (d.bias) {
    return dnnl::inner_product_forward::primitive_desc(
        engine, dnnl::prop_kind::forward_training, md.src, md.weights, md.bias, md.dst, attr);
  }
  return dnnl::inner_product_forward::primitive_desc(engine, dnnl::prop_kind::forward_training,
                                                     md.src, md.weights, md.dst, attr);
}

// The primitive descriptor of `formulation` on `compute` (positioned at oneDNN's first
// implementation) and, for a backward inner product, its hint in `hint`; null with `failure` set
// when oneDNN has none. Other oneDNN errors throw.
dnnl::primitive_desc create_pd(const dnnl::engine& engine, const MatmulDesc& compute,
                               Direction direction, Formulation formulation,
                               dnnl::primitive_desc& hint, const ErrorContext& context,
                               std::string& failure) {
  const memory::data_type t = data_type_of(compute.dtype);
  const auto create = [&]() -> dnnl::primitive_desc {
    if (formulation == Formulation::matmul) {
      const Product p = product_of(compute, direction, t);
      const dnnl::primitive_attr attr = attr_of(compute, true);
      if (p.has_bias)
        return dnnl::matmul::primitive_desc(engine, p.src, p.weights, p.bias, p.dst, attr);
      return dnnl::matmul::primitive_desc(engine, p.src, p.weights, p.dst, attr);
    }
    const LinearMds md = linear_mds(compute, t);
    if (direction == Direction::fwd) return inner_product_fwd(engine, compute, t, attr_of(compute, false));
    const auto forward = inner_product_fwd(engine, compute, t, user_scratchpad());
    hint = forward;
    if (direction == Direction::bwd_data) {
      return dnnl::inner_product_backward_data::primitive_desc(engine, md.src, md.weights, md.dst,
                                                               forward, user_scratchpad());
    }
    if (compute.bias) {
      return dnnl::inner_product_backward_weights::primitive_desc(
          engine, md.src, md.weights, md.bias, md.dst, forward, user_scratchpad());
    }
    return dnnl::inner_product_backward_weights::primitive_desc(engine, md.src, md.weights, md.dst,
                                                                forward, user_scratchpad());
  };
  return create_or_unavailable(create, detail::cat(name_of(formulation), " primitive descriptor"),
                               context, failure, Unavailable::unimplemented_or_invalid);
}

// Appends a candidate per implementation of `pd` (positioned at its first) of `formulation` on
// `compute` (the desc, or its f32 twin when `conversion` is set). Returns how many.
std::size_t append_implementations(std::vector<Candidate>& list, std::set<std::string>& seen,
                                   const dnnl::engine& engine, const MatmulDesc& compute,
                                   Direction direction, Formulation formulation,
                                   dnnl::primitive_desc& pd, const dnnl::primitive_desc& hint,
                                   const std::shared_ptr<const F32Conversion>& conversion,
                                   const ErrorContext& context) {
  const std::size_t before = list.size();
  const Product p = product_of(compute, direction, data_type_of(compute.dtype));
  do {
    const std::string impl = sanitize(pd.impl_info_str());
    Candidate candidate;
    candidate.formulation = formulation;
    const bool fused = compute.activation != MatmulActivation::none;
    candidate.info.id = detail::cat(
        "onednn:", impl, ":", name_of(formulation), conversion ? f32_compute_suffix : "",
        fused ? detail::cat(":", to_string(compute.activation)) : std::string());
    if (!seen.insert(candidate.info.id).second) continue;
    candidate.info.name =
        detail::cat(impl, " (", name_of(formulation),
                    conversion ? detail::cat(", ", f32_compute_name) : std::string(), ")");
    candidate.info.supported = true;
    candidate.info.deterministic = true;
    candidate.info.notes = {std::string(name_of(formulation))};
    if (contains(impl, "brg")) candidate.info.notes.emplace_back("brgemm");
    if (contains(impl, "gemm")) candidate.info.notes.emplace_back("gemm");
    if (conversion) candidate.info.notes.emplace_back(f32_compute_note);
    if (fused) candidate.info.notes.emplace_back("fused_activation");
    if (impl.starts_with("ref")) detail::mark_naive(candidate.info);
    candidate.pd = clone(pd, context);
    candidate.hint = hint;
    candidate.conversion = conversion;
    std::size_t scratch = pd.scratchpad_desc().get_size();
    if (formulation == Formulation::matmul) {
      for (const Product::Copy& copy : p.copies) {
        candidate.reorders.push_back(dnnl_call(context, "creating a reorder of an operand", [&] {
          return dnnl::primitive_desc_base(
              dnnl::reorder::primitive_desc(engine, copy.from, engine, copy.to, user_scratchpad()));
        }));
        candidate.copy_offsets.push_back(candidate.copy_bytes);
        candidate.copy_bytes += round_up(copy.to.get_size());
        scratch = std::max(scratch, candidate.reorders.back().scratchpad_desc().get_size());
      }
    }
    // Workspace: the f32 copies (Note [f32 compute]), the reordered operands, then the
    // scratchpad.
    candidate.info.workspace_bytes =
        (conversion ? conversion->bytes() : 0) + candidate.copy_bytes + scratch;
    list.push_back(std::move(candidate));
  } while (pd.next_impl());
  return list.size() - before;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const MatmulDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = detail::op_context(BackendKind::cpu, desc, direction);
  std::vector<Candidate> list;
  std::set<std::string> seen;
  // Note [matmul activation candidates]: with an activation, only the fused forward (an eltwise
  // post-op); the rest is made of the candidates without it and dnnx's passes.
  if (desc.activation != MatmulActivation::none && direction != Direction::fwd) return list;
  for (const Formulation formulation : {Formulation::matmul, Formulation::inner_product}) {
    const std::string why = formulation == Formulation::inner_product
                                ? inner_product_reason(desc, direction)
                                : std::string();
    std::string failure = why;
    std::size_t listed = 0;
    if (why.empty()) {
      dnnl::primitive_desc hint;
      dnnl::primitive_desc pd =
          create_pd(engine, desc, direction, formulation, hint, context, failure);
      if (pd)
        listed += append_implementations(list, seen, engine, desc, direction, formulation, pd,
                                         hint, nullptr, context);
      // Note [f32 compute]: every f32 implementation, behind the native ones.
      if (desc.dtype != DType::f32) {
        MatmulDesc f32 = desc;
        f32.dtype = DType::f32;
        std::string f32_failure;
        dnnl::primitive_desc f32_hint;
        dnnl::primitive_desc f32_pd =
            create_pd(engine, f32, direction, formulation, f32_hint, context, f32_failure);
        if (f32_pd) {
          listed += append_implementations(
              list, seen, engine, f32, direction, formulation, f32_pd, f32_hint,
              std::make_shared<const F32Conversion>(converted_tensors(desc, direction)), context);
        } else if (f32_failure != failure) {
          failure = detail::cat(failure, "; in f32 (", f32_compute_name, "): ", f32_failure);
        }
      }
    }
    if (listed > 0) continue;
    Candidate candidate;
    candidate.formulation = formulation;
    candidate.info = unavailable_info(
        name_of(formulation), why,
        detail::cat("matmul ", to_string(direction), " ", to_string(desc.dtype)), isa, failure);
    list.push_back(std::move(candidate));
  }
  order_supported_first(list);
  return list;
}

// diff_bias = column sums of diff_dst ((batch * m) x n, dense, `dtype`) + beta * diff_bias, in
// f32 and rounded once.
void bias_gradient(const void* diff_dst, void* diff_bias, std::int64_t rows, std::int64_t n,
                   DType dtype, float beta) {
  std::vector<float> sums(static_cast<std::size_t>(n), 0.0f);
  std::vector<float> row(static_cast<std::size_t>(n));
  const std::size_t row_bytes = static_cast<std::size_t>(n) * size_of(dtype);
  const auto* bytes = static_cast<const std::byte*>(diff_dst);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::byte* values = bytes + static_cast<std::size_t>(r) * row_bytes;
    if (dtype == DType::f32) {
      const auto* f = reinterpret_cast<const float*>(values);
      for (std::int64_t j = 0; j < n; ++j) sums[static_cast<std::size_t>(j)] += f[j];
    } else {
      convert(values, dtype, row.data(), DType::f32, n, 1.0f);
      for (std::int64_t j = 0; j < n; ++j)
        sums[static_cast<std::size_t>(j)] += row[static_cast<std::size_t>(j)];
    }
  }
  const std::size_t size = size_of(dtype);
  auto* out = static_cast<std::byte*>(diff_bias);
  for (std::int64_t j = 0; j < n; ++j) {
    std::byte* at = out + static_cast<std::size_t>(j) * size;
    float value = sums[static_cast<std::size_t>(j)];
    if (beta != 0) value += beta * detail::load_f32(at, dtype);
    detail::store_f32(at, dtype, value);
  }
}

// Runs one candidate on the caller's memory (or on f32 copies of it): the reorders of operands,
// the matmul or inner product, the bias gradient. Built once; execute() only rebinds pointers
// (Note [one stream] in runtime.hpp).
class Plan final : public LayerPlan<detail::MatmulArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const MatmulDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        hint_(candidate.hint),
        copy_offset_(candidate.conversion ? candidate.conversion->bytes() : 0),
        scratch_offset_(copy_offset_ + candidate.copy_bytes) {
    const dnnl::engine& engine = runtime_->engine;
    MatmulDesc compute = desc;
    if (candidate.conversion) compute.dtype = DType::f32;
    const memory::data_type t = data_type_of(compute.dtype);
    const memory::desc scale = memory::desc({1}, memory::data_type::f32, memory::dims{1});
    alpha_ = desc.alpha;
    dnnl_call(context_, "building the primitives", [&] {
      if (candidate.conversion) conversions_ = F32Conversions(candidate.conversion);
      std::vector<dnnl_exec_arg_t> args;
      if (candidate.formulation == Formulation::matmul) {
        const Product p = product_of(compute, direction, t);
        slot_of_[0] = p.src_slot;
        slot_of_[1] = p.weights_slot;
        memory_[0] = dnnl::memory(p.src, engine, DNNL_MEMORY_NONE);
        memory_[1] = dnnl::memory(p.weights, engine, DNNL_MEMORY_NONE);
        memory_[2] = dnnl::memory(p.dst, engine, DNNL_MEMORY_NONE);
        DNNX_ASSERT(p.copies.size() == candidate.reorders.size());
        for (std::size_t i = 0; i < p.copies.size(); ++i) {
          // A copied slot is read from its copy by the operand that reads that slot.
          Copied& copied = copied_[i];
          copied.operand = p.copies[i].slot == p.src_slot ? 0 : 1;
          copied.offset = candidate.copy_offsets[i];
          copied.from = dnnl::memory(p.copies[i].from, engine, DNNL_MEMORY_NONE);
          copied.step = make_step(
              candidate.reorders[i],
              {{DNNL_ARG_FROM, copied.from.get()}, {DNNL_ARG_TO, memory_[copied.operand].get()}},
              engine);
        }
        args = {{DNNL_ARG_SRC, memory_[0].get()},
                {DNNL_ARG_WEIGHTS, memory_[1].get()},
                {DNNL_ARG_DST, memory_[2].get()}};
        if (p.has_bias) {
          bias_ = dnnl::memory(p.bias, engine, DNNL_MEMORY_NONE);
          args.push_back({DNNL_ARG_BIAS, bias_.get()});
        }
        if (alpha_as_scale(desc)) {
          alpha_memory_ = dnnl::memory(scale, engine, &alpha_);
          args.push_back({DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, alpha_memory_.get()});
        }
      } else {
        const LinearMds md = linear_mds(compute, t);
        // Slots: fwd a, b, dst; bwd_data diff_dst, b, diff_a; bwd_weights a, diff_dst, diff_b.
        slot_of_[0] = first, slot_of_[1] = second;
        switch (direction) {
          case Direction::fwd:
            memory_[0] = dnnl::memory(md.src, engine, DNNL_MEMORY_NONE);
            memory_[1] = dnnl::memory(md.weights, engine, DNNL_MEMORY_NONE);
            memory_[2] = dnnl::memory(md.dst, engine, DNNL_MEMORY_NONE);
            args = {{DNNL_ARG_SRC, memory_[0].get()},
                    {DNNL_ARG_WEIGHTS, memory_[1].get()},
                    {DNNL_ARG_DST, memory_[2].get()}};
            if (desc.bias) {
              bias_ = dnnl::memory(md.bias, engine, DNNL_MEMORY_NONE);
              args.push_back({DNNL_ARG_BIAS, bias_.get()});
            }
            break;
          case Direction::bwd_data:
            memory_[0] = dnnl::memory(md.dst, engine, DNNL_MEMORY_NONE);
            memory_[1] = dnnl::memory(md.weights, engine, DNNL_MEMORY_NONE);
            memory_[2] = dnnl::memory(md.src, engine, DNNL_MEMORY_NONE);
            args = {{DNNL_ARG_DIFF_DST, memory_[0].get()},
                    {DNNL_ARG_WEIGHTS, memory_[1].get()},
                    {DNNL_ARG_DIFF_SRC, memory_[2].get()}};
            break;
          case Direction::bwd_weights:
            memory_[0] = dnnl::memory(md.src, engine, DNNL_MEMORY_NONE);
            memory_[1] = dnnl::memory(md.dst, engine, DNNL_MEMORY_NONE);
            memory_[2] = dnnl::memory(md.weights, engine, DNNL_MEMORY_NONE);
            args = {{DNNL_ARG_SRC, memory_[0].get()},
                    {DNNL_ARG_DIFF_DST, memory_[1].get()},
                    {DNNL_ARG_DIFF_WEIGHTS, memory_[2].get()}};
            if (desc.bias) {
              // The inner product's bias gradient: diff_bias is bound directly, no conversion
              // (an f32-compute candidate writes it from the f32 primitive into a scratch copy).
              bias_ = dnnl::memory(md.bias, engine, DNNL_MEMORY_NONE);
              args.push_back({DNNL_ARG_DIFF_BIAS, bias_.get()});
              primitive_bias_gradient_ = true;
            }
            break;
          case Direction::fwd_training: break;
        }
      }
      step_ = make_step(candidate.pd, std::move(args), engine);
    });
    if (primitive_bias_gradient_ && candidate.conversion) {
      // The f32 primitive writes the bias gradient in f32: into this buffer, then converted.
      f32_bias_.resize(static_cast<std::size_t>(desc.n));
    }
  }

  void execute(const detail::MatmulArgs& args, detail::Workspace workspace) override {
    std::array<void*, 4> data{};
    const Tensor* bias_tensor = nullptr;
    switch (direction_) {
      case Direction::fwd:
        data = {const_cast<void*>(data_of(args.a, "a")), const_cast<void*>(data_of(args.b, "b")),
                data_of(args.dst, "dst"), nullptr};
        if (desc_.bias) data[bias_slot] = data_of(args.bias, "bias");
        break;
      case Direction::bwd_data:
        data = {data_of(args.diff_dst, "diff_dst"), data_of(args.b, "b"),
                data_of(args.diff_a, "diff_a"), nullptr};
        break;
      case Direction::bwd_weights:
        data = {data_of(args.a, "a"), data_of(args.diff_dst, "diff_dst"),
                data_of(args.diff_b, "diff_b"), nullptr};
        if (desc_.bias) {
          bias_tensor = args.diff_bias;
          data[bias_slot] = data_of(args.diff_bias, "diff_bias");
        }
        break;
      case Direction::fwd_training: break;
    }
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    // The bias gradient reads the caller's diff_dst, not its f32 copy.
    void* const diff_dst = data[second];
    void* const diff_bias = data[bias_slot];
    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    if (conversions_) {
      if (direction_ == Direction::fwd && desc_.bias) {
        conversions_.use_copies(base, data[0], data[1], data[2], data[3]);
      } else {
        conversions_.use_copies(base, data[0], data[1], data[2]);
      }
    }
    for (std::size_t operand = 0; operand < 2; ++operand)
      bind(memory_[operand], data[slot_of_[operand]]);
    for (Copied& copied : copied_) {
      if (!copied.step.primitive) continue;
      bind(copied.from, data[slot_of_[copied.operand]]);
      bind(memory_[copied.operand], base + copy_offset_ + copied.offset);
    }
    bind(memory_[2], data[output]);
    if (bias_) {
      if (direction_ == Direction::fwd) {
        bind(bias_, data[bias_slot]);
      } else if (!f32_bias_.empty()) {
        bind(bias_, f32_bias_.data());
      } else {
        bind(bias_, diff_bias);
      }
    }
    for (Copied& copied : copied_) {
      if (copied.step.primitive) run_step(copied.step, stream, base + scratch_offset_, context_);
    }
    run_step(step_, stream, base + scratch_offset_, context_);
    if (conversions_) conversions_.convert_out(base, stream, context_);
    wait(stream, context_);
    if (direction_ == Direction::bwd_weights && desc_.bias) {
      DNNX_ASSERT(bias_tensor != nullptr);
      if (!primitive_bias_gradient_) {
        bias_gradient(diff_dst, diff_bias, desc_.batch * desc_.m, desc_.n, desc_.dtype,
                      desc_.beta);
      } else if (!f32_bias_.empty()) {
        convert(f32_bias_.data(), DType::f32, diff_bias, desc_.dtype, desc_.n, 1.0f);
      }
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  MatmulDesc desc_;
  Direction direction_;
  dnnl::primitive_desc hint_;  // a backward inner product's forward (oneDNN keeps a pointer)
  std::size_t copy_offset_ = 0;
  std::size_t scratch_offset_ = 0;
  F32Conversions conversions_;
  std::array<dnnl::memory, 3> memory_;  // the primitive's src, weights, dst
  std::array<Slot, 2> slot_of_{first, second};  // the slots src and weights read
  dnnl::memory bias_, alpha_memory_;
  // Product::copies: the reorder from a slot's view into the workspace, read by `operand`.
  struct Copied {
    std::size_t operand = 0;
    std::size_t offset = 0;  // in the copies' part of the workspace
    dnnl::memory from;
    Step step;
  };
  std::array<Copied, 2> copied_;
  Step step_;
  float alpha_ = 1;
  bool primitive_bias_gradient_ = false;
  std::vector<float> f32_bias_;
};

// Note [matmul activation candidates]: the activation and its derivative as plain loops over the
// caller's host memory, in f32 and rounded once to the dtype (the GEMM before has waited for its
// stream).
class HostPasses final : public detail::MatmulActivationPasses {
 public:
  void forward(const MatmulDesc& desc, void* dst, void* aux, const ErrorContext&) override {
    const std::int64_t count = desc.batch * desc.m * desc.n;
    auto* words = static_cast<std::uint32_t*>(aux);
    if (words != nullptr && desc.activation == MatmulActivation::relu)
      std::fill(words, words + detail::matmul_aux_bytes(desc) / 4, 0u);
    const std::size_t size = size_of(desc.dtype);
    auto* values = static_cast<std::byte*>(dst);
    for (std::int64_t i = 0; i < count; ++i) {
      std::byte* at = values + static_cast<std::size_t>(i) * size;
      const float x = detail::load_f32(at, desc.dtype);
      if (desc.activation == MatmulActivation::relu) {
        if (words != nullptr && x > 0) words[i / 32] |= 1u << (i % 32);
        if (x < 0) detail::store_f32(at, desc.dtype, 0.0f);  // NaN stays NaN, as in torch
      } else {
        if (aux != nullptr) std::memcpy(static_cast<std::byte*>(aux) + (at - values), at, size);
        detail::store_f32(at, desc.dtype, detail::gelu_tanh(x));
      }
    }
  }

  void forward_from_pre(const MatmulDesc& desc, const void* pre, void* dst,
                        const ErrorContext&) override {
    const std::int64_t count = desc.batch * desc.m * desc.n;
    const std::size_t size = size_of(desc.dtype);
    const auto* in = static_cast<const std::byte*>(pre);
    auto* out = static_cast<std::byte*>(dst);
    for (std::int64_t i = 0; i < count; ++i) {
      const auto at = static_cast<std::size_t>(i) * size;
      detail::store_f32(out + at, desc.dtype,
                        detail::gelu_tanh(detail::load_f32(in + at, desc.dtype)));
    }
  }

  void backward(const MatmulDesc& desc, const void* diff_dst, const void* aux, void* diff_pre,
                const ErrorContext&) override {
    const std::int64_t count = desc.batch * desc.m * desc.n;
    const std::size_t size = size_of(desc.dtype);
    const auto* in = static_cast<const std::byte*>(diff_dst);
    auto* out = static_cast<std::byte*>(diff_pre);
    const auto* words = static_cast<const std::uint32_t*>(aux);
    const auto* pre = static_cast<const std::byte*>(aux);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::size_t at = static_cast<std::size_t>(i) * size;
      const float g = detail::load_f32(in + at, desc.dtype);
      const float slope = desc.activation == MatmulActivation::relu
                              ? static_cast<float>((words[i / 32] >> (i % 32)) & 1u)
                              : detail::gelu_tanh_grad(detail::load_f32(pre + at, desc.dtype));
      detail::store_f32(out + at, desc.dtype, g * slope);
    }
  }

  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "dnnx host loop"; }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::matmul>> make_matmul_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return detail::with_activation_passes(
      BackendKind::cpu, "onednn",
      std::make_unique<
          ListedLayerBackend<MatmulDesc, detail::MatmulArgs, Candidate, list_candidates, Plan>>(
          std::move(runtime)),
      std::make_shared<HostPasses>());
}

}  // namespace dnnx::onednn
