// `dnnx algos|profile sgd|adam|unscale|update_scale ...`: the candidates of the optimizer and
// loss-scaling ops and their times. The tensor list is --sizes (comma-separated dims, each
// AxBxC...) or --model resnet50 (ResNet-50's 161 parameters). Every repro() line of their descs
// parses here.

#include <dnnx/ops/optim.hpp>

#include "layer_args.hpp"

#include <string>
#include <vector>

namespace dnnx::cli {
namespace {

// The tensor list and dtype every multi-tensor op takes, exactly as typed.
struct ListArgs {
  std::string sizes;
  std::string model;
  std::string dtype = "f32";
};

void add_list_options(CLI::App& command, ListArgs& args) {
  command
      .add_option("--sizes", args.sizes,
                  "the tensors' dims, comma-separated, each AxBxC... (e.g. 64x3x7x7,64,64)")
      ->type_name("DIMS,...");
  command.add_option("--model", args.model, "a built-in tensor list instead: resnet50")
      ->type_name("NAME");
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16 (parameters and gradients)")
      ->type_name("DTYPE")
      ->capture_default_str();
}

std::vector<Dims> parse_shapes(const ListArgs& args) {
  if (args.sizes.empty() == args.model.empty())
    throw UsageError("give exactly one of --sizes and --model");
  if (!args.model.empty()) {
    if (args.model != "resnet50")
      throw UsageError("--model '" + args.model + "': accepted: resnet50");
    return resnet50_parameter_shapes();
  }
  std::vector<Dims> shapes;
  std::string_view rest = args.sizes;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (item.empty()) throw UsageError("--sizes '" + args.sizes + "': an entry is empty");
    shapes.push_back(parse_with(
        "--sizes", item, [](std::string_view text) { return Dims::parse(text, "--sizes entry"); }));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return shapes;
}

struct SgdArgs {
  ListArgs list;
  bool master_weights = false, momentum = false, nesterov = false, maximize = false;
  bool grad_scale = false, found_inf = false;
};

void add_step_flags(CLI::App& command, bool& master_weights, bool& maximize, bool& grad_scale,
                    bool& found_inf) {
  command.add_flag("--master-weights", master_weights, "update f32 master copies of the params");
  command.add_flag("--maximize", maximize, "ascend the gradient");
  command.add_flag("--grad-scale", grad_scale, "a device scalar divides every gradient");
  command.add_flag("--found-inf", found_inf, "a device scalar skips the step when nonzero");
}

void add_sgd_options(CLI::App& command, SgdArgs& args) {
  add_list_options(command, args.list);
  add_step_flags(command, args.master_weights, args.maximize, args.grad_scale, args.found_inf);
  command.add_flag("--momentum", args.momentum, "momentum buffers (momentum > 0)");
  command.add_flag("--nesterov", args.nesterov, "Nesterov momentum (needs --momentum)");
}

SgdDesc parse_sgd(const SgdArgs& args) {
  SgdDesc desc;
  desc.shapes = parse_shapes(args.list);
  desc.dtype = parse_dtype_arg("--dtype", args.list.dtype);
  desc.master_weights = args.master_weights;
  desc.momentum = args.momentum;
  desc.nesterov = args.nesterov;
  desc.maximize = args.maximize;
  desc.grad_scale = args.grad_scale;
  desc.found_inf = args.found_inf;
  desc.validate();
  return desc;
}

struct AdamArgs {
  ListArgs list;
  bool master_weights = false, amsgrad = false, decoupled = false, maximize = false;
  bool grad_scale = false, found_inf = false;
};

void add_adam_options(CLI::App& command, AdamArgs& args) {
  add_list_options(command, args.list);
  add_step_flags(command, args.master_weights, args.maximize, args.grad_scale, args.found_inf);
  command.add_flag("--amsgrad", args.amsgrad, "keep and use max_exp_avg_sq");
  command.add_flag("--decoupled-weight-decay", args.decoupled,
                   "AdamW: decay the parameters, not the gradients");
}

AdamDesc parse_adam(const AdamArgs& args) {
  AdamDesc desc;
  desc.shapes = parse_shapes(args.list);
  desc.dtype = parse_dtype_arg("--dtype", args.list.dtype);
  desc.master_weights = args.master_weights;
  desc.amsgrad = args.amsgrad;
  desc.decoupled_weight_decay = args.decoupled;
  desc.maximize = args.maximize;
  desc.grad_scale = args.grad_scale;
  desc.found_inf = args.found_inf;
  desc.validate();
  return desc;
}

struct UnscaleArgs {
  ListArgs list;
  bool reset_found_inf = false, from_scale = false;
};

void add_unscale_options(CLI::App& command, UnscaleArgs& args) {
  add_list_options(command, args.list);
  command.add_flag("--reset-found-inf", args.reset_found_inf, "set found_inf to 0 first");
  command.add_flag("--from-scale", args.from_scale,
                   "the scalar given is the scale, not its inverse");
}

UnscaleDesc parse_unscale(const UnscaleArgs& args) {
  UnscaleDesc desc;
  desc.shapes = parse_shapes(args.list);
  desc.dtype = parse_dtype_arg("--dtype", args.list.dtype);
  desc.reset_found_inf = args.reset_found_inf;
  desc.from_scale = args.from_scale;
  desc.validate();
  return desc;
}

struct UpdateScaleArgs {};

}  // namespace

void add_sgd_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<SgdArgs>(
      algos, profile, action,
      {.op = OpKind::sgd,
       .algos_help = "candidates of a multi-tensor SGD step: id, support status or reason, "
                     "workspace, determinism",
       .profile_help = "time every candidate of a multi-tensor SGD step",
       .add_options = add_sgd_options,
       .parse = layer_parser<SgdArgs>(parse_sgd, sgd_list, sgd_profile, sgd_select)});
}

void add_adam_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<AdamArgs>(
      algos, profile, action,
      {.op = OpKind::adam,
       .algos_help = "candidates of a multi-tensor Adam / AdamW step: id, support status or "
                     "reason, workspace, determinism",
       .profile_help = "time every candidate of a multi-tensor Adam / AdamW step",
       .add_options = add_adam_options,
       .parse = layer_parser<AdamArgs>(parse_adam, adam_list, adam_profile, adam_select)});
}

void add_unscale_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<UnscaleArgs>(
      algos, profile, action,
      {.op = OpKind::unscale,
       .algos_help = "candidates of the loss scaler's non-finite check and unscale",
       .profile_help = "time every candidate of the loss scaler's non-finite check and unscale",
       .add_options = add_unscale_options,
       .parse = layer_parser<UnscaleArgs>(parse_unscale, unscale_list, unscale_profile,
                                          unscale_select)});
}

void add_update_scale_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<UpdateScaleArgs>(
      algos, profile, action,
      {.op = OpKind::update_scale,
       .algos_help = "candidates of the loss scaler's scale update",
       .profile_help = "time every candidate of the loss scaler's scale update",
       .add_options = [](CLI::App&, UpdateScaleArgs&) {},
       .parse =
           [](const UpdateScaleArgs&) {
             return parsed_layer(UpdateScaleDesc{}, DType::f32, update_scale_list,
                                 update_scale_profile, update_scale_select);
           }});
}

}  // namespace dnnx::cli
