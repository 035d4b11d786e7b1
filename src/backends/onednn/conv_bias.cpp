// Bias of a convolution. oneDNN's binary and reduction primitives run in parallel, vectorised,
// for every dtype and layout, and accumulate f16/bf16 sums in f32.

#include "backends/onednn/conv_bias.hpp"

#include "backends/onednn/check.hpp"
#include "backends/onednn/memory.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace dnnx::onednn {
namespace {

enum class BiasOp : std::uint8_t { fwd, bwd };

struct BiasKey {
  ConvDesc desc;
  DType bias_dtype;
  BiasOp op;
  bool operator==(const BiasKey&) const = default;
};

struct BiasKeyHash {
  std::size_t operator()(const BiasKey& key) const {
    return key.desc.hash() * 7 + static_cast<std::size_t>(key.bias_dtype) * 2 +
           static_cast<std::size_t>(key.op);
  }
};

// A primitive over two memory objects: `activations` (dst or diff_dst) and `bias`.
struct BiasPrimitive {
  dnnl::primitive primitive;
  dnnl::memory activations;
  dnnl::memory bias;
  std::vector<dnnl_exec_arg_t> args;
  ErrorContext context;
};

ErrorContext context_of(const ConvDesc& desc, BiasOp op) {
  ErrorContext context;
  context.op = op == BiasOp::fwd ? "conv bias_fwd" : "conv bias_bwd";
  context.repro = desc.repro(op == BiasOp::fwd ? Direction::fwd : Direction::bwd_weights);
  context.backend = "cpu";
  context.implementation = op == BiasOp::fwd ? "onednn:binary_add" : "onednn:reduction_sum";
  return context;
}

// The checks build their error context only on failure: they run on every call.
void check_activations(const Tensor& tensor, const char* name, const ConvDesc& desc, BiasOp op) {
  const Dims dims = desc.dst_dims();
  if (tensor.data() == nullptr || tensor.dims() != dims || tensor.dtype() != desc.dtype ||
      !tensor.is_dense(desc.layout) || tensor.device() != Device::cpu()) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat(name, " is ", describe(tensor), "; expected a dense ", to_string(desc.dtype),
                    '[', dims.to_string(), ' ', to_string(desc.layout), "] on cpu"),
        context_of(desc, op));
  }
}

void check_bias(const Tensor& tensor, const char* name, const ConvDesc& desc, BiasOp op) {
  if (tensor.data() == nullptr || tensor.rank() != 1 || tensor.dims()[0] != desc.out_channels ||
      tensor.strides()[0] != 1 || tensor.device() != Device::cpu()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(name, " is ", describe(tensor), "; expected a dense [",
                              desc.out_channels, "] vector (out_channels) on cpu"),
                  context_of(desc, op));
  }
}

}  // namespace

struct ConvBias::Impl {
  std::shared_ptr<Runtime> runtime;
  std::mutex mutex;  // guards cache
  std::unordered_map<BiasKey, std::shared_ptr<BiasPrimitive>, BiasKeyHash> cache;

  std::shared_ptr<BiasPrimitive> get(const BiasKey& key) {
    std::lock_guard lock(mutex);
    if (auto found = cache.find(key); found != cache.end()) return found->second;
    const ErrorContext context = context_of(key.desc, key.op);
    const dnnl::engine& engine = runtime->engine;
    const memory::desc activations = conv_geometry(key.desc).dst;
    const memory::desc bias = bias_md(key.desc, key.bias_dtype);
    auto built = std::make_shared<BiasPrimitive>();
    built->context = context;
    dnnl_call(context, "building the bias primitive", [&] {
      built->activations = dnnl::memory(activations, engine, DNNL_MEMORY_NONE);
      built->bias = dnnl::memory(bias, engine, DNNL_MEMORY_NONE);
      if (key.op == BiasOp::fwd) {
        // In place: dst is both the first source and the destination.
        built->primitive = dnnl::binary(dnnl::binary::primitive_desc(
            engine, dnnl::algorithm::binary_add, activations, bias, activations));
        built->args = {{DNNL_ARG_SRC_0, built->activations.get()},
                       {DNNL_ARG_SRC_1, built->bias.get()},
                       {DNNL_ARG_DST, built->activations.get()}};
      } else {
        built->primitive = dnnl::reduction(dnnl::reduction::primitive_desc(
            engine, dnnl::algorithm::reduction_sum, activations, bias, 0.0f, 0.0f));
        built->args = {{DNNL_ARG_SRC, built->activations.get()}, {DNNL_ARG_DST, built->bias.get()}};
      }
    });
    cache.emplace(key, built);
    return built;
  }

  void run(BiasPrimitive& primitive, void* activations, void* bias) {
    const ErrorContext& context = primitive.context;
    std::lock_guard lock(runtime->mutex);  // Note [one stream]
    DNNX_DNNL_CHECK(dnnl_memory_set_data_handle(primitive.activations.get(), activations), context,
                    "binding a data pointer");
    DNNX_DNNL_CHECK(dnnl_memory_set_data_handle(primitive.bias.get(), bias), context,
                    "binding a data pointer");
    const dnnl_stream_t stream = runtime->stream.get();
    DNNX_DNNL_CHECK(
        dnnl_primitive_execute(primitive.primitive.get(), stream,
                               static_cast<int>(primitive.args.size()), primitive.args.data()),
        context, "executing");
    DNNX_DNNL_CHECK(dnnl_stream_wait(stream), context, "waiting for the stream");
  }
};

ConvBias::ConvBias(std::shared_ptr<Runtime> runtime) : impl_(std::make_unique<Impl>()) {
  impl_->runtime = std::move(runtime);
}

ConvBias::~ConvBias() = default;

void ConvBias::fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst) {
  desc.validate();
  check_bias(bias, "bias", desc, BiasOp::fwd);
  check_activations(dst, "dst", desc, BiasOp::fwd);
  auto primitive = impl_->get({desc, bias.dtype(), BiasOp::fwd});
  impl_->run(*primitive, dst.data(), bias.data());
}

void ConvBias::bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) {
  desc.validate();
  check_bias(diff_bias, "diff_bias", desc, BiasOp::bwd);
  check_activations(diff_dst, "diff_dst", desc, BiasOp::bwd);
  auto primitive = impl_->get({desc, diff_bias.dtype(), BiasOp::bwd});
  impl_->run(*primitive, diff_dst.data(), diff_bias.data());
}

}  // namespace dnnx::onednn
