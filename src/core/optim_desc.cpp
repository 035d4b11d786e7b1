// The descs of the optimizer and loss-scaling ops: validation, printing, keys; and ResNet-50's
// parameter shapes. Every message names the field and its value.

#include <dnnx/ops/optim.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

// Every shape of a tensor list: at least one, each of rank 1 to 5 with sizes >= 0 (0: an empty
// tensor), the total element count addressable.
void validate_shapes(const std::vector<Dims>& shapes) {
  DNNX_CHECK_ARG(!shapes.empty(), "shapes is empty; give the dims of at least one tensor");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Dims& dims = shapes[i];
    DNNX_CHECK_ARG(dims.rank() >= 1, "shapes[", i,
                   "] has rank 0; give a scalar parameter the dims {1}");
    const std::int64_t count = detail::checked_count(dims, detail::cat("shapes[", i, "]"));
    const auto sum = detail::checked_add(total, count);
    DNNX_CHECK_ARG(sum && *sum <= detail::max_elements,
                   "shapes hold more than 2^60 elements in all");
    total = *sum;
  }
}

void validate_dtype(DType dtype) {
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
}

std::int64_t total_numel(const std::vector<Dims>& shapes) {
  std::int64_t total = 0;
  for (const Dims& dims : shapes) total += dims.product();
  return total;
}

// `--model resnet50` for ResNet-50's list, else `--sizes a,b,...` (each entry AxBxC).
std::string sizes_flag(const std::vector<Dims>& shapes) {
  if (shapes == resnet50_parameter_shapes()) return "--model resnet50";
  std::string text = "--sizes ";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) text += ',';
    text += shapes[i].to_string();
  }
  return text;
}

// The shapes in a key: every dims, ';' separated.
std::string shapes_key(const std::vector<Dims>& shapes) {
  std::string text;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) text += ';';
    text += shapes[i].to_string();
  }
  return text;
}

void hash_shapes(std::size_t& h, const std::vector<Dims>& shapes) {
  detail::hash_mix(h, shapes.size());
  for (const Dims& dims : shapes) detail::hash_dims(h, dims);
}

const char* flag(bool on, const char* text) { return on ? text : ""; }

}  // namespace

// ---- sgd ------------------------------------------------------------------------------------

void SgdDesc::validate() const {
  validate_shapes(shapes);
  validate_dtype(dtype);
  DNNX_CHECK_ARG(!nesterov || momentum,
                 "nesterov needs momentum buffers (set momentum), got nesterov without momentum");
}

std::int64_t SgdDesc::numel() const { return total_numel(shapes); }

std::string SgdDesc::repro(Direction direction) const {
  std::ostringstream out;
  out << "dnnx profile sgd " << sizes_flag(shapes) << " --dtype " << to_string(dtype)
      << flag(master_weights, " --master-weights") << flag(momentum, " --momentum")
      << flag(nesterov, " --nesterov") << flag(maximize, " --maximize")
      << flag(grad_scale, " --grad-scale") << flag(found_inf, " --found-inf") << " --direction "
      << to_string(direction);
  return out.str();
}

std::string SgdDesc::key() const {
  std::ostringstream out;
  out << "sgd " << to_string(dtype) << flag(master_weights, " master")
      << flag(momentum, " momentum") << flag(nesterov, " nesterov") << flag(maximize, " maximize")
      << flag(grad_scale, " grad_scale") << flag(found_inf, " found_inf")
      << " tensors=" << shapes.size() << ' ' << shapes_key(shapes);
  return out.str();
}

std::size_t SgdDesc::hash() const {
  std::size_t h = 0x5ad;
  hash_shapes(h, shapes);
  detail::hash_mix(h, static_cast<std::uint64_t>(dtype));
  detail::hash_mix(h, (master_weights ? 1u : 0u) | (momentum ? 2u : 0u) | (nesterov ? 4u : 0u) |
                          (maximize ? 8u : 0u) | (grad_scale ? 16u : 0u) | (found_inf ? 32u : 0u));
  return h;
}

std::ostream& operator<<(std::ostream& out, const SgdDesc& desc) { return out << desc.key(); }

// ---- adam -----------------------------------------------------------------------------------

AdamDesc AdamDesc::adamw(std::vector<Dims> shapes, DType dtype) {
  AdamDesc desc;
  desc.shapes = std::move(shapes);
  desc.dtype = dtype;
  desc.decoupled_weight_decay = true;
  return desc;
}

void AdamDesc::validate() const {
  validate_shapes(shapes);
  validate_dtype(dtype);
}

std::int64_t AdamDesc::numel() const { return total_numel(shapes); }

