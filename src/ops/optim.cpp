// The optimizer and loss-scaling ops, backend-agnostic: the checks of a call's tensor lists and
// values against the desc, the scratch tensors for timing; the call goes through Note [op
// dispatch]. Every one of these calls changes its own tensors, so selection times on scratch
// tensors (Note [timing stateful calls] in batch_norm.cpp).

#include <dnnx/ops/optim.hpp>

#include "core/optim_args.hpp"
#include "ops/op_calls.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dnnx {
namespace {

using detail::AdamArgs;
using detail::SgdArgs;
using detail::UnscaleArgs;
using detail::UpdateScaleArgs;

// ---- the checks -------------------------------------------------------------------------------

// Whether `tensor` passes check_operand (the common case is checked without building role names).
bool operand_ok(const Context& context, const Tensor& tensor, const Dims& dims, DType dtype) {
  return tensor.dtype() == dtype && tensor.dims() == dims && tensor.data() != nullptr &&
         tensor.device() == context.device() && tensor.is_dense(Layout::channels_first);
}

// The memory spans of a call's tensors: every output against every other tensor (Note
// [optimizer overlap check]).
//
// Note [optimizer overlap check]
// A call has hundreds of tensors, so the pairwise check of the other ops would cost a quadratic
// number of comparisons on every call. The outputs' spans are sorted instead: when no two
// neighbours overlap, no two outputs do; each input is then looked up among the sorted, disjoint
// outputs by binary search. Inputs may overlap each other (they are only read).
class Spans {
 public:
  void add(const Tensor& tensor, const char* list, std::size_t index, bool output) {
    const std::size_t bytes = tensor.span_bytes();
    if (bytes == 0 || tensor.numel() == 0) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(tensor.data());
    (output ? outputs_ : inputs_).push_back({begin, begin + bytes, list, index});
  }
  void check(std::string_view op) {
    std::sort(outputs_.begin(), outputs_.end(),
              [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < outputs_.size(); ++i) {
      if (outputs_[i].begin < outputs_[i - 1].end) fail(op, outputs_[i], outputs_[i - 1]);
    }
    for (const Span& in : inputs_) {
      const auto found =
          std::upper_bound(outputs_.begin(), outputs_.end(), in.begin,
                           [](std::uintptr_t value, const Span& out) { return value < out.end; });
      if (found != outputs_.end() && found->begin < in.end) fail(op, *found, in);
    }
  }

 private:
  struct Span {
    std::uintptr_t begin, end;
    const char* list;
    std::size_t index;
    std::string name() const {
      return index == SIZE_MAX ? std::string(list) : detail::cat(list, '[', index, ']');
    }
  };
  [[noreturn]] static void fail(std::string_view op, const Span& out, const Span& other) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(out.name(), " overlaps ", other.name(), " in memory; ", op,
                              " needs every tensor it writes in memory of its own"));
  }
  std::vector<Span> outputs_, inputs_;
};

// One list of a call: `count` tensors matching `shapes` in `dtype` when `wanted`, else none.
template <typename T>
void check_list(const Context& context, const char* list, std::span<T> tensors,
                const std::vector<Dims>& shapes, DType dtype, bool wanted, const char* flag,
                Spans& spans, bool output) {
  if (!wanted) {
    DNNX_CHECK_ARG(tensors.empty(), list, " has ", tensors.size(), " tensors but ", flag,
                   " is not set in the desc (pass none)");
    return;
  }
  DNNX_CHECK_ARG(tensors.size() == shapes.size(), list, " has ", tensors.size(),
                 " tensors but the desc has ", shapes.size(), " shapes");
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Tensor& tensor = tensors[i];
    if (!operand_ok(context, tensor, shapes[i], dtype)) {
      const std::string role = detail::cat(list, '[', i, ']');
      detail::check_operand(context, role.c_str(), tensor, shapes[i], dtype,
                            Layout::channels_first);
    }
    spans.add(tensor, list, i, output);
  }
}

