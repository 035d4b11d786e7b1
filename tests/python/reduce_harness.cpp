// The reference reduce, argmax and accuracy as a subprocess for
// tests/python/torch_reduce_parity.py:
//
//   reduce_harness CASE_DIR
//
// reads CASE_DIR/case.json, whose "op" says which:
//   reduce:   {"kind": "sum"|"mean"|"max"|"min"|"norm1"|"norm2", "src": [dims], "axes": [...]}
//             with src.npy and diff_dst.npy; runs fwd and bwd and writes dst.npy and diff_src.npy;
//   argmax:   {"src": [dims], "axis": a} with src.npy; writes indices.npy (as float32);
//   accuracy: {"src": [N, C, ...], "top_k": k, "ignore_index": i} with src.npy and labels.npy
//             (float32 holding integers); writes count.npy (one float32).
// Everything runs on the reference backend in f32, channels_first. Exit 0 on success, 1 with one
// line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>

#include "harness_common.hpp"

#include <cstring>
#include <stdexcept>

namespace {

using dnnx::test::harness::load;
using dnnx::test::harness::save;
using dnnx::test::harness::fs::path;

dnnx::Dims dims_of(const nlohmann::json& json) {
  const std::vector<std::int64_t> values = json.get<std::vector<std::int64_t>>();
  return dnnx::Dims(std::span<const std::int64_t>(values));
}

// An f32 copy of an integer tensor (indices and counts are small enough to be exact).
dnnx::Tensor as_f32(const dnnx::Tensor& indices) {
  dnnx::Tensor out = dnnx::Tensor::empty(indices.dims(), dnnx::DType::f32);
  std::vector<float> values(static_cast<std::size_t>(indices.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::int64_t v = 0;
    std::memcpy(&v, static_cast<const char*>(indices.data()) + i * 8, 8);
    values[i] = static_cast<float>(v);
  }
  out.copy_from_f32(values);
  return out;
}

void run(const path& dir) {
  const nlohmann::json json = dnnx::test::harness::read_json(dir / "case.json");
  const std::string op = json.at("op").get<std::string>();
  const dnnx::Layout rows = dnnx::Layout::channels_first;
  const dnnx::Dims src_dims = dims_of(json.at("src"));
  const dnnx::Tensor src = load(dir, "src.npy", src_dims, rows);
  dnnx::Context context(dnnx::BackendKind::reference);
  if (op == "reduce") {
    const dnnx::ReduceDesc desc =
        dnnx::ReduceDesc::over(dnnx::parse_reduce_kind(json.at("kind").get<std::string>()),
                               src_dims, json.at("axes").get<std::vector<int>>());
    const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", desc.dst_dims, rows);
    dnnx::Tensor dst = dnnx::Tensor::empty(desc.dst_dims, dnnx::DType::f32);
    dnnx::Tensor diff_src = dnnx::Tensor::empty(desc.src_dims, dnnx::DType::f32);
    dnnx::reduce_fwd(context, desc, src, dst);
    dnnx::reduce_bwd(context, desc, src, dst, diff_dst, diff_src);
    save(dir, "dst.npy", dst);
    save(dir, "diff_src.npy", diff_src);
  } else if (op == "argmax") {
    dnnx::ArgmaxDesc desc;
    desc.src_dims = src_dims;
    desc.axis = json.at("axis").get<int>();
    dnnx::Tensor indices = dnnx::Tensor::empty(desc.dst_dims(), dnnx::DType::i64);
    dnnx::argmax_fwd(context, desc, src, indices);
    save(dir, "indices.npy", as_f32(indices));
  } else if (op == "accuracy") {
    dnnx::AccuracyDesc desc;
    desc.dims = src_dims;
    desc.top_k = json.at("top_k").get<std::int64_t>();
    desc.ignore_index = json.at("ignore_index").get<std::int64_t>();
    const std::vector<float> values = load(dir, "labels.npy", desc.labels_dims(), rows).to_f32();
    dnnx::Tensor labels = dnnx::Tensor::empty(desc.labels_dims(), dnnx::DType::i64);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto label = static_cast<std::int64_t>(values[i]);
      std::memcpy(static_cast<char*>(labels.data()) + i * 8, &label, 8);
    }
    dnnx::Tensor count = dnnx::Tensor::zeros(dnnx::Dims{1}, dnnx::DType::i64);
    dnnx::accuracy_fwd(context, desc, src, labels, count);
    save(dir, "count.npy", as_f32(count));
  } else {
    throw std::runtime_error("unknown op '" + op + "' (reduce, argmax, accuracy)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(argc, argv, "reduce_harness",
                                   "(with case.json, src.npy and diff_dst.npy or labels.npy)", run);
}
