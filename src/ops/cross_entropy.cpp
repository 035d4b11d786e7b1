// Cross-entropy, backend-agnostic: the checks of a call against the desc and the scratch tensors
// for timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/cross_entropy.hpp>

#include "core/cross_entropy_args.hpp"
#include "ops/op_calls.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace dnnx {
namespace {

using detail::CrossEntropyArgs;

void check_present(const char* role, const Tensor* tensor, DType dtype, const Dims& expected) {
  DNNX_CHECK_ARG(tensor != nullptr, role, " is missing (null pointer); expected a ",
                 to_string(dtype), " tensor of dims ", expected);
}

// Logits and their gradient: dense in the desc's layout, of the desc's dtype.
void check_logits(const Context& context, const CrossEntropyDesc& desc, const char* role,
                  const Tensor* tensor) {
  check_present(role, tensor, desc.dtype, desc.dims);
  detail::check_operand(context, role, *tensor, desc.dims, desc.dtype, desc.layout);
}

// Labels, weights, losses: row-major, and a dtype that is not always the desc's own.
void check_row_major(const Context& context, const char* role, const Tensor* tensor, DType dtype,
                     const char* dtype_origin, const Dims& expected) {
  check_present(role, tensor, dtype, expected);
  detail::check_dtype(role, *tensor, dtype, dtype_origin);
  detail::check_dims(role, *tensor, expected);
  detail::check_data(role, *tensor);
  DNNX_CHECK_ARG(tensor->is_dense(Layout::channels_first), "layout mismatch: ", role, " strides ",
                 tensor->strides(), " are not dense row-major (expected strides ",
                 dense_strides(expected, Layout::channels_first), ")");
  detail::check_device(context, role, *tensor);
}

// Optional inputs (weights) are null when absent.
void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor* in) {
  if (in != nullptr) detail::check_no_overlap("cross-entropy", out_role, out, in_role, *in);
}

void check_inputs(const Context& context, const CrossEntropyDesc& desc,
                  const CrossEntropyArgs& args) {
  check_logits(context, desc, "logits", args.logits);
  check_row_major(context, "labels", args.labels, desc.label_dtype, "the desc's label_dtype",
                  desc.labels_dims());
  if (desc.weighted) {
    DNNX_CHECK_ARG(args.weights != nullptr,
                   "weights are missing (null) but the desc says weighted; pass f32 class "
                   "weights of dims ",
                   desc.weights_dims(), " or set weighted = false");
    check_row_major(context, "weights", args.weights, DType::f32, "the class weights' dtype",
                    desc.weights_dims());
  } else {
    DNNX_CHECK_ARG(args.weights == nullptr,
                   "weights were given but the desc is not weighted (weighted = false); pass "
                   "null or set weighted = true");
  }
}

struct CrossEntropyOp
    : detail::OpTraits<OpKind::cross_entropy> {
  static void check(const Context& context, const Desc& desc, Direction direction,
                    const Args& args) {
    check_inputs(context, desc, args);
    if (direction == Direction::fwd) {
      check_row_major(context, "loss", args.loss, desc.dtype, "the desc's dtype", desc.loss_dims());
      check_no_alias("loss", *args.loss, "logits", args.logits);
      check_no_alias("loss", *args.loss, "labels", args.labels);
      check_no_alias("loss", *args.loss, "weights", args.weights);
      return;
    }
    check_row_major(context, "diff_loss", args.diff_loss, desc.dtype, "the desc's dtype",
                    desc.loss_dims());
    check_logits(context, desc, "diff_logits", args.diff_logits);
    check_no_alias("diff_logits", *args.diff_logits, "logits", args.logits);
    check_no_alias("diff_logits", *args.diff_logits, "labels", args.labels);
    check_no_alias("diff_logits", *args.diff_logits, "weights", args.weights);
    check_no_alias("diff_logits", *args.diff_logits, "diff_loss", args.diff_loss);
  }

  // Note [scratch data] (dispatch.hpp): logits in [-4, 4), valid labels with one position in
  // eight ignored, weights in [0.5, 1.5).
  struct Scratch {
    Tensor logits, labels, weights, loss, diff_loss, diff_logits;
    bool weighted = false;
    Args args(Direction direction) {
      Args a;
      a.logits = &logits, a.labels = &labels;
      if (weighted) a.weights = &weights;
      if (direction == Direction::fwd) {
        a.loss = &loss;
      } else {
        a.diff_loss = &diff_loss, a.diff_logits = &diff_logits;
      }
      return a;
    }
  };
  static Scratch scratch(const Context& context, const Desc& desc, Direction direction) {
    Scratch s;
    s.weighted = desc.weighted;
    s.logits = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -4.0f, 4.0f, 1);
    s.labels = detail::random_labels(context, desc.labels_dims(), desc.label_dtype, desc.classes(),
                                     desc.ignore_index, 6);
    if (desc.weighted) {
      s.weights = detail::random_tensor(context, desc.weights_dims(), DType::f32,
                                        Layout::channels_first, 0.5f, 1.5f, 4);
    }
    if (direction == Direction::fwd) {
      s.loss =
          Tensor::empty(desc.loss_dims(), desc.dtype, Layout::channels_first, context.allocator());
    } else {
      s.diff_loss = detail::random_tensor(context, desc.loss_dims(), desc.dtype,
                                          Layout::channels_first, 0.5f, 1.0f, 5);
      s.diff_logits = Tensor::empty(desc.dims, desc.dtype, desc.layout, context.allocator());
    }
    return s;
  }
};

using Dispatch = detail::Dispatch<CrossEntropyOp>;

CrossEntropyArgs inputs(const Tensor& logits, const Tensor& labels, const Tensor* weights) {
  CrossEntropyArgs args;
  args.logits = &logits, args.labels = &labels, args.weights = weights;
  return args;
}

}  // namespace

std::shared_ptr<const Choice> cross_entropy_fwd(Context& context, const CrossEntropyDesc& desc,
                                                const Tensor& logits, const Tensor& labels,
                                                const Tensor* weights, Tensor& loss) {
  CrossEntropyArgs args = inputs(logits, labels, weights);
  args.loss = &loss;
  return Dispatch::run(context, desc, Direction::fwd, args);
}

std::shared_ptr<const Choice> cross_entropy_bwd(Context& context, const CrossEntropyDesc& desc,
                                                const Tensor& logits, const Tensor& labels,
                                                const Tensor* weights, const Tensor& diff_loss,
                                                Tensor& diff_logits) {
  CrossEntropyArgs args = inputs(logits, labels, weights);
  args.diff_loss = &diff_loss, args.diff_logits = &diff_logits;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

DNNX_DEFINE_OP_CALLS(cross_entropy, CrossEntropyOp)

}  // namespace dnnx
