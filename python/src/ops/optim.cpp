// The multi-tensor optimizer ops: SgdDesc / sgd_step, AdamDesc / adam_step, UnscaleDesc /
// unscale and UpdateScaleDesc / update_scale (include/dnnx/ops/optim.hpp). Each call takes lists
// of arrays (one entry per desc.shapes entry) and runs once over all of them.

#include "bindings.hpp"

namespace dnnx::python {
namespace {

using Arrays = std::vector<OutArray>;
using OptionalOut = std::optional<OutArray>;

/// Views of a list argument `name` (entries named `name[i]`).
std::vector<Tensor> tensors_of(const Arrays& arrays, std::string_view name) {
  std::vector<Tensor> tensors;
  tensors.reserve(arrays.size());
  for (std::size_t i = 0; i < arrays.size(); ++i)
    tensors.push_back(to_tensor(arrays[i], std::string(name) + "[" + std::to_string(i) + "]"));
  return tensors;
}

}  // namespace

void bind_optim(nb::module_& module) {
  DescClass<SgdDesc> sgd(module, "SgdDesc", OpKind::sgd,
                         "One SGD step over a group of parameters (dnnx::SgdDesc).");
  sgd.dims_list("shapes", &SgdDesc::shapes, "dims of each parameter")
      .enum_field("dtype", &SgdDesc::dtype, &parse_dtype, "of params and grads")
      .field("master_weights", &SgdDesc::master_weights, "f32 master copies are updated")
      .field("momentum", &SgdDesc::momentum, "momentum buffers exist")
      .field("nesterov", &SgdDesc::nesterov, "Nesterov momentum")
      .field("maximize", &SgdDesc::maximize, "ascend the gradient")
      .field("grad_scale", &SgdDesc::grad_scale, "a grad_scale scalar divides every gradient")
      .field("found_inf", &SgdDesc::found_inf, "a found_inf scalar skips the step when nonzero");
  sgd.cls().def("numel", &SgdDesc::numel);
  bind_selection<SgdDesc>(module, OpKind::sgd, &sgd_list, &sgd_select, &sgd_profile);
  module.def(
      "sgd_step",
      [](Context& context, const SgdDesc& desc, double lr, double momentum, double dampening,
         double weight_decay, const Arrays& params, const Arrays& grads, const Arrays& master,
         const Arrays& momentum_buffers, OutArray step, OptionalOut grad_scale,
         OptionalOut found_inf) {
        std::vector<Tensor> p = tensors_of(params, "params");
        const std::vector<Tensor> g = tensors_of(grads, "grads");
        std::vector<Tensor> m = tensors_of(master, "master");
        std::vector<Tensor> b = tensors_of(momentum_buffers, "momentum_buffers");
        Tensor s = to_tensor(step, "step");
        Optional<OutArray> scale(grad_scale, "grad_scale"), inf(found_inf, "found_inf");
        const SgdHyper hyper{lr, momentum, dampening, weight_decay};
        const SgdTensors tensors{p, g, m, b, &s, scale.get(), inf.get()};
        nb::gil_scoped_release released;
        sgd_step(context, desc, hyper, tensors);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("lr"), nb::arg("momentum"), nb::arg("dampening"),
      nb::arg("weight_decay"), nb::arg("params"), nb::arg("grads"), nb::arg("master"),
      nb::arg("momentum_buffers"), nb::arg("step"), nb::arg("grad_scale").none(),
      nb::arg("found_inf").none());

  DescClass<AdamDesc> adam(module, "AdamDesc", OpKind::adam,
                           "One Adam / AdamW step over a group of parameters (dnnx::AdamDesc).");
  adam.dims_list("shapes", &AdamDesc::shapes, "dims of each parameter")
      .enum_field("dtype", &AdamDesc::dtype, &parse_dtype, "of params and grads")
      .field("master_weights", &AdamDesc::master_weights, "f32 master copies are updated")
      .field("amsgrad", &AdamDesc::amsgrad, "keep and use max_exp_avg_sq")
      .field("decoupled_weight_decay", &AdamDesc::decoupled_weight_decay, "AdamW")
      .field("maximize", &AdamDesc::maximize, "ascend the gradient")
      .field("grad_scale", &AdamDesc::grad_scale, "a grad_scale scalar divides every gradient")
      .field("found_inf", &AdamDesc::found_inf, "a found_inf scalar skips the step when nonzero");
  adam.cls().def("numel", &AdamDesc::numel);
  bind_selection<AdamDesc>(module, OpKind::adam, &adam_list, &adam_select, &adam_profile);
  module.def(
      "adam_step",
      [](Context& context, const AdamDesc& desc, double lr, double beta1, double beta2, double eps,
         double weight_decay, const Arrays& params, const Arrays& grads, const Arrays& master,
         const Arrays& exp_avg, const Arrays& exp_avg_sq, const Arrays& max_exp_avg_sq,
         OutArray step, OptionalOut grad_scale, OptionalOut found_inf) {
        std::vector<Tensor> p = tensors_of(params, "params");
        const std::vector<Tensor> g = tensors_of(grads, "grads");
        std::vector<Tensor> m = tensors_of(master, "master");
        std::vector<Tensor> ea = tensors_of(exp_avg, "exp_avg");
        std::vector<Tensor> eas = tensors_of(exp_avg_sq, "exp_avg_sq");
        std::vector<Tensor> mx = tensors_of(max_exp_avg_sq, "max_exp_avg_sq");
        Tensor s = to_tensor(step, "step");
        Optional<OutArray> scale(grad_scale, "grad_scale"), inf(found_inf, "found_inf");
        const AdamHyper hyper{lr, beta1, beta2, eps, weight_decay};
        const AdamTensors tensors{p, g, m, ea, eas, mx, &s, scale.get(), inf.get()};
        nb::gil_scoped_release released;
        adam_step(context, desc, hyper, tensors);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("lr"), nb::arg("beta1"), nb::arg("beta2"),
      nb::arg("eps"), nb::arg("weight_decay"), nb::arg("params"), nb::arg("grads"),
      nb::arg("master"), nb::arg("exp_avg"), nb::arg("exp_avg_sq"), nb::arg("max_exp_avg_sq"),
      nb::arg("step"), nb::arg("grad_scale").none(), nb::arg("found_inf").none());

  DescClass<UnscaleDesc> unscale_desc(module, "UnscaleDesc", OpKind::unscale,
                                      "Unscaling gradients and checking them for inf / NaN "
                                      "(dnnx::UnscaleDesc).");
  unscale_desc.dims_list("shapes", &UnscaleDesc::shapes, "dims of each gradient")
      .enum_field("dtype", &UnscaleDesc::dtype, &parse_dtype, "of the gradients")
      .field("reset_found_inf", &UnscaleDesc::reset_found_inf, "found_inf is set to 0 first")
      .field("from_scale", &UnscaleDesc::from_scale,
             "the scalar given is the loss scale (inverted in the op)");
  unscale_desc.cls().def("numel", &UnscaleDesc::numel);
  bind_selection<UnscaleDesc>(module, OpKind::unscale, &unscale_list, &unscale_select,
                              &unscale_profile);
  module.def(
      "unscale",
      [](Context& context, const UnscaleDesc& desc, const Arrays& grads, OutArray found_inf,
         InArray inv_scale) {
        std::vector<Tensor> g = tensors_of(grads, "grads");
        Tensor f = to_tensor(found_inf, "found_inf");
        const Tensor s = to_tensor(inv_scale, "inv_scale");
        nb::gil_scoped_release released;
        unscale(context, desc, g, f, s);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("grads"), nb::arg("found_inf"),
      nb::arg("inv_scale"));

  DescClass<UpdateScaleDesc> update(module, "UpdateScaleDesc", OpKind::update_scale,
                                    "Dynamic loss-scale update (dnnx::UpdateScaleDesc; no "
                                    "fields).");
  bind_selection<UpdateScaleDesc>(module, OpKind::update_scale, &update_scale_list,
                                  &update_scale_select, &update_scale_profile);
  module.def(
      "update_scale",
      [](Context& context, const UpdateScaleDesc& desc, double growth_factor, double backoff_factor,
         std::int64_t growth_interval, OutArray scale, OutArray growth_tracker, InArray found_inf) {
        Tensor s = to_tensor(scale, "scale");
        Tensor g = to_tensor(growth_tracker, "growth_tracker");
        const Tensor f = to_tensor(found_inf, "found_inf");
        const UpdateScaleHyper hyper{growth_factor, backoff_factor, growth_interval};
        nb::gil_scoped_release released;
        update_scale(context, desc, hyper, s, g, f);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("growth_factor"), nb::arg("backoff_factor"),
      nb::arg("growth_interval"), nb::arg("scale"), nb::arg("growth_tracker"),
      nb::arg("found_inf"));
}

}  // namespace dnnx::python
