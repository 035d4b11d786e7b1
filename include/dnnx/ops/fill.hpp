#pragma once
/// \file
/// Filling a tensor with a constant or with seeded random values (uniform, normal, truncated
/// normal) on any backend: the same bits on reference, cpu and cudnn for the same Generator state.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/random.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// What a fill draws.
enum class Distribution : std::uint8_t {
  constant,      ///< every element FillParams::value; draws nothing
  uniform,       ///< low + (high - low) u, u uniform in [0, 1) on a 2^-24 grid
  normal,        ///< mean + std z, z standard normal (Box-Muller)
  trunc_normal,  ///< PyTorch's trunc_normal_: normal(mean, std) restricted to [a, b]
};
/// "constant", "uniform", "normal", "trunc_normal".
std::string_view to_string(Distribution distribution);
/// Parses the names above; throws InvalidArgument listing them.
Distribution parse_distribution(std::string_view text);

/// What a fill computes: the tensor (dims, dtype, layout) and the distribution. Plain data:
/// comparable, hashable, printable; the cache key. The distribution's parameters and the
/// generator's state are values of the call (FillParams, Generator), so filling many tensors of
/// one shape with different parameters shares one choice.
struct FillDesc {
  Dims dims;                               ///< rank 1 to 5, entries >= 0 (0 elements allowed)
  DType dtype = DType::f32;                ///< f32, f16, bf16
  Layout layout = Layout::channels_first;  ///< memory order; values follow the logical index
  Distribution distribution = Distribution::uniform;

  /// The desc of filling `tensor` (its dims, dtype and dense layout) with `distribution`; throws
  /// InvalidArgument when the tensor is not dense.
  static FillDesc of(const Tensor& tensor, Distribution distribution);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile fill --dims 64x3x7x7 --distribution normal --dtype f32 --layout nchw`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const FillDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const FillDesc& desc);

/// The parameters of a distribution (the fields it does not use are ignored).
struct FillParams {
  float value = 0.0f;  ///< constant: any value (inf and NaN included)
  float low = 0.0f;    ///< uniform: finite, low <= high, high - low finite in f32
  float high = 1.0f;   ///< uniform
  float mean = 0.0f;   ///< normal, trunc_normal: finite
  float std = 1.0f;    ///< normal: finite, >= 0; trunc_normal: finite, > 0
  float a = -2.0f;     ///< trunc_normal: lower bound, finite, a < b
  float b = 2.0f;      ///< trunc_normal: upper bound, finite

  static FillParams constant(float value);
  static FillParams uniform(float low, float high);
  static FillParams normal(float mean, float std);
  static FillParams trunc_normal(float mean, float std, float a, float b);

  /// Throws InvalidArgument naming the parameter of `distribution` that is out of range.
  void validate(Distribution distribution) const;
};

/// Fills `dst` (desc's dims, dtype, dense in desc.layout, on the context's device) with
/// `params`' distribution, drawing from `generator` (Note [counter-based random numbers] in
/// src/core/philox.hpp): element i gets the value of word i % 4 of Philox block
/// generator.offset() + i / 4, i the logical row-major index. A random distribution advances
/// the generator by ceil(numel / 4) blocks once the fill ran; constant leaves it alone. Returns
/// the choice that ran.
std::shared_ptr<const Choice> fill_fwd(Context& context, const FillDesc& desc,
                                       const FillParams& params, Generator& generator, Tensor& dst);

/// Every candidate of the context's backend for (desc, fwd), nothing run.
std::vector<AlgoInfo> fill_list(Context& context, const FillDesc& desc, Direction direction);
/// The choice the context's policy makes (may time candidates; cached).
std::shared_ptr<const Choice> fill_select(Context& context, const FillDesc& desc,
                                          Direction direction);
/// Times every candidate on a scratch tensor and returns the table.
ProfileResult fill_profile(Context& context, const FillDesc& desc, Direction direction);

}  // namespace dnnx
