// Filling tensors: the Generator, FillDesc and fill_fwd (include/dnnx/ops/fill.hpp), and the
// torch.nn.init initialisers of include/dnnx/init.hpp.

#include <dnnx/init.hpp>

#include "bindings.hpp"

namespace dnnx::python {
namespace {

std::string generator_repr(const Generator& generator) {
  return "Generator(seed=" + std::to_string(generator.seed()) +
         ", offset=" + std::to_string(generator.offset()) + ")";
}

void bind_init(nb::module_& module) {
  module.def("init_calculate_gain", &init::calculate_gain, nb::arg("nonlinearity"),
             nb::arg("param").none() = nb::none());
  module.def("init_calculate_fans", [](nb::handle dims) {
    const init::Fans fans = init::calculate_fans(dims_from_python(dims, "dims"));
    return nb::make_tuple(fans.fan_in, fans.fan_out);
  });
  module.def("init_kaiming_bound", [](nb::handle dims, double a, std::string_view mode,
                                      std::string_view nonlinearity, bool uniform) {
    const Dims d = dims_from_python(dims, "dims");
    const init::FanMode m = init::parse_fan_mode(mode);
    return uniform ? init::kaiming_uniform_bound(d, a, m, nonlinearity)
                   : init::kaiming_std(d, a, m, nonlinearity);
  });
  module.def("init_xavier_bound", [](nb::handle dims, double gain, bool uniform) {
    const Dims d = dims_from_python(dims, "dims");
    return uniform ? init::xavier_uniform_bound(d, gain) : init::xavier_normal_std(d, gain);
  });
  module.def(
      "init_uniform",
      [](Context& context, Generator& generator, OutArray tensor, float low, float high) {
        Tensor t = to_tensor(tensor, "tensor");
        nb::gil_scoped_release released;
        init::uniform(context, generator, t, low, high);
      },
      nb::arg("context"), nb::arg("generator"), nb::arg("tensor"), nb::arg("a"), nb::arg("b"));
  module.def(
      "init_normal",
      [](Context& context, Generator& generator, OutArray tensor, float mean, float std) {
        Tensor t = to_tensor(tensor, "tensor");
        nb::gil_scoped_release released;
        init::normal(context, generator, t, mean, std);
      },
      nb::arg("context"), nb::arg("generator"), nb::arg("tensor"), nb::arg("mean"), nb::arg("std"));
  module.def(
      "init_trunc_normal",
      [](Context& context, Generator& generator, OutArray tensor, float mean, float std, float a,
         float b) {
        Tensor t = to_tensor(tensor, "tensor");
        nb::gil_scoped_release released;
        init::trunc_normal(context, generator, t, mean, std, a, b);
      },
      nb::arg("context"), nb::arg("generator"), nb::arg("tensor"), nb::arg("mean"), nb::arg("std"),
      nb::arg("a"), nb::arg("b"));
  module.def(
      "init_constant",
      [](Context& context, OutArray tensor, float value) {
        Tensor t = to_tensor(tensor, "tensor");
        nb::gil_scoped_release released;
        init::constant(context, t, value);
      },
      nb::arg("context"), nb::arg("tensor"), nb::arg("value"));
  module.def(
      "init_xavier",
      [](Context& context, Generator& generator, OutArray tensor, double gain, bool uniform) {
        Tensor t = to_tensor(tensor, "tensor");
        nb::gil_scoped_release released;
        if (uniform)
          init::xavier_uniform(context, generator, t, gain);
        else
          init::xavier_normal(context, generator, t, gain);
      },
      nb::arg("context"), nb::arg("generator"), nb::arg("tensor"), nb::arg("gain"),
      nb::arg("uniform"));
  module.def(
      "init_kaiming",
      [](Context& context, Generator& generator, OutArray tensor, double a, std::string_view mode,
         std::string_view nonlinearity, bool uniform) {
        Tensor t = to_tensor(tensor, "tensor");
        const init::FanMode m = init::parse_fan_mode(mode);
        const std::string nl(nonlinearity);
        nb::gil_scoped_release released;
        if (uniform)
          init::kaiming_uniform(context, generator, t, a, m, nl);
        else
          init::kaiming_normal(context, generator, t, a, m, nl);
      },
      nb::arg("context"), nb::arg("generator"), nb::arg("tensor"), nb::arg("a"), nb::arg("mode"),
      nb::arg("nonlinearity"), nb::arg("uniform"));
}

}  // namespace

void bind_fill(nb::module_& module) {
  nb::class_<Generator>(module, "Generator",
                        "Philox4x32-10 seed and offset of dnnx's seeded ops (dnnx::Generator).")
      .def(
          "__init__",
          [](Generator* self, std::uint64_t seed, std::uint64_t offset) {
            new (self) Generator(seed);
            self->set_offset(offset);
          },
          nb::arg("seed") = Generator::default_seed, nb::arg("offset") = 0)
      .def_prop_ro("seed", &Generator::seed)
      .def_prop_rw("offset", &Generator::offset, &Generator::set_offset,
                   "The next Philox block the next call draws from.")
      .def("manual_seed", &Generator::manual_seed, nb::arg("seed"),
           "seed = seed, offset = 0 (torch.manual_seed).")
      .def("set_offset", &Generator::set_offset, nb::arg("offset"))
      .def("consume", &Generator::consume, nb::arg("elements"),
           "Reserves the blocks of `elements` values; returns the first block's offset.")
      .def("copy", [](const Generator& generator) { return generator; })
      .def("__copy__", [](const Generator& generator) { return generator; })
      .def("__deepcopy__", [](const Generator& generator, nb::handle) { return generator; })
      .def("__eq__", [](const Generator& a, const Generator& b) { return a == b; })
      .def("__repr__", &generator_repr)
      .def_ro_static("default_seed", &Generator::default_seed);

  DescClass<FillDesc> desc(module, "FillDesc", OpKind::fill,
                           "Filling a tensor with a constant or seeded random values "
                           "(dnnx::FillDesc).");
  desc.dims("dims", &FillDesc::dims, "rank 1 to 5")
      .enum_field("dtype", &FillDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &FillDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .enum_field("distribution", &FillDesc::distribution, &parse_distribution,
                  "'constant', 'uniform', 'normal' or 'trunc_normal'");
  bind_selection<FillDesc>(module, OpKind::fill, &fill_list, &fill_select, &fill_profile);
  module.def(
      "fill_fwd",
      [](Context& context, const FillDesc& desc, Generator& generator, OutArray dst, float value,
         float low, float high, float mean, float std, float a, float b) {
        Tensor d = to_tensor(dst, "dst");
        const FillParams params{value, low, high, mean, std, a, b};
        nb::gil_scoped_release released;
        fill_fwd(context, desc, params, generator, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("generator"), nb::arg("dst"), nb::arg("value"),
      nb::arg("low"), nb::arg("high"), nb::arg("mean"), nb::arg("std"), nb::arg("a"), nb::arg("b"));
  bind_init(module);
}

}  // namespace dnnx::python
