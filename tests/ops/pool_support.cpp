#include "ops/pool_support.hpp"

#include "ops/pool_cases.hpp"
#include "support/random.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

namespace dnnx::test {
namespace {

bool on_host(const Context& context) { return context.device().kind == Device::Kind::cpu; }

// `host` itself on a host context, else a copy on the context's device.
Tensor place(const Tensor& host, const Context& context) {
  if (on_host(context)) return host;
  Tensor device =
      Tensor::empty(host.dims(), host.dtype(), host.layout().value(), context.allocator());
  copy(host, device);
  return device;
}

Tensor fetch(const Tensor& tensor) {
  if (tensor.device().kind == Device::Kind::cpu) return tensor;
  Tensor host = Tensor::empty(tensor.dims(), tensor.dtype(), tensor.layout().value());
  copy(tensor, host);
  return host;
}

}  // namespace

const char* pool_direction_name(Direction direction) {
  return direction == Direction::fwd ? "fwd" : "bwd";
}

std::vector<std::int64_t> index_values(const Tensor& indices) {
  const Dims& dims = indices.dims();
  const std::size_t size = size_of(indices.dtype());
  const auto* base = static_cast<const unsigned char*>(indices.data());
  std::vector<std::int64_t> values(static_cast<std::size_t>(dims.product()));
  for (std::int64_t i = 0; i < dims.product(); ++i) {
    std::int64_t rest = i, offset = 0;
    for (int k = dims.rank() - 1; k >= 0; --k) {
      offset += rest % dims[k] * indices.strides()[k];
      rest /= dims[k];
    }
    const unsigned char* at = base + offset * static_cast<std::int64_t>(size);
    if (indices.dtype() == DType::i32) {
      std::int32_t value;
      std::memcpy(&value, at, sizeof value);
      values[static_cast<std::size_t>(i)] = value;
    } else {
      std::memcpy(&values[static_cast<std::size_t>(i)], at, sizeof(std::int64_t));
    }
  }
  return values;
}

Tensor index_tensor(const Dims& dims, DType dtype, Layout layout,
                    const std::vector<std::int64_t>& values) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  const std::size_t size = size_of(dtype);
  auto* base = static_cast<unsigned char*>(tensor.data());
  for (std::int64_t i = 0; i < dims.product(); ++i) {
    std::int64_t rest = i, offset = 0;
    for (int k = dims.rank() - 1; k >= 0; --k) {
      offset += rest % dims[k] * tensor.strides()[k];
      rest /= dims[k];
    }
    unsigned char* at = base + offset * static_cast<std::int64_t>(size);
    if (dtype == DType::i32) {
      const auto value = static_cast<std::int32_t>(values[static_cast<std::size_t>(i)]);
      std::memcpy(at, &value, sizeof value);
    } else {
      std::memcpy(at, &values[static_cast<std::size_t>(i)], sizeof(std::int64_t));
    }
  }
  return tensor;
}

PoolOperands pool_operands(const PoolDesc& desc, std::uint64_t seed) {
  PoolOperands operands;
  operands.src = pool_src(desc, seed);
  operands.diff_dst = pool_diff_dst(desc, seed ^ 0x5bd1e995u);
  Context reference(BackendKind::reference);
  operands.dst = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
  if (desc.indices) {
    operands.indices = Tensor::empty(desc.dst_dims(), DType::i64, desc.layout);
    pool_fwd(reference, desc, operands.src, operands.dst, operands.indices);
  } else {
    pool_fwd(reference, desc, operands.src, operands.dst);
  }
  return operands;
}

