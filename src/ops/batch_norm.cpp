// Batch normalization, backend-agnostic: which tensors a call needs and their checks against the
// desc, the scratch tensors for timing; the call itself goes through Note [op dispatch].
//
// Note [timing stateful calls]
// Exhaustive selection times the candidates on the call's own tensors (Note [op dispatch]). A
// training forward updates running_mean / running_var in place, so timing it on the caller's
// tensors would apply the momentum update once per timed run. BatchNormOp::stateful says so, and
// the dispatch then times such a call on scratch tensors (made only when a candidate is timed)
// and runs the choice on the caller's tensors exactly once. The check sits on the dispatch's
// selection path, not on every call: a call that finds its choice on the fast path costs what
// any other op's call costs, rather than paying a trip through selection on every training
// forward.

#include <dnnx/ops/batch_norm.hpp>

#include "core/batch_norm_args.hpp"
#include "ops/op_calls.hpp"

#include <initializer_list>
#include <iterator>
#include <utility>

namespace dnnx {
namespace {

using detail::BatchNormArgs;

// ---- argument validation ------------------------------------------------------------------------

void check_data(const Context& context, const BatchNormDesc& desc, const char* role,
                const Tensor* tensor) {
  DNNX_CHECK_ARG(tensor != nullptr, role, " is missing (null); expected a ", to_string(desc.dtype),
                 " tensor of dims ", desc.dims);
  detail::check_operand(context, role, *tensor, desc.dims, desc.dtype, desc.layout);
}

// Parameter and statistics tensors: f32, param_dims(), dense like one sample of src.
void check_param(const Context& context, const BatchNormDesc& desc, const char* role,
                 const Tensor* tensor) {
  const Dims expected = desc.param_dims();
  DNNX_CHECK_ARG(tensor->dtype() == DType::f32, role, " dtype must be f32 (batch-norm parameters ",
                 "and statistics are f32 whatever the data dtype), got ",
                 to_string(tensor->dtype()));
  detail::check_dims(role, *tensor, expected,
                     desc.mode == BatchNormMode::spatial
                         ? " (one value per channel)"
                         : " (one value per activation: src dims with N = 1)");
  detail::check_data(role, *tensor);
  const Layout layout = expected.rank() == 1 ? Layout::channels_first : desc.layout;
  DNNX_CHECK_ARG(tensor->is_dense(layout), "layout mismatch: ", role, " strides ",
                 tensor->strides(), " are not dense (expected strides ",
                 dense_strides(expected, layout), ")");
  detail::check_device(context, role, *tensor);
}

struct Role {
  const char* name;
  const Tensor* tensor;
};

// Statistics that come in pairs: both given (and valid) or neither; `why` says why.
void check_pair(const Context& context, const BatchNormDesc& desc, Role first, Role second,
                const char* why) {
  const bool has_first = first.tensor != nullptr;
  DNNX_CHECK_ARG(has_first == (second.tensor != nullptr), has_first ? first.name : second.name,
                 " is given without ", has_first ? second.name : first.name, "; ", why);
  if (has_first) {
    check_param(context, desc, first.name, first.tensor);
    check_param(context, desc, second.name, second.tensor);
  }
}

// A tensor the desc requires: present and valid.
template <typename T>
void require_param(const Context& context, const BatchNormDesc& desc, const char* role, T* tensor,
                   const char* why) {
  DNNX_CHECK_ARG(tensor != nullptr, role, " is missing (null); ", why, "; expected an f32 tensor ",
                 "of dims ", desc.param_dims());
  check_param(context, desc, role, tensor);
}

// A tensor the desc rules out.
template <typename T>
void forbid(const char* role, T* tensor, const char* why) {
  DNNX_CHECK_ARG(tensor == nullptr, role, " is given but ", why);
}

// No output may share memory with an input or with another output: every backend reads its
// inputs after it started writing its outputs.
void check_no_alias(std::initializer_list<Role> outputs, std::initializer_list<Role> inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    if (out->tensor == nullptr) continue;
    for (const Role& input : inputs) {
      if (input.tensor == nullptr) continue;
      detail::check_no_overlap("batch-norm", out->name, *out->tensor, input.name, *input.tensor);
    }
    for (auto other = std::next(out); other != outputs.end(); ++other) {
      if (other->tensor == nullptr) continue;
      DNNX_CHECK_ARG(!detail::overlaps(*out->tensor, *other->tensor), out->name, " overlaps ",
                     other->name, " in memory; every output needs its own buffer");
    }
  }
}

void check_affine(const Context& context, const BatchNormDesc& desc, const BatchNormArgs& args,
                  Direction direction) {
  if (desc.affine) {
    require_param(context, desc, "scale", args.scale, "an affine batch-norm needs scale (gamma)");
    if (direction == Direction::fwd) {
      require_param(context, desc, "shift", args.shift, "an affine batch-norm needs shift (beta)");
    }
    return;
  }
  forbid("scale", args.scale, "desc.affine is false (scale 1, shift 0); pass null or set affine");
  forbid("shift", args.shift, "desc.affine is false (scale 1, shift 0); pass null or set affine");
}

void check_running(const Context& context, const BatchNormDesc& desc, const BatchNormArgs& args,
                   bool required) {
  const char* why = "inference normalises with the running statistics";
  if (required) {
    require_param(context, desc, "running_mean", args.running_mean, why);
    require_param(context, desc, "running_var", args.running_var, why);
    return;
  }
  check_pair(context, desc, {"running_mean", args.running_mean}, {"running_var", args.running_var},
             "a training forward updates both running statistics or neither");
}

void check_fwd(const Context& context, const BatchNormDesc& desc, const BatchNormArgs& args) {
  check_data(context, desc, "src", args.src);
  check_data(context, desc, "dst", args.dst);
  check_affine(context, desc, args, Direction::fwd);
  check_running(context, desc, args, !desc.training);
  if (desc.training) {
    check_pair(context, desc, {"saved_mean", args.saved_mean},
               {"saved_inv_std", args.saved_inv_std},
               "a training forward saves both statistics or neither");
    check_no_alias({{"dst", args.dst},
                    {"running_mean", args.running_mean},
                    {"running_var", args.running_var},
                    {"saved_mean", args.saved_mean},
                    {"saved_inv_std", args.saved_inv_std}},
                   {{"src", args.src}, {"scale", args.scale}, {"shift", args.shift}});
  } else {
    check_no_alias({{"dst", args.dst}}, {{"src", args.src},
                                         {"scale", args.scale},
                                         {"shift", args.shift},
                                         {"running_mean", args.running_mean},
                                         {"running_var", args.running_var}});
  }
}

void check_bwd(const Context& context, const BatchNormDesc& desc, const BatchNormArgs& args) {
  check_data(context, desc, "src", args.src);
  check_data(context, desc, "diff_dst", args.diff_dst);
  check_data(context, desc, "diff_src", args.diff_src);
  check_affine(context, desc, args, Direction::bwd_data);
  if (desc.affine) {
    require_param(context, desc, "diff_scale", args.diff_scale,
                  "an affine batch-norm's backward computes diff_scale");
    require_param(context, desc, "diff_shift", args.diff_shift,
                  "an affine batch-norm's backward computes diff_shift");
  } else {
    forbid("diff_scale", args.diff_scale, "desc.affine is false (no scale to differentiate)");
    forbid("diff_shift", args.diff_shift, "desc.affine is false (no shift to differentiate)");
  }
  if (desc.training) {
    const char* why = "a training backward uses the statistics its forward saved";
    require_param(context, desc, "saved_mean", args.saved_mean, why);
    require_param(context, desc, "saved_inv_std", args.saved_inv_std, why);
  } else {
    check_running(context, desc, args, true);
  }
  check_no_alias({{"diff_src", args.diff_src},
                  {"diff_scale", args.diff_scale},
                  {"diff_shift", args.diff_shift}},
                 {{"src", args.src},
                  {"diff_dst", args.diff_dst},
                  {"scale", args.scale},
                  {"running_mean", args.running_mean},
                  {"running_var", args.running_var},
                  {"saved_mean", args.saved_mean},
                  {"saved_inv_std", args.saved_inv_std}});
}

// ---- the calls' arguments -----------------------------------------------------------------------

// Only the tensors the (desc, direction) uses reach a backend: a non-null pointer means "use it".
BatchNormArgs fwd_args(const BatchNormDesc& desc, const Tensor& src, Tensor& dst,
                       const BatchNormTensors& t) {
  BatchNormArgs args;
  args.src = &src;
  args.dst = &dst;
  args.scale = t.scale;
  args.shift = t.shift;
  args.running_mean = t.running_mean;
  args.running_var = t.running_var;
  if (desc.training) {
    args.saved_mean = t.saved_mean;
    args.saved_inv_std = t.saved_inv_std;
  }
  return args;
}

BatchNormArgs bwd_args(const BatchNormDesc& desc, const Tensor& src, const Tensor& diff_dst,
                       const BatchNormTensors& t, Tensor& diff_src, Tensor* diff_scale,
                       Tensor* diff_shift) {
  BatchNormArgs args;
  args.src = &src;
  args.diff_dst = &diff_dst;
  args.diff_src = &diff_src;
  args.scale = t.scale;
  // A shift given with affine off is still an error (check_affine); with affine on it is unused.
  if (!desc.affine) args.shift = t.shift;
  args.diff_scale = diff_scale;
  args.diff_shift = diff_shift;
  if (desc.training) {
    args.saved_mean = t.saved_mean;
    args.saved_inv_std = t.saved_inv_std;
  } else {
    args.running_mean = t.running_mean;
    args.running_var = t.running_var;
  }
  return args;
}

// ---- scratch tensors for selection without user tensors
// ------------------------------------------

// Tensors for timing without the user's (Note [scratch data]): data in [-1, 1), scales and
// inverse standard deviations in [0.5, 1.5) (positive, so nothing divides by zero), means in
// [-0.5, 0.5), variances in [0.5, 1.5).
struct Scratch {
  BatchNormDesc desc;
  Tensor src, dst, diff_dst, diff_src;
  Tensor scale, shift, running_mean, running_var, saved_mean, saved_inv_std, diff_scale, diff_shift;

