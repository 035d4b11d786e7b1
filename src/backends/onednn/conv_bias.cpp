// Bias of a convolution. oneDNN's binary and reduction primitives run in parallel, vectorised,
// and accumulate f16/bf16 sums in f32, for every dtype the CPU supports.
//
// Note [bias without oneDNN]
// Where oneDNN has no f16 (bf16) convolution it has no f16 (bf16) binary or reduction either
// (Note [f32 compute convolution] in conv_list.cpp). Computing them in f32 around oneDNN would
// need an f32 copy of dst, but bias_fwd and bias_bwd take no workspace, and a buffer kept per desc
// would hold as much memory as the largest activation. So where oneDNN refuses the primitive the
// bias runs as loops of this file:
//   fwd  dst += bias through run_epilogue (the fused convolution's unfused epilogue): one f32
//        addition and one rounding per element, the bits of oneDNN's binary add;
//   bwd  per channel, the sum in f64 of the elements of diff_dst, rounded once to the dtype of
//        diff_bias. Each channel is summed by one thread in a fixed order, so the result does not
//        depend on the thread count; it may differ from oneDNN's f32 reduction in the last bit.
// Both split large tensors over the backend's threads (Note [loop threads]).

#include "backends/onednn/conv_bias.hpp"

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/loop_pool.hpp"
#include "backends/onednn/memory.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <type_traits>
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

// A primitive over two memory objects: `activations` (dst or diff_dst) and `bias`. A null
// primitive means oneDNN has none for the dtypes: the loops run (Note [bias without oneDNN]).
struct BiasPrimitive {
  dnnl::primitive primitive;
  dnnl::memory activations;
  dnnl::memory bias;
  std::vector<dnnl_exec_arg_t> args;
  ErrorContext context;
};

ErrorContext context_of(const ConvDesc& desc, BiasOp op, bool loops = false) {
  ErrorContext context;
  context.op = op == BiasOp::fwd ? "conv bias_fwd" : "conv bias_bwd";
  context.repro = desc.repro(op == BiasOp::fwd ? Direction::fwd : Direction::bwd_weights);
  context.backend = "cpu";
  if (loops) {
    context.implementation = op == BiasOp::fwd ? "cpu:loop:bias_add" : "cpu:loop:bias_sum";
  } else {
    context.implementation = op == BiasOp::fwd ? "onednn:binary_add" : "onednn:reduction_sum";
  }
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
  const bool floating =
      tensor.dtype() == DType::f32 || tensor.dtype() == DType::f16 || tensor.dtype() == DType::bf16;
  if (tensor.data() == nullptr || tensor.rank() != 1 || tensor.dims()[0] != desc.out_channels ||
      tensor.strides()[0] != 1 || tensor.device() != Device::cpu() || !floating) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat(name, " is ", describe(tensor), "; expected a dense f32, f16 or bf16 [",
                    desc.out_channels, "] vector (out_channels) on cpu"),
        context_of(desc, op));
  }
}

// Calls body(std::type_identity<T>{}, load, store) with the storage type T of `dtype` (f32, f16
// or bf16) and its conversions to and from float.
template <typename Body>
void with_storage(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::f32:
      body(
          std::type_identity<float>{}, [](float v) { return v; }, [](float v) { return v; });
      return;
    case DType::f16:
      body(
          std::type_identity<std::uint16_t>{},
          [](std::uint16_t v) { return detail::half_to_float(v); },
          [](float v) { return detail::float_to_half(v); });
      return;
    case DType::bf16:
      body(
          std::type_identity<std::uint16_t>{},
          [](std::uint16_t v) { return detail::bf16_to_float(v); },
          [](float v) { return detail::float_to_bf16(v); });
      return;
    case DType::i32:
    case DType::i64: break;
  }
  DNNX_ASSERT(false, "conv bias loops on dtype ", to_string(dtype));
}

// Elements of one output channel per (n, c) plane (channels_first) or per position (last).
std::int64_t positions(const ConvDesc& desc) {
  return desc.dst_dims().product() / (desc.batch * desc.out_channels);
}

// Note [bias without oneDNN]: diff_bias[c] = sum of diff_dst over n and positions, in f64.
void sum_channels(const ConvDesc& desc, const void* diff_dst, void* diff_bias, DType bias_dtype) {
  const std::int64_t channels = desc.out_channels;
  const std::int64_t plane = positions(desc);
  const bool channels_last = desc.layout == Layout::channels_last;
  with_storage(desc.dtype, [&](auto type, auto load, auto) {
    using T = typename decltype(type)::type;
    const T* in = static_cast<const T*>(diff_dst);
    threads::run_ranges(
        channels, desc.dst_dims().product(), [&](std::int64_t first, std::int64_t last) {
          std::vector<double> sums(static_cast<std::size_t>(last - first), 0.0);
          for (std::int64_t n = 0; n < desc.batch; ++n) {
            if (channels_last) {
              for (std::int64_t p = 0; p < plane; ++p) {
                const T* row = in + (n * plane + p) * channels;
                for (std::int64_t c = first; c < last; ++c)
                  sums[static_cast<std::size_t>(c - first)] += load(row[c]);
              }
            } else {
              for (std::int64_t c = first; c < last; ++c) {
                const T* values = in + (n * channels + c) * plane;
                double sum = 0.0;
                for (std::int64_t p = 0; p < plane; ++p) sum += load(values[p]);
                sums[static_cast<std::size_t>(c - first)] += sum;
              }
            }
          }
          auto* out = static_cast<std::byte*>(diff_bias);
          for (std::int64_t c = first; c < last; ++c) {
            detail::store_f32(out + static_cast<std::size_t>(c) * size_of(bias_dtype), bias_dtype,
                              static_cast<float>(sums[static_cast<std::size_t>(c - first)]));
          }
        });
  });
}

}  // namespace

