// `dnnx algos matmul ...` and `dnnx profile matmul ...`: the candidates of a matrix multiply (a
// linear layer), and their times. Every MatmulDesc::repro() line parses here.

#include <dnnx/ops/matmul.hpp>

#include "layer_args.hpp"

#include <limits>

namespace dnnx::cli {
namespace {

// The description of one matrix multiply, exactly as typed.
struct MatmulArgs {
  std::string batch = "1";
  std::string m, n, k;
  bool transpose_a = false;
  bool transpose_b = false;
  bool broadcast_b = false;
  bool broadcast_a = false;
  bool bias = false;
  std::string alpha = "1";
  std::string beta = "0";
  std::string dtype = "f32";
  std::string activation = "none";
};

void add_matmul_options(CLI::App& command, MatmulArgs& args) {
  command.add_option("--batch", args.batch, "independent products")
      ->type_name("N")
      ->capture_default_str();
  command.add_option("--m", args.m, "rows of op(a) and dst")->type_name("M")->required();
  command.add_option("--n", args.n, "columns of op(b) and dst")->type_name("N")->required();
  command.add_option("--k", args.k, "columns of op(a), rows of op(b)")->type_name("K")->required();
  command.add_flag("--transpose-a", args.transpose_a, "a is stored k x m");
  command.add_flag("--transpose-b", args.transpose_b,
                   "b is stored n x k (a linear layer's out x in weight)");
  command.add_flag("--broadcast-b", args.broadcast_b, "one b for every product of the batch");
  command.add_flag("--broadcast-a", args.broadcast_a, "one a for every product of the batch");
  command.add_flag("--bias", args.bias, "add a bias of n values (its gradient in bwd_weights)");
  command.add_option("--alpha", args.alpha, "scale of the product")
      ->type_name("A")
      ->capture_default_str();
  command.add_option("--beta", args.beta,
                     "scale of the output's previous contents (0: the output is not read)")
      ->type_name("B")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command
      .add_option("--activation", args.activation,
                  "none | relu | gelu_tanh (gelu): the epilogue's function, applied last; "
                  "fwd_training keeps its state for the backward")
      ->type_name("ACT")
      ->capture_default_str();
}

MatmulDesc parse_matmul(const MatmulArgs& args) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  MatmulDesc desc;
  desc.batch = parse_int("--batch", args.batch, 1, max);
  desc.m = parse_int("--m", args.m, 1, max);
  desc.n = parse_int("--n", args.n, 1, max);
  desc.k = parse_int("--k", args.k, 1, max);
  desc.transpose_a = args.transpose_a;
  desc.transpose_b = args.transpose_b;
  desc.broadcast_b = args.broadcast_b;
  desc.broadcast_a = args.broadcast_a;
  desc.bias = args.bias;
  // Scales are f32 in the desc; the desc's validation judges infinite ones.
  desc.alpha = parse_number<float>("--alpha", args.alpha, Finite::any);
  desc.beta = parse_number<float>("--beta", args.beta, Finite::any);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.activation = parse_with("--activation", args.activation, [](std::string_view value) {
    return parse_matmul_activation(value);
  });
  desc.validate();
  return desc;
}

}  // namespace

void add_matmul_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<MatmulArgs>(
      algos, profile, action,
      {.op = OpKind::matmul,
       .algos_help = "candidates of a matrix multiply (linear layer): id, support status or "
                     "reason, workspace, determinism",
       .profile_help = "time every candidate of a matrix multiply, per direction, by median time",
       .add_options = add_matmul_options,
       .parse = [](const MatmulArgs& args) {
         const MatmulDesc desc = parse_matmul(args);
         ParsedLayer parsed =
             parsed_layer(desc, desc.dtype, matmul_list, matmul_profile, matmul_select);
         // fwd_training keeps an activation's state: there is none to keep without one.
         parsed.has_direction = [desc](Direction direction) {
           return direction != Direction::fwd_training || desc.activation != MatmulActivation::none;
         };
         return parsed;
       }});
}

}  // namespace dnnx::cli