PoolRun run_pool(Context& context, const PoolDesc& desc, Direction direction,
                 const PoolOperands& operands, DType index_dtype) {
  const Dims out_dims = direction == Direction::fwd ? desc.dst_dims() : desc.src_dims();
  Tensor output = place(nan_tensor(out_dims, desc.dtype, desc.layout), context);
  PoolRun run;
  if (desc.indices) {
    const Dims dims = desc.dst_dims();
    if (direction == Direction::fwd) {
      Tensor indices = place(
          index_tensor(dims, index_dtype, desc.layout,
                       std::vector<std::int64_t>(static_cast<std::size_t>(dims.product()), -7)),
          context);
      run.choice = pool_fwd(context, desc, place(operands.src, context), output, indices);
      run.indices = fetch(indices);
    } else {
      const Tensor indices = place(
          index_tensor(dims, index_dtype, desc.layout, index_values(operands.indices)), context);
      run.choice = pool_bwd(context, desc, place(operands.diff_dst, context), indices, output);
    }
    run.output = fetch(output);
    return run;
  }
  const Tensor src = place(operands.src, context);
  if (direction == Direction::fwd) {
    run.choice = pool_fwd(context, desc, src, output);
  } else {
    run.choice = pool_bwd(context, desc, src, place(operands.dst, context),
                          place(operands.diff_dst, context), output);
  }
  run.output = fetch(output);
  return run;
}

std::vector<float> pool_error_scale(const PoolDesc& desc, Direction direction,
                                    const PoolOperands& operands) {
  // f16/bf16 values are exact in f32, so the f32 desc sees the same magnitudes (and the same
  // argmax: the routing of max depends on src alone, which keeps its signs here).
  PoolDesc wide = desc;
  wide.dtype = DType::f32;
  PoolOperands magnitudes;
  const auto widen = [&](const Tensor& tensor) {
    return tensor_from(tensor.dims(), DType::f32, desc.layout, tensor.to_f32());
  };
  const bool max = desc.mode == PoolMode::max;
  magnitudes.src = max ? widen(operands.src) : abs_tensor(operands.src, DType::f32, desc.layout);
  magnitudes.dst = widen(operands.dst);
  magnitudes.diff_dst = abs_tensor(operands.diff_dst, DType::f32, desc.layout);
  magnitudes.indices = operands.indices;  // the same routing
  Context reference(BackendKind::reference);
  std::vector<float> scale = run_pool(reference, wide, direction, magnitudes).output.to_f32();
  if (max && direction == Direction::fwd) {
    for (float& value : scale) value = std::fabs(value);
  }
  return scale;
}

// Note [pool tolerances]: max forward returns one of the inputs and must match exactly. The
// other outputs are short sums (a window's elements, or the gradients of the windows an element
// lies in), bounded relative to the sum of |terms| behind the element (pool_error_scale), so the
// bound holds whatever the cancellation. f32: the reference rounds its f64 sum once (2^-24); an
// f32 accumulation of K terms and a division by the count err by at most (K + 1) 2^-24, K <= 30
// in the case table; 16 ulps leaves room and still catches a wrong divisor or a misrouted
// gradient, which cost a sizeable fraction of the scale. f16/bf16: both sides round their output
// to the dtype (2^-11 resp. 2^-8 relative each), with f32 in between: 4 units of the dtype's
// rounding, as for convolution. f16's absolute term covers rounding in its subnormal range
// (spacing 2^-24).
Tolerance pool_tolerance(const PoolDesc& desc, Direction direction) {
  if (desc.mode == PoolMode::max && direction == Direction::fwd) return {0.0, 0.0};
  switch (desc.dtype) {
    case DType::f32: return {16 * 0x1.0p-24, 0.0};
    case DType::f16: return {4 * 0x1.0p-11, 0x1.0p-24};
    case DType::bf16: return {4 * 0x1.0p-8, 0.0};
    case DType::i32:
    case DType::i64: break;
  }
  return {};
}

std::string pool_context(const PoolDesc& desc, Direction direction, std::string_view candidate) {
  std::ostringstream out;
  out << "pool " << pool_direction_name(direction) << ", candidate " << candidate
      << "\n  desc: " << desc << "\n  repro: " << desc.repro(direction);
  return out.str();
}

}  // namespace dnnx::test