// A device scalar {1} of `dtype`, given exactly when `wanted`.
void check_scalar(const Context& context, const char* role, const Tensor* tensor, DType dtype,
                  bool wanted, const char* flag, Spans& spans, bool output) {
  const bool given = tensor != nullptr && !tensor->is_null();
  if (!wanted) {
    DNNX_CHECK_ARG(!given, role, " was given but ", flag, " is not set in the desc");
    return;
  }
  DNNX_CHECK_ARG(given, role, " is missing (null); expected a ", to_string(dtype),
                 " tensor of dims 1");
  detail::check_operand(context, role, *tensor, Dims{1}, dtype, Layout::channels_first);
  spans.add(*tensor, role, SIZE_MAX, output);
}

void check_rate(const char* name, double value) {
  DNNX_CHECK_ARG(std::isfinite(value) && value >= 0, name, " must be finite and >= 0, got ",
                 detail::shortest(value));
}

void check_sgd_hyper(const SgdDesc& desc, const SgdHyper& h) {
  check_rate("lr", h.lr);
  check_rate("weight_decay", h.weight_decay);
  DNNX_CHECK_ARG(std::isfinite(h.momentum) && h.momentum >= 0,
                 "momentum must be finite and >= 0, got ", detail::shortest(h.momentum));
  if (desc.momentum) {
    DNNX_CHECK_ARG(h.momentum > 0, "momentum must be > 0 when the desc has momentum buffers, got ",
                   detail::shortest(h.momentum));
  } else {
    DNNX_CHECK_ARG(h.momentum == 0, "momentum is ", detail::shortest(h.momentum),
                   " but the desc has no momentum buffers (set desc.momentum)");
  }
  DNNX_CHECK_ARG(std::isfinite(h.dampening), "dampening must be finite, got ",
                 detail::shortest(h.dampening));
  DNNX_CHECK_ARG(!desc.nesterov || h.dampening == 0, "nesterov needs dampening 0, got ",
                 detail::shortest(h.dampening));
}

void check_adam_hyper(const AdamHyper& h) {
  check_rate("lr", h.lr);
  check_rate("eps", h.eps);
  check_rate("weight_decay", h.weight_decay);
  DNNX_CHECK_ARG(h.beta1 >= 0 && h.beta1 < 1, "beta1 must be in [0, 1), got ",
                 detail::shortest(h.beta1));
  DNNX_CHECK_ARG(h.beta2 >= 0 && h.beta2 < 1, "beta2 must be in [0, 1), got ",
                 detail::shortest(h.beta2));
}

void check_sgd(const Context& context, const SgdDesc& d, Direction, const SgdArgs& args) {
  check_sgd_hyper(d, args.hyper);
  const SgdTensors& t = args.tensors;
  Spans spans;
  check_list(context, "params", t.params, d.shapes, d.dtype, true, "", spans, true);
  check_list(context, "grads", t.grads, d.shapes, d.dtype, true, "", spans, false);
  check_list(context, "master", t.master, d.shapes, DType::f32, d.master_weights, "master_weights",
             spans, true);
  check_list(context, "momentum_buffers", t.momentum_buffers, d.shapes, DType::f32, d.momentum,
             "momentum", spans, true);
  check_scalar(context, "step", t.step, DType::f32, true, "", spans, true);
  check_scalar(context, "grad_scale", t.grad_scale, DType::f32, d.grad_scale, "grad_scale", spans,
               false);
  check_scalar(context, "found_inf", t.found_inf, DType::f32, d.found_inf, "found_inf", spans,
               false);
  spans.check("sgd");
}

