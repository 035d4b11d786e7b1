// Batch normalization: BatchNormDesc and batch_norm_fwd / batch_norm_bwd
// (include/dnnx/ops/batch_norm.hpp).

#include "bindings.hpp"

namespace dnnx::python {
namespace {

using OptionalIn = std::optional<InArray>;
using OptionalOut = std::optional<OutArray>;

/// The parameter and statistics tensors of one call (BatchNormTensors), each given or not.
struct Parameters {
  Parameters(const OptionalIn& scale, const OptionalIn& shift, const OptionalOut& running_mean,
             const OptionalOut& running_var, const OptionalOut& saved_mean,
             const OptionalOut& saved_inv_std)
      : scale_(scale, "scale"),
        shift_(shift, "shift"),
        running_mean_(running_mean, "running_mean"),
        running_var_(running_var, "running_var"),
        saved_mean_(saved_mean, "saved_mean"),
        saved_inv_std_(saved_inv_std, "saved_inv_std") {}

  BatchNormTensors tensors() {
    return {scale_.get(),       shift_.get(),      running_mean_.get(),
            running_var_.get(), saved_mean_.get(), saved_inv_std_.get()};
  }

 private:
  Optional<InArray> scale_, shift_;
  Optional<OutArray> running_mean_, running_var_, saved_mean_, saved_inv_std_;
};

}  // namespace

void bind_batch_norm(nb::module_& module) {
  DescClass<BatchNormDesc> desc(module, "BatchNormDesc", OpKind::batch_norm,
                                "Batch normalization, training or inference, spatial or per "
                                "activation (dnnx::BatchNormDesc).");
  desc.dims("dims", &BatchNormDesc::dims, "src dims N, C, [D,] [H,] W")
      .enum_field("mode", &BatchNormDesc::mode, &parse_batch_norm_mode,
                  "'spatial' or 'per_activation'")
      .field("training", &BatchNormDesc::training, "batch statistics (True) or running ones")
      .field("affine", &BatchNormDesc::affine, "scale and shift")
      .field("eps", &BatchNormDesc::eps, "added to the variance")
      .field("momentum", &BatchNormDesc::momentum, "running-statistics update factor")
      .enum_field("dtype", &BatchNormDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &BatchNormDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .shape("param_dims", &BatchNormDesc::param_dims, "dims of every parameter / statistic");
  desc.cls().def("statistics", &BatchNormDesc::statistics);
  desc.cls().def("reduction_size", &BatchNormDesc::reduction_size);
  bind_selection<BatchNormDesc>(module, OpKind::batch_norm, &batch_norm_list, &batch_norm_select,
                                &batch_norm_profile);
  module.def(
      "batch_norm_fwd",
      [](Context& context, const BatchNormDesc& desc, InArray src, OutArray dst, OptionalIn scale,
         OptionalIn shift, OptionalOut running_mean, OptionalOut running_var,
         OptionalOut saved_mean, OptionalOut saved_inv_std) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        Parameters parameters(scale, shift, running_mean, running_var, saved_mean, saved_inv_std);
        const BatchNormTensors tensors = parameters.tensors();
        nb::gil_scoped_release released;
        batch_norm_fwd(context, desc, s, d, tensors);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"), nb::arg("scale").none(),
      nb::arg("shift").none(), nb::arg("running_mean").none(), nb::arg("running_var").none(),
      nb::arg("saved_mean").none(), nb::arg("saved_inv_std").none());
  module.def(
      "batch_norm_bwd",
      [](Context& context, const BatchNormDesc& desc, InArray src, InArray diff_dst,
         OptionalIn scale, OptionalOut running_mean, OptionalOut running_var,
         OptionalOut saved_mean, OptionalOut saved_inv_std, OutArray diff_src,
         OptionalOut diff_scale, OptionalOut diff_shift) {
        const Tensor s = to_tensor(src, "src"), dd = to_tensor(diff_dst, "diff_dst");
        Parameters parameters(scale, std::nullopt, running_mean, running_var, saved_mean,
                              saved_inv_std);
        const BatchNormTensors tensors = parameters.tensors();
        Tensor ds = to_tensor(diff_src, "diff_src");
        Optional dscale(diff_scale, "diff_scale"), dshift(diff_shift, "diff_shift");
        nb::gil_scoped_release released;
        batch_norm_bwd(context, desc, s, dd, tensors, ds, dscale.get(), dshift.get());
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("diff_dst"),
      nb::arg("scale").none(), nb::arg("running_mean").none(), nb::arg("running_var").none(),
      nb::arg("saved_mean").none(), nb::arg("saved_inv_std").none(), nb::arg("diff_src"),
      nb::arg("diff_scale").none(), nb::arg("diff_shift").none());
}

}  // namespace dnnx::python
