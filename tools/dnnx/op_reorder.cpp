// `dnnx algos reorder ...` and `dnnx profile reorder ...`: the candidates of a layout / dtype
// reorder (dst = alpha * src + beta * dst), and their times. Every ReorderDesc::repro() line
// parses here.

#include <dnnx/ops/reorder.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one reorder, exactly as typed.
struct ReorderArgs {
  std::string dims;
  std::string src_dtype = "f32";
  std::string dst_dtype = "f32";
  std::string src_layout = "nchw";
  std::string dst_layout = "nhwc";
  std::string alpha = "1";
  std::string beta = "0";
};

void add_reorder_options(CLI::App& command, ReorderArgs& args) {
  command.add_option("--dims", args.dims, "dims of src and dst, rank 1 to 5 (e.g. 32x64x56x56)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--src-dtype", args.src_dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--dst-dtype", args.dst_dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--src-layout", args.src_layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
  command.add_option("--dst-layout", args.dst_layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
  command.add_option("--alpha", args.alpha, "scale of src")->type_name("A")->capture_default_str();
  command.add_option("--beta", args.beta, "scale of dst's previous contents (0: dst is not read)")
      ->type_name("B")
      ->capture_default_str();
}

ReorderDesc parse_reorder(const ReorderArgs& args) {
  ReorderDesc desc;
  desc.dims = parse_dims_of_rank("--dims", args.dims, 1, 5, "rank 1 to 5");
  desc.src_dtype = parse_dtype_arg("--src-dtype", args.src_dtype);
  desc.dst_dtype = parse_dtype_arg("--dst-dtype", args.dst_dtype);
  desc.src_layout = parse_layout_arg("--src-layout", args.src_layout);
  desc.dst_layout = parse_layout_arg("--dst-layout", args.dst_layout);
  // Scales are f32 in the desc; the desc's validation judges infinite ones.
  desc.alpha = parse_number<float>("--alpha", args.alpha, Finite::any);
  desc.beta = parse_number<float>("--beta", args.beta, Finite::any);
  desc.validate();
  return desc;
}

}  // namespace

void add_reorder_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<ReorderArgs>(
      algos, profile, action,
      {.op = OpKind::reorder,
       .algos_help = "candidates of a layout / dtype reorder (dst = alpha * src + beta * dst): "
                     "id, support status or reason, workspace",
       .profile_help = "time every candidate of a layout / dtype reorder, by median time",
       .add_options = add_reorder_options,
       .parse = [](const ReorderArgs& args) {
         const ReorderDesc desc = parse_reorder(args);
         // The dtype the tool reports the case under: the one converted from.
         return parsed_layer(desc, desc.src_dtype, reorder_list, reorder_profile, reorder_select);
       }});
}

}  // namespace dnnx::cli