std::string AdamDesc::repro(Direction direction) const {
  std::ostringstream out;
  out << "dnnx profile adam " << sizes_flag(shapes) << " --dtype " << to_string(dtype)
      << flag(master_weights, " --master-weights") << flag(amsgrad, " --amsgrad")
      << flag(decoupled_weight_decay, " --decoupled-weight-decay") << flag(maximize, " --maximize")
      << flag(grad_scale, " --grad-scale") << flag(found_inf, " --found-inf") << " --direction "
      << to_string(direction);
  return out.str();
}

std::string AdamDesc::key() const {
  std::ostringstream out;
  out << (decoupled_weight_decay ? "adamw " : "adam ") << to_string(dtype)
      << flag(master_weights, " master") << flag(amsgrad, " amsgrad") << flag(maximize, " maximize")
      << flag(grad_scale, " grad_scale") << flag(found_inf, " found_inf")
      << " tensors=" << shapes.size() << ' ' << shapes_key(shapes);
  return out.str();
}

std::size_t AdamDesc::hash() const {
  std::size_t h = 0xada;
  hash_shapes(h, shapes);
  detail::hash_mix(h, static_cast<std::uint64_t>(dtype));
  detail::hash_mix(h, (master_weights ? 1u : 0u) | (amsgrad ? 2u : 0u) |
                          (decoupled_weight_decay ? 4u : 0u) | (maximize ? 8u : 0u) |
                          (grad_scale ? 16u : 0u) | (found_inf ? 32u : 0u));
  return h;
}

std::ostream& operator<<(std::ostream& out, const AdamDesc& desc) { return out << desc.key(); }

// ---- unscale --------------------------------------------------------------------------------

void UnscaleDesc::validate() const {
  validate_shapes(shapes);
  validate_dtype(dtype);
}

std::int64_t UnscaleDesc::numel() const { return total_numel(shapes); }

std::string UnscaleDesc::repro(Direction direction) const {
  std::ostringstream out;
  out << "dnnx profile unscale " << sizes_flag(shapes) << " --dtype " << to_string(dtype)
      << flag(reset_found_inf, " --reset-found-inf") << flag(from_scale, " --from-scale")
      << " --direction " << to_string(direction);
  return out.str();
}

std::string UnscaleDesc::key() const {
  std::ostringstream out;
  out << "unscale " << to_string(dtype) << flag(reset_found_inf, " reset")
      << flag(from_scale, " from_scale") << " tensors=" << shapes.size() << ' '
      << shapes_key(shapes);
  return out.str();
}

std::size_t UnscaleDesc::hash() const {
  std::size_t h = 0x45ca1e;
  hash_shapes(h, shapes);
  detail::hash_mix(h, static_cast<std::uint64_t>(dtype));
  detail::hash_mix(h, (reset_found_inf ? 1u : 0u) | (from_scale ? 2u : 0u));
  return h;
}

std::ostream& operator<<(std::ostream& out, const UnscaleDesc& desc) { return out << desc.key(); }

// ---- update_scale ---------------------------------------------------------------------------

void UpdateScaleDesc::validate() const {}

std::string UpdateScaleDesc::repro(Direction direction) const {
  return "dnnx profile update_scale --direction " + std::string(to_string(direction));
}

std::string UpdateScaleDesc::key() const { return "update_scale"; }

std::size_t UpdateScaleDesc::hash() const { return 0x5ca1e; }

std::ostream& operator<<(std::ostream& out, const UpdateScaleDesc& desc) {
  return out << desc.key();
}

// ---- ResNet-50 ------------------------------------------------------------------------------

std::vector<Dims> resnet50_parameter_shapes() {
  std::vector<Dims> shapes;
  auto conv = [&](std::int64_t out, std::int64_t in, std::int64_t kernel) {
    shapes.push_back(Dims{out, in, kernel, kernel});
  };
  auto bn = [&](std::int64_t channels) {
    shapes.push_back(Dims{channels});  // weight
    shapes.push_back(Dims{channels});  // bias
  };
  conv(64, 3, 7);
  bn(64);
  std::int64_t in = 64;
  const std::int64_t widths[] = {64, 128, 256, 512};
  const int blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t width = widths[stage];
    for (int block = 0; block < blocks[stage]; ++block) {
      conv(width, in, 1);
      bn(width);
      conv(width, width, 3);
      bn(width);
      conv(width * 4, width, 1);
      bn(width * 4);
      if (block == 0) {  // the downsample branch: 1x1 convolution and batch-norm
        conv(width * 4, in, 1);
        bn(width * 4);
      }
      in = width * 4;
    }
  }
  shapes.push_back(Dims{1000, 2048});  // fc.weight
  shapes.push_back(Dims{1000});        // fc.bias
  return shapes;
}

}  // namespace dnnx