  BatchNormArgs args(Direction direction) {
    BatchNormTensors t;
    if (desc.affine) {
      t.scale = &scale;
      t.shift = &shift;
    }
    t.running_mean = &running_mean;
    t.running_var = &running_var;
    t.saved_mean = &saved_mean;
    t.saved_inv_std = &saved_inv_std;
    if (direction == Direction::fwd) return fwd_args(desc, src, dst, t);
    return bwd_args(desc, src, diff_dst, t, diff_src, desc.affine ? &diff_scale : nullptr,
                    desc.affine ? &diff_shift : nullptr);
  }
};

struct BatchNormOp : detail::OpTraits<OpKind::batch_norm> {
  static void check(const Context& context, const Desc& desc, Direction direction,
                    const Args& args) {
    if (direction == Direction::fwd) return check_fwd(context, desc, args);
    check_bwd(context, desc, args);
  }
  // Note [timing stateful calls]
  static bool stateful(const BatchNormDesc& desc, Direction direction, const BatchNormArgs& args) {
    return desc.training && direction == Direction::fwd && args.running_mean != nullptr;
  }
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const BatchNormDesc& desc, Direction direction) {
    const Dims params = desc.param_dims();
    const Layout param_layout = params.rank() == 1 ? Layout::channels_first : desc.layout;
    auto data = [&](float low, float high, unsigned seed) {
      return detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, low, high, seed);
    };
    auto param = [&](float low, float high, unsigned seed) {
      return detail::random_tensor(context, params, DType::f32, param_layout, low, high, seed);
    };
    Scratch s;
    s.desc = desc;
    s.src = data(-1, 1, 1);
    s.dst = data(-1, 1, 2);
    s.running_mean = param(-0.5f, 0.5f, 5);
    s.running_var = param(0.5f, 1.5f, 6);
    s.saved_mean = param(-0.5f, 0.5f, 7);
    s.saved_inv_std = param(0.5f, 1.5f, 8);
    if (desc.affine) {
      s.scale = param(0.5f, 1.5f, 9);
      s.shift = param(-1, 1, 10);
    }
    if (direction != Direction::fwd) {
      s.diff_dst = data(-1, 1, 3);
      s.diff_src = data(-1, 1, 4);
      if (desc.affine) {
        s.diff_scale = param(-1, 1, 11);
        s.diff_shift = param(-1, 1, 12);
      }
    }
    return s;
  }
};
using Dispatch = detail::Dispatch<BatchNormOp>;

}  // namespace

std::shared_ptr<const Choice> batch_norm_fwd(Context& context, const BatchNormDesc& desc,
                                             const Tensor& src, Tensor& dst,
                                             const BatchNormTensors& tensors) {
  return Dispatch::run(context, desc, Direction::fwd, fwd_args(desc, src, dst, tensors));
}

std::shared_ptr<const Choice> batch_norm_bwd(Context& context, const BatchNormDesc& desc,
                                             const Tensor& src, const Tensor& diff_dst,
                                             const BatchNormTensors& tensors, Tensor& diff_src,
                                             Tensor* diff_scale, Tensor* diff_shift) {
  return Dispatch::run(context, desc, Direction::bwd_data,
                       bwd_args(desc, src, diff_dst, tensors, diff_src, diff_scale, diff_shift));
}

DNNX_DEFINE_OP_CALLS(batch_norm, BatchNormOp)

}  // namespace dnnx
