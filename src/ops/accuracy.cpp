// Accuracy count, backend-agnostic: the checks of a call against the desc and the scratch tensors
// for timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/accuracy.hpp>

#include "core/argmax_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

// Labels and the count: row-major, of their own dtypes.
void check_row_major(const Context& context, const char* role, const Tensor& tensor, DType dtype,
                     const char* dtype_origin, const Dims& expected) {
  detail::check_dtype(role, tensor, dtype, dtype_origin);
  detail::check_dims(role, tensor, expected);
  detail::check_data(role, tensor);
  DNNX_CHECK_ARG(tensor.is_dense(Layout::channels_first), "layout mismatch: ", role, " strides ",
                 tensor.strides(), " are not dense row-major (expected strides ",
                 dense_strides(expected, Layout::channels_first), ")");
  detail::check_device(context, role, tensor);
}

struct AccuracyOp : detail::OpTraits<OpKind::accuracy> {
  static void check(const Context& context, const Desc& desc, Direction, const Args& args) {
    DNNX_ASSERT(args.logits != nullptr && args.labels != nullptr && args.count != nullptr);
    detail::check_operand(context, "logits", *args.logits, desc.dims, desc.dtype, desc.layout);
    check_row_major(context, "labels", *args.labels, desc.label_dtype, "the desc's label_dtype",
                    desc.labels_dims());
    check_row_major(context, "count", *args.count, desc.count_dtype, "the desc's count_dtype",
                    Dims{1});
    detail::check_no_overlap("accuracy", "count", *args.count, "logits", *args.logits);
    detail::check_no_overlap("accuracy", "count", *args.count, "labels", *args.labels);
  }
  // Accumulating changes the count a later call reads: selection times on scratch tensors then
  // (Note [timing stateful calls] in batch_norm.cpp).
  static bool stateful(const Desc& desc, Direction, const Args&) { return desc.accumulate; }
  // Note [scratch data] (dispatch.hpp): logits in [-4, 4), valid labels with one position in
  // eight ignored, a zero count.
  struct Scratch {
    Tensor logits, labels, count;
    Args args(Direction) {
      Args a;
      a.logits = &logits, a.labels = &labels, a.count = &count;
      return a;
    }
  };
  static Scratch scratch(const Context& context, const Desc& desc, Direction) {
    Tensor count = Tensor::zeros(Dims{1}, desc.count_dtype);
    return {detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -4.0f, 4.0f, 1),
            detail::random_labels(context, desc.labels_dims(), desc.label_dtype, desc.classes(),
                                  desc.ignore_index, 6),
            detail::on_context_device(context, std::move(count), Layout::channels_first)};
  }
};
using Dispatch = detail::Dispatch<AccuracyOp>;

}  // namespace

std::shared_ptr<const Choice> accuracy_fwd(Context& context, const AccuracyDesc& desc,
                                           const Tensor& logits, const Tensor& labels,
                                           Tensor& count) {
  detail::AccuracyArgs args;
  args.logits = &logits, args.labels = &labels, args.count = &count;
  return Dispatch::run(context, desc, Direction::fwd, args);
}

DNNX_DEFINE_OP_CALLS(accuracy, AccuracyOp)

}  // namespace dnnx