void check_adam(const Context& context, const AdamDesc& d, Direction, const AdamArgs& args) {
  check_adam_hyper(args.hyper);
  const AdamTensors& t = args.tensors;
  Spans spans;
  check_list(context, "params", t.params, d.shapes, d.dtype, true, "", spans, true);
  check_list(context, "grads", t.grads, d.shapes, d.dtype, true, "", spans, false);
  check_list(context, "master", t.master, d.shapes, DType::f32, d.master_weights, "master_weights",
             spans, true);
  check_list(context, "exp_avg", t.exp_avg, d.shapes, DType::f32, true, "", spans, true);
  check_list(context, "exp_avg_sq", t.exp_avg_sq, d.shapes, DType::f32, true, "", spans, true);
  check_list(context, "max_exp_avg_sq", t.max_exp_avg_sq, d.shapes, DType::f32, d.amsgrad,
             "amsgrad", spans, true);
  check_scalar(context, "step", t.step, DType::f32, true, "", spans, true);
  check_scalar(context, "grad_scale", t.grad_scale, DType::f32, d.grad_scale, "grad_scale", spans,
               false);
  check_scalar(context, "found_inf", t.found_inf, DType::f32, d.found_inf, "found_inf", spans,
               false);
  spans.check("adam");
}

void check_unscale(const Context& context, const UnscaleDesc& d, Direction,
                   const UnscaleArgs& args) {
  Spans spans;
  check_list(context, "grads", args.grads, d.shapes, d.dtype, true, "", spans, true);
  check_scalar(context, "found_inf", args.found_inf, DType::f32, true, "", spans, true);
  check_scalar(context, "inv_scale", args.inv_scale, DType::f32, true, "", spans, false);
  spans.check("unscale");
}

void check_update_scale(const Context& context, const UpdateScaleDesc&, Direction,
                        const UpdateScaleArgs& args) {
  const UpdateScaleHyper& h = args.hyper;
  DNNX_CHECK_ARG(std::isfinite(h.growth_factor) && h.growth_factor > 1,
                 "growth_factor must be finite and > 1, got ", detail::shortest(h.growth_factor));
  DNNX_CHECK_ARG(h.backoff_factor > 0 && h.backoff_factor < 1,
                 "backoff_factor must be in (0, 1), got ", detail::shortest(h.backoff_factor));
  DNNX_CHECK_ARG(h.growth_interval >= 1 && h.growth_interval <= INT32_MAX,
                 "growth_interval must be in [1, 2^31 - 1], got ", h.growth_interval);
  Spans spans;
  check_scalar(context, "scale", args.scale, DType::f32, true, "", spans, true);
  check_scalar(context, "growth_tracker", args.growth_tracker, DType::i32, true, "", spans, true);
  check_scalar(context, "found_inf", args.found_inf, DType::f32, true, "", spans, false);
  spans.check("update_scale");
}

// ---- scratch tensors --------------------------------------------------------------------------

// A {1} scalar of `value` on the context's device.
Tensor scalar(const Context& context, DType dtype, float value) {
  Tensor host = Tensor::empty(Dims{1}, dtype);
  host.fill(value);
  return detail::on_context_device(context, std::move(host), Layout::channels_first);
}

// One tensor per shape of uniform values in [low, high).
std::vector<Tensor> random_list(const Context& context, const std::vector<Dims>& shapes,
                                DType dtype, bool wanted, float low, float high, unsigned seed) {
  std::vector<Tensor> list;
  if (!wanted) return list;
  list.reserve(shapes.size());
  for (const Dims& dims : shapes) {
    list.push_back(
        detail::random_tensor(context, dims, dtype, Layout::channels_first, low, high, seed++));
  }
  return list;
}

// Timing sees a step that runs (found_inf 0) on finite values; the state stays bounded however
// many steps run (Adam's update is at most lr per element, SGD's lr is small).
struct SgdScratch {
  std::vector<Tensor> params, grads, master, buffers;
  Tensor step, grad_scale, found_inf;
  SgdArgs args(Direction) {
    SgdArgs args;
    args.tensors = {params,
                    grads,
                    master,
                    buffers,
                    &step,
                    grad_scale.is_null() ? nullptr : &grad_scale,
                    found_inf.is_null() ? nullptr : &found_inf};
    args.hyper.lr = 1e-4;
    args.hyper.momentum = buffers.empty() ? 0.0 : 0.9;
    return args;
  }
};

