// The reference cross-entropy as a subprocess for tests/python/torch_xent_parity.py:
//
//   xent_harness CASE_DIR
//
// reads CASE_DIR/case.json ({"dims": [...], "reduction": "none"|"mean"|"sum", "ignore_index": n,
// "weighted": bool, "label_dtype": "i32"|"i64", "layout": "nchw"|"nhwc"}) and the float32 .npy
// inputs logits.npy (logical N, C, spatial... order), labels.npy (integer values, N[, spatial...]),
// weights.npy (C; read when weighted) and diff_loss.npy (the loss's dims: N[, spatial...] or (1,)),
// runs the forward and the backward on the reference backend in f32, and writes loss.npy and
// diff_logits.npy next to them. Exit 0 on success, 1 with one line on stderr on any failure, 2 on
// bad usage.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "support/npy.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <vector>

namespace {

using dnnx::test::NpyArray;
namespace fs = std::filesystem;

dnnx::CrossEntropyDesc read_desc(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  const nlohmann::json json = nlohmann::json::parse(in);
  const std::vector<std::int64_t> dims = json.at("dims").get<std::vector<std::int64_t>>();
  if (dims.empty() || dims.size() > 5) {
    throw std::runtime_error("case.json: 'dims' must hold 1 to 5 integers, got " +
                             json.at("dims").dump());
  }
  dnnx::CrossEntropyDesc desc;
  desc.dims = dnnx::Dims(std::span<const std::int64_t>(dims));
  desc.reduction = dnnx::parse_reduction(json.at("reduction").get<std::string>());
  desc.ignore_index = json.at("ignore_index").get<std::int64_t>();
  desc.weighted = json.at("weighted").get<bool>();
  desc.label_dtype = dnnx::parse_dtype(json.value("label_dtype", "i64"));
  desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  desc.dtype = dnnx::DType::f32;
  desc.validate();
  return desc;
}

NpyArray load_array(const fs::path& dir, const char* name, const dnnx::Dims& dims) {
  NpyArray array = dnnx::test::read_npy((dir / name).string());
  if (!(dnnx::Dims(std::span<const std::int64_t>(array.shape)) == dims)) {
    throw std::runtime_error((dir / name).string() + ": shape " +
                             dnnx::Dims(std::span<const std::int64_t>(array.shape)).to_string() +
                             " does not match the desc, which expects " + dims.to_string());
  }
  return array;
}

dnnx::Tensor load(const fs::path& dir, const char* name, const dnnx::Dims& dims,
                  dnnx::Layout layout) {
  const NpyArray array = load_array(dir, name, dims);
  dnnx::Tensor tensor = dnnx::Tensor::empty(dims, dnnx::DType::f32, layout);
  tensor.copy_from_f32(array.data);
  return tensor;
}

// Labels travel as float32 holding integers (exact below 2^24).
dnnx::Tensor load_labels(const fs::path& dir, const dnnx::CrossEntropyDesc& desc) {
  const NpyArray array = load_array(dir, "labels.npy", desc.labels_dims());
  dnnx::Tensor tensor = dnnx::Tensor::empty(desc.labels_dims(), desc.label_dtype);
  auto* bytes = static_cast<unsigned char*>(tensor.data());
  for (std::size_t i = 0; i < array.data.size(); ++i) {
    const float value = array.data[i];
    if (value != std::nearbyint(value) || std::abs(value) > 16777216.0f) {
      throw std::runtime_error("labels.npy: element " + std::to_string(i) + " is " +
                               std::to_string(value) + ", not an integer below 2^24");
    }
    const auto label = static_cast<std::int64_t>(value);
    if (desc.label_dtype == dnnx::DType::i32) {
      const auto narrow = static_cast<std::int32_t>(label);
      std::memcpy(bytes + i * 4, &narrow, 4);
    } else {
      std::memcpy(bytes + i * 8, &label, 8);
    }
  }
  return tensor;
}

void save(const fs::path& dir, const char* name, const dnnx::Tensor& tensor) {
  dnnx::test::write_npy((dir / name).string(),
                        std::vector<std::int64_t>(tensor.dims().begin(), tensor.dims().end()),
                        tensor.to_f32());
}

int run(const fs::path& dir) {
  const dnnx::CrossEntropyDesc desc = read_desc(dir / "case.json");
  const dnnx::Tensor logits = load(dir, "logits.npy", desc.dims, desc.layout);
  const dnnx::Tensor labels = load_labels(dir, desc);
  dnnx::Tensor weights;
  if (desc.weighted)
    weights = load(dir, "weights.npy", desc.weights_dims(), dnnx::Layout::channels_first);
  const dnnx::Tensor diff_loss =
      load(dir, "diff_loss.npy", desc.loss_dims(), dnnx::Layout::channels_first);
  const dnnx::Tensor* w = desc.weighted ? &weights : nullptr;

  dnnx::Context context(dnnx::BackendKind::reference);
  dnnx::Tensor loss = dnnx::Tensor::empty(desc.loss_dims(), dnnx::DType::f32);
  dnnx::Tensor diff_logits = dnnx::Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  dnnx::cross_entropy_fwd(context, desc, logits, labels, w, loss);
  dnnx::cross_entropy_bwd(context, desc, logits, labels, w, diff_loss, diff_logits);
  save(dir, "loss.npy", loss);
  save(dir, "diff_logits.npy", diff_logits);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: xent_harness CASE_DIR (with case.json, logits.npy, labels.npy, "
                 "[weights.npy], diff_loss.npy)\n";
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& error) {
    std::cerr << "xent_harness: " << error.what() << "\n";
    return 1;
  }
}
