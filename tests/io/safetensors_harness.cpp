// The C++ side of safetensors_python.py: `write PATH` saves a fixed set of tensors with dnnx;
// `dump PATH` prints what dnnx reads from PATH as JSON (values of dnnx dtypes, bytes in hex of
// the others).

#include <dnnx/dnnx.hpp>
#include <dnnx/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

namespace {

using namespace dnnx;

// Element i of every tensor written is i * 0.5 - 3 (floats) or i - 5 (integers).
Tensor counting(const Dims& dims, DType dtype, Layout layout = Layout::channels_first) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  const auto n = static_cast<std::size_t>(tensor.numel());
  if (is_floating(dtype)) {
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.5f - 3.0f;
    tensor.copy_from_f32(values);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const auto value = static_cast<std::int64_t>(i) - 5;
      if (dtype == DType::i32)
        static_cast<std::int32_t*>(tensor.data())[i] = static_cast<std::int32_t>(value);
      else
        static_cast<std::int64_t*>(tensor.data())[i] = value;
    }
  }
  return tensor;
}

int write(const std::string& path) {
  safetensors::save(path,
                    {{"conv.weight", counting({4, 3, 3, 3}, DType::f32, Layout::channels_last)},
                     {"conv.bias", counting({4}, DType::f32)},
                     {"half", counting({2, 5}, DType::f16)},
                     {"brain", counting({3, 2, 2}, DType::bf16)},
                     {"labels", counting({9}, DType::i32)},
                     {"bn.num_batches_tracked", counting({}, DType::i64)},
                     {"nothing", counting({0, 4}, DType::f32)}},
                    {{"format", "pt"}, {"writer", "dnnx"}});
  return 0;
}

int dump(const std::string& path) {
  const safetensors::File file = safetensors::load(path);
  nlohmann::json out = nlohmann::json::object();
  out["__metadata__"] = file.metadata();
  for (const std::string& name : file.names()) {
    const safetensors::Entry& entry = file.entry(name);
    nlohmann::json item = {{"dtype", entry.dtype}, {"shape", entry.shape}};
    if (entry.dtype == "F32" || entry.dtype == "F16" || entry.dtype == "BF16") {
      item["values"] = file.tensor(name).to_f32();
    } else if (entry.dtype == "I32" || entry.dtype == "I64") {
      const Tensor tensor = file.tensor(name);
      std::vector<std::int64_t> values;
      for (std::int64_t i = 0; i < tensor.numel(); ++i) {
        values.push_back(entry.dtype == "I32" ? static_cast<const std::int32_t*>(tensor.data())[i]
                                              : static_cast<const std::int64_t*>(tensor.data())[i]);
      }
      item["values"] = values;
    } else {
      std::string hex;
      char digits[3];
      for (const std::byte b : entry.data) {
        std::snprintf(digits, sizeof digits, "%02x", static_cast<unsigned>(b));
        hex += digits;
      }
      item["hex"] = hex;
    }
    out[name] = item;
  }
  std::cout << out.dump() << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc == 3 ? argv[1] : "";
    if (mode == "write") return write(argv[2]);
    if (mode == "dump") return dump(argv[2]);
    std::cerr << "usage: safetensors_harness write|dump PATH\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
}