struct AdamScratch {
  std::vector<Tensor> params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq;
  Tensor step, grad_scale, found_inf;
  AdamArgs args(Direction) {
    AdamArgs args;
    args.tensors = {params,
                    grads,
                    master,
                    exp_avg,
                    exp_avg_sq,
                    max_exp_avg_sq,
                    &step,
                    grad_scale.is_null() ? nullptr : &grad_scale,
                    found_inf.is_null() ? nullptr : &found_inf};
    return args;
  }
};

struct UnscaleScratch {
  std::vector<Tensor> grads;
  Tensor found_inf, inv_scale;
  UnscaleArgs args(Direction) { return {grads, &found_inf, &inv_scale}; }
};

struct UpdateScaleScratch {
  Tensor scale, growth_tracker, found_inf;
  UpdateScaleArgs args(Direction) { return {&scale, &growth_tracker, &found_inf, {}}; }
};

// ---- the traits ---------------------------------------------------------------------------------

struct SgdOp : detail::OpTraits<OpKind::sgd> {
  static constexpr auto& check = check_sgd;
  using Scratch = SgdScratch;
  static Scratch scratch(const Context& context, const SgdDesc& d, Direction) {
    Scratch s;
    s.params = random_list(context, d.shapes, d.dtype, true, -1, 1, 1);
    s.grads = random_list(context, d.shapes, d.dtype, true, -1, 1, 1001);
    s.master = random_list(context, d.shapes, DType::f32, d.master_weights, -1, 1, 2001);
    s.buffers = random_list(context, d.shapes, DType::f32, d.momentum, -1, 1, 3001);
    s.step = scalar(context, DType::f32, 1);
    if (d.grad_scale) s.grad_scale = scalar(context, DType::f32, 1024);
    if (d.found_inf) s.found_inf = scalar(context, DType::f32, 0);
    return s;
  }
  static bool stateful(const SgdDesc&, Direction, const SgdArgs&) { return true; }
};

struct AdamOp : detail::OpTraits<OpKind::adam> {
  static constexpr auto& check = check_adam;
  using Scratch = AdamScratch;
  static Scratch scratch(const Context& context, const AdamDesc& d, Direction) {
    Scratch s;
    s.params = random_list(context, d.shapes, d.dtype, true, -1, 1, 1);
    s.grads = random_list(context, d.shapes, d.dtype, true, -1, 1, 1001);
    s.master = random_list(context, d.shapes, DType::f32, d.master_weights, -1, 1, 2001);
    s.exp_avg = random_list(context, d.shapes, DType::f32, true, -1, 1, 3001);
    s.exp_avg_sq = random_list(context, d.shapes, DType::f32, true, 0, 1, 4001);
    s.max_exp_avg_sq = random_list(context, d.shapes, DType::f32, d.amsgrad, 0, 1, 5001);
    s.step = scalar(context, DType::f32, 1);
    if (d.grad_scale) s.grad_scale = scalar(context, DType::f32, 1024);
    if (d.found_inf) s.found_inf = scalar(context, DType::f32, 0);
    return s;
  }
  static bool stateful(const AdamDesc&, Direction, const AdamArgs&) { return true; }
};

struct UnscaleOp : detail::OpTraits<OpKind::unscale> {
  static constexpr auto& check = check_unscale;
  using Scratch = UnscaleScratch;
  static Scratch scratch(const Context& context, const UnscaleDesc& d, Direction) {
    Scratch s;
    s.grads = random_list(context, d.shapes, d.dtype, true, -1, 1, 1);
    s.found_inf = scalar(context, DType::f32, 0);
    s.inv_scale = scalar(context, DType::f32, d.from_scale ? 1.0f : 1.0f / 1024);
    return s;
  }
  static bool stateful(const UnscaleDesc&, Direction, const UnscaleArgs&) { return true; }
};

