// `dnnx algos add ...` and `dnnx profile add ...`: the candidates of a broadcasting tensor add,
// and their times. Every AddDesc::repro() line parses here.

#include <dnnx/ops/add.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one add, exactly as typed.
struct AddArgs {
  std::string src;
  std::string dst;
  std::string alpha = "1";
  std::string beta = "1";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_add_options(CLI::App& command, AddArgs& args) {
  command.add_option("--src", args.src, "src dims: each equal to dst's or 1 (e.g. 1x256x1x1)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--dst", args.dst, "dst dims, rank 1 to 5 (N x C x spatial...)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--alpha", args.alpha, "scale of src")->type_name("A")->capture_default_str();
  command.add_option("--beta", args.beta, "scale of dst's previous contents (0: dst is not read)")
      ->type_name("B")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout);
}

AddDesc parse_add(const AddArgs& args) {
  AddDesc desc;
  desc.src_dims = parse_dims("--src", args.src);
  desc.dst_dims = parse_dims("--dst", args.dst);
  // Scales are f32 in the desc; the desc's validation judges infinite ones.
  desc.alpha = parse_number<float>("--alpha", args.alpha, Finite::any);
  desc.beta = parse_number<float>("--beta", args.beta, Finite::any);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_add_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<AddArgs>(
      algos, profile, action,
      {.op = OpKind::add,
       .algos_help =
           "candidates of a broadcasting tensor add: id, support status or reason, workspace",
       .profile_help =
           "time every candidate of a broadcasting tensor add, per direction, by median time",
       .add_options = add_add_options,
       .parse = layer_parser<AddArgs>(parse_add, add_list, add_profile, add_select)});
}

}  // namespace dnnx::cli
