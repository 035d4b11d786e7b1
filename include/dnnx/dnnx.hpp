#pragma once
/// \file
/// Everything public in one include.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>
#include <dnnx/version.hpp>
