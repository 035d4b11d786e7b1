#pragma once
// What the oracle harnesses of the layer ops share (pool_harness.cpp, activation_harness.cpp,
// bnorm_harness.cpp; driven by tests/python/torch_*_parity.py through oracle_common.py): reading
// case.json, float32 .npy files in and out as tensors, and the main() of a harness. Header-only,
// so that each harness stays one source file in its op's .cmake fragment.

#include <dnnx/dnnx.hpp>

#include "support/npy.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace dnnx::test::harness {

namespace fs = std::filesystem;

/// The JSON document at `path`; throws std::runtime_error when it cannot be opened.
inline nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  return nlohmann::json::parse(in);
}

/// An f32 tensor in `layout` holding `dir`/`name` (a float32 .npy in logical N, C, spatial...
/// order); throws std::runtime_error when its shape is not `dims`.
inline Tensor load(const fs::path& dir, const std::string& name, const Dims& dims, Layout layout) {
  const NpyArray array = read_npy((dir / name).string());
  const Dims shape(std::span<const std::int64_t>(array.shape));
  if (!(shape == dims)) {
    throw std::runtime_error((dir / name).string() + ": shape " + shape.to_string() +
                             " does not match the case, which expects " + dims.to_string());
  }
  Tensor tensor = Tensor::empty(dims, DType::f32, layout);
  tensor.copy_from_f32(array.data);
  return tensor;
}

/// Writes `tensor` to `dir`/`name` as a float32 .npy in logical order.
inline void save(const fs::path& dir, const std::string& name, const Tensor& tensor) {
  write_npy((dir / name).string(),
            std::vector<std::int64_t>(tensor.dims().begin(), tensor.dims().end()), tensor.to_f32());
}

/// The main() of a harness `name` taking one argument, CASE_DIR: runs `run` on it. Exit 0 on
/// success, 1 with one line "<name>: <what>" on stderr on any failure, 2 with "usage: <name>
/// CASE_DIR <inputs>" on bad usage.
inline int main(int argc, char** argv, const std::string& name, const std::string& inputs,
                const std::function<void(const fs::path&)>& run) {
  if (argc != 2) {
    std::cerr << "usage: " << name << " CASE_DIR " << inputs << "\n";
    return 2;
  }
  try {
    run(argv[1]);
    return 0;
  } catch (const std::exception& error) {
    std::cerr << name << ": " << error.what() << "\n";
    return 1;
  }
}

}  // namespace dnnx::test::harness
