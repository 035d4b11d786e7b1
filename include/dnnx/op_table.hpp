#pragma once
/// \file
/// The op table: one line per op. Everything that enumerates ops derives from it: OpKind and its
/// names (algo.hpp), the directions an op has and how the CLI and the environment spell them,
/// the policies of TuneOptions and their DNNX_ALGO_<OP>_<DIRECTION> variables, which backends
/// build the op (and the error naming them for a backend that does not), the cache key's op
/// name, and the `dnnx algos|profile <op>` subcommands. docs/adding-an-op.md walks through
/// adding a line.
///
/// Columns of X(kind, Type, name, aliases, directions, reference, cpu, cudnn, policies):
///   kind        OpKind enumerator; the backends' factories are make_<kind>_backend and the CLI's
///               subcommands add_<kind>_commands
///   Type        prefix of the op's types: dnnx::<Type>Desc (public) and detail::<Type>Args
///   name        the op's name in the CLI, cache keys, messages and environment variables
///   aliases     other spellings parse_op_kind accepts, comma-separated ("" for none)
///   directions  the op's directions: a set from dnnx::op_directions (algo.hpp)
///   reference, cpu, cudnn
///               1 when that backend implements the op, 0 when not (asking a backend for an op
///               it lacks raises Unsupported naming the backends that have it)
///   policies    the op whose TuneOptions policies select its candidates: the op itself, or an
///               op it extends (the fused convolution is chosen under convolution's policies)
///
/// Order is the enum's order; an op whose factory uses another op's backend comes after it.

// clang-format off
#define DNNX_OP_TABLE(X)                                                                        \
  X(conv,          Conv,         "conv",       "convolution",   conv,     1, 1, 1, conv)          \
  X(pool,          Pool,         "pool",       "pooling",       fwd_bwd,  1, 1, 1, pool)          \
  X(activation,    Activation,   "act",        "activation",    fwd_bwd,  1, 1, 1, activation)    \
  X(softmax,       Softmax,      "softmax",    "",              fwd_bwd,  1, 1, 1, softmax)       \
  X(cross_entropy, CrossEntropy, "xent",       "cross_entropy", fwd_bwd,  1, 1, 1, cross_entropy) \
  X(batch_norm,    BatchNorm,    "bnorm",      "batch_norm",    fwd_bwd,  1, 1, 1, batch_norm)    \
  X(add,           Add,          "add",        "",              fwd_bwd,  1, 1, 1, add)           \
  X(conv_fused,    ConvFused,    "conv_fused", "",              fwd_only, 1, 1, 1, conv)          \
  X(matmul,        Matmul,       "matmul",     "linear,gemm",   training_weights, 1, 1, 1, matmul) \
  X(sgd,           Sgd,          "sgd",        "",              fwd_only, 1, 1, 1, sgd)           \
  X(adam,          Adam,         "adam",       "adamw",         fwd_only, 1, 1, 1, adam)          \
  X(unscale,       Unscale,      "unscale",    "amp_unscale",   fwd_only, 1, 1, 1, unscale)       \
  X(update_scale,  UpdateScale,  "update_scale", "amp_update_scale", fwd_only, 1, 1, 1, update_scale)  \
  X(fill,          Fill,         "fill",       "init",          fwd_only, 1, 1, 1, fill)          \
  X(dropout,       Dropout,      "dropout",    "",              training, 1, 1, 1, dropout)       \
  X(reduce,        Reduce,       "reduce",     "",              fwd_bwd,  1, 1, 1, reduce)        \
  X(argmax,        Argmax,       "argmax",     "",              fwd_only, 1, 1, 1, argmax)        \
  X(accuracy,      Accuracy,     "accuracy",   "",              fwd_only, 1, 1, 1, accuracy)      \
  X(rnn,           Rnn,          "rnn",        "recurrent",     training_weights, 1, 1, 1, rnn) \
  X(reorder,       Reorder,      "reorder",    "transform",     fwd_only, 1, 1, 1, reorder)
// clang-format on

/// Expands `code` when `flag` (a table column) is 1, to nothing when it is 0.
#define DNNX_OP_IF(flag, ...) DNNX_OP_IF_##flag(__VA_ARGS__)
#define DNNX_OP_IF_1(...) __VA_ARGS__
#define DNNX_OP_IF_0(...)