struct UpdateScaleOp : detail::OpTraits<OpKind::update_scale> {
  static constexpr auto& check = check_update_scale;
  using Scratch = UpdateScaleScratch;
  static Scratch scratch(const Context& context, const UpdateScaleDesc&, Direction) {
    Scratch s;
    s.scale = scalar(context, DType::f32, 65536);
    s.growth_tracker = scalar(context, DType::i32, 0);
    s.found_inf = scalar(context, DType::f32, 0);
    return s;
  }
  static bool stateful(const UpdateScaleDesc&, Direction, const UpdateScaleArgs&) { return true; }
};

}  // namespace

std::shared_ptr<const Choice> sgd_step(Context& context, const SgdDesc& desc, const SgdHyper& hyper,
                                       const SgdTensors& tensors) {
  return detail::Dispatch<SgdOp>::run(context, desc, Direction::fwd, SgdArgs{tensors, hyper});
}

std::shared_ptr<const Choice> adam_step(Context& context, const AdamDesc& desc,
                                        const AdamHyper& hyper, const AdamTensors& tensors) {
  return detail::Dispatch<AdamOp>::run(context, desc, Direction::fwd, AdamArgs{tensors, hyper});
}

std::shared_ptr<const Choice> unscale(Context& context, const UnscaleDesc& desc,
                                      std::span<Tensor> grads, Tensor& found_inf,
                                      const Tensor& inv_scale) {
  return detail::Dispatch<UnscaleOp>::run(context, desc, Direction::fwd,
                                          UnscaleArgs{grads, &found_inf, &inv_scale});
}

std::shared_ptr<const Choice> update_scale(Context& context, const UpdateScaleDesc& desc,
                                           const UpdateScaleHyper& hyper, Tensor& scale,
                                           Tensor& growth_tracker, const Tensor& found_inf) {
  return detail::Dispatch<UpdateScaleOp>::run(
      context, desc, Direction::fwd, UpdateScaleArgs{&scale, &growth_tracker, &found_inf, hyper});
}

DNNX_DEFINE_OP_CALLS(sgd, SgdOp)
DNNX_DEFINE_OP_CALLS(adam, AdamOp)
DNNX_DEFINE_OP_CALLS(unscale, UnscaleOp)
DNNX_DEFINE_OP_CALLS(update_scale, UpdateScaleOp)

// ---- GradScaler -------------------------------------------------------------------------------

GradScaler::GradScaler(Context& context, float init_scale, UpdateScaleHyper hyper)
    : hyper_(hyper),
      scale_(scalar(context, DType::f32, init_scale)),
      growth_tracker_(scalar(context, DType::i32, 0)),
      found_inf_(scalar(context, DType::f32, 0)) {
  DNNX_CHECK_ARG(std::isfinite(init_scale) && init_scale > 0,
                 "init_scale must be finite and > 0, got ", detail::shortest(init_scale));
}

void GradScaler::unscale(Context& context, std::span<Tensor> grads, DType dtype) {
  UnscaleDesc desc;
  desc.dtype = dtype;
  desc.reset_found_inf = true;
  desc.from_scale = true;
  desc.shapes.reserve(grads.size());
  for (const Tensor& grad : grads) desc.shapes.push_back(grad.dims());
  dnnx::unscale(context, desc, grads, found_inf_, scale_);
}

void GradScaler::update(Context& context) {
  dnnx::update_scale(context, UpdateScaleDesc{}, hyper_, scale_, growth_tracker_, found_inf_);
}

float GradScaler::scale_value() const {
  Tensor host = Tensor::empty(Dims{1}, DType::f32);
  copy(scale_, host);
  return host.to_f32()[0];
}

}  // namespace dnnx
