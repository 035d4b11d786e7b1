#pragma once
/// \file
/// dnnx::nn in one include: modules, layers, recurrent layers, containers, the loss, optimizers,
/// model builders, report and convert.

#include <dnnx/nn/containers.hpp>
#include <dnnx/nn/layers.hpp>
#include <dnnx/nn/loss.hpp>
#include <dnnx/nn/models.hpp>
#include <dnnx/nn/module.hpp>
#include <dnnx/nn/optim.hpp>
#include <dnnx/nn/rnn.hpp>
#include <dnnx/nn/tools.hpp>