void run_epilogue(const ConvFusedDesc& desc, const void* conv_out, const void* bias,
                  DType bias_dtype, const void* residual, void* dst) {
  const std::int64_t channels = desc.conv.out_channels;
  const std::int64_t plane = positions(desc.conv);
  const float scale = desc.residual_scale;
  const bool relu = desc.activation == FusedActivation::relu;
  const bool channels_last = desc.conv.layout == Layout::channels_last;
  std::vector<float> bias_values;
  if (bias != nullptr) {
    bias_values.resize(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
      bias_values[static_cast<std::size_t>(c)] = detail::load_f32(
          static_cast<const std::byte*>(bias) + static_cast<std::size_t>(c) * size_of(bias_dtype),
          bias_dtype);
    }
  }
  // Rows are (n, c) planes for channels_first and (n, position) channel vectors for
  // channels_last, so the inner loops are unit-stride (and vectorise for f32).
  const std::int64_t rows = channels_last ? desc.conv.batch * plane : desc.conv.batch * channels;
  with_storage(desc.conv.dtype, [&](auto type, auto load, auto store) {
    using T = typename decltype(type)::type;
    const T* in = static_cast<const T*>(conv_out);
    const T* add = static_cast<const T*>(residual);
    T* out = static_cast<T*>(dst);
    const float* b = bias_values.empty() ? nullptr : bias_values.data();
    // One row: `count` elements from `offset`, channel `c` (channels_first) or 0.. (last).
    const auto row = [&](std::int64_t offset, std::int64_t count, std::int64_t c) {
      for (std::int64_t i = 0; i < count; ++i) {
        float v = load(in[offset + i]);
        if (b != nullptr) v += b[channels_last ? i : c];
        if (add != nullptr) v += scale * load(add[offset + i]);
        if (relu) v = v < 0.0f ? 0.0f : v;  // NaN stays NaN, as in the reference
        out[offset + i] = store(v);
      }
    };
    threads::run_ranges(rows, desc.dst_dims().product(),
                        [&](std::int64_t first, std::int64_t last) {
                          for (std::int64_t r = first; r < last; ++r) {
                            if (channels_last) {
                              row(r * channels, channels, 0);
                            } else {
                              row(r * plane, plane, r % channels);
                            }
                          }
                        });
  });
}

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
    std::string failure;  // Note [bias without oneDNN]: no primitive, the loops run
    const dnnl::primitive_desc_base pd = create_or_unavailable(
        [&]() -> dnnl::primitive_desc_base {
          if (key.op == BiasOp::fwd) {
            return dnnl::binary::primitive_desc(engine, dnnl::algorithm::binary_add, activations,
                                                bias, activations);
          }
          return dnnl::reduction::primitive_desc(engine, dnnl::algorithm::reduction_sum,
                                                 activations, bias, 0.0f, 0.0f);
        },
        "bias primitive descriptor", context, failure,
        // A reduction over nothing (batch 1, one output position: diff_dst has the bias's
        // dims) is dnnl_invalid_arguments to oneDNN: the loops run it.
        key.op == BiasOp::bwd ? Unavailable::unimplemented_or_invalid : Unavailable::unimplemented);
    if (!pd) {
      built->context = context_of(key.desc, key.op, true);
      cache.emplace(key, built);
      return built;
    }
    dnnl_call(context, "building the bias primitive", [&] {
      built->activations = dnnl::memory(activations, engine, DNNL_MEMORY_NONE);
      built->bias = dnnl::memory(bias, engine, DNNL_MEMORY_NONE);
      built->primitive = dnnl::primitive(pd.get());
      if (key.op == BiasOp::fwd) {
        // In place: dst is both the first source and the destination.
        built->args = {{DNNL_ARG_SRC_0, built->activations.get()},
                       {DNNL_ARG_SRC_1, built->bias.get()},
                       {DNNL_ARG_DST, built->activations.get()}};
      } else {
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
  if (!primitive->primitive) {
    ConvFusedDesc add_bias;
    add_bias.conv = desc;
    add_bias.bias = true;
    add_bias.activation = FusedActivation::identity;
    run_epilogue(add_bias, dst.data(), bias.data(), bias.dtype(), nullptr, dst.data());
    return;
  }
  impl_->run(*primitive, dst.data(), bias.data());
}

void ConvBias::bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) {
  desc.validate();
  check_bias(diff_bias, "diff_bias", desc, BiasOp::bwd);
  check_activations(diff_dst, "diff_dst", desc, BiasOp::bwd);
  auto primitive = impl_->get({desc, diff_bias.dtype(), BiasOp::bwd});
  if (!primitive->primitive) {
    sum_channels(desc, diff_dst.data(), diff_bias.data(), diff_bias.dtype());
    return;
  }
  impl_->run(*primitive, diff_dst.data(), diff_bias.data());
}

}  // namespace dnnx::onednn
