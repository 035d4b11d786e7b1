#pragma once
/// \file
/// Everything public in one include.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/init.hpp>
#include <dnnx/op_table.hpp>
#include <dnnx/ops/accuracy.hpp>
#include <dnnx/ops/activation.hpp>
#include <dnnx/ops/add.hpp>
#include <dnnx/ops/argmax.hpp>
#include <dnnx/ops/batch_norm.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/conv_fused.hpp>
#include <dnnx/ops/cross_entropy.hpp>
#include <dnnx/ops/dropout.hpp>
#include <dnnx/ops/fill.hpp>
#include <dnnx/ops/matmul.hpp>
#include <dnnx/ops/optim.hpp>
#include <dnnx/ops/pool.hpp>
#include <dnnx/ops/reduce.hpp>
#include <dnnx/ops/softmax.hpp>
#include <dnnx/random.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>
#include <dnnx/version.hpp>
