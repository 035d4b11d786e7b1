// Seeded random numbers (src/core/philox.hpp, include/dnnx/random.hpp) and the ops built on them:
// Philox4x32-10 against Random123's known answers; the Generator's offsets; dnnx's own log,
// sincospi and erfinv against libm in double on dense sweeps; fill and dropout bit-identical on
// the reference and cpu backends for every distribution, dtype and layout (odd sizes, no
// elements, non-zero offsets); their statistics; the torch.nn.init formulas; bad inputs.

#include <dnnx/dnnx.hpp>

#include "core/philox.hpp"
#include "support/errors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

namespace rnd = dnnx::detail::random;

// A context on `backend` with a memory-only choice cache: tests never write the user's cache file.
Context private_context(BackendKind backend) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

std::vector<std::uint32_t> bits_of(const Tensor& tensor) {
  const std::vector<float> values = tensor.to_f32();
  std::vector<std::uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// ---- Philox and the Generator ------------------------------------------------------------------

TEST(Philox, RandomKnownAnswers) {
  // Random123's tests/kat_vectors, the three philox4x32 10 lines: counter, key, expected.
  struct Vector {
    rnd::Words counter;
    std::uint32_t key0, key1;
    rnd::Words expected;
  };
  const Vector vectors[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Vector& v : vectors) {
    const rnd::Words out = rnd::philox4x32_10(v.counter, v.key0, v.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], v.expected.v[i]) << "word " << i;
  }
  // The stream's block b is the counter {b low, b high, 0, 0} under key {seed low, seed high}.
  const rnd::Words block = rnd::block_words(0x299f31d0a4093822ULL, 0x85a308d3243f6a88ULL);
  const rnd::Words direct =
      rnd::philox4x32_10({{0x243f6a88, 0x85a308d3, 0, 0}}, 0xa4093822, 0x299f31d0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(block.v[i], direct.v[i]);
}

TEST(Philox, UnitValuesAreExact) {
  EXPECT_EQ(rnd::unit(0), 0.0f);
  EXPECT_EQ(rnd::unit(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_EQ(rnd::unit(0x80000000u), 0.5f);
  EXPECT_EQ(rnd::unit_open_zero(0), std::ldexp(1.0f, -24));
  EXPECT_EQ(rnd::unit_open_zero(0xffffffffu), 1.0f);
}

TEST(Generator, ConsumesWholeBlocks) {
  Generator generator(42);
  EXPECT_EQ(generator.seed(), 42u);
  EXPECT_EQ(generator.offset(), 0u);
  EXPECT_EQ(generator.consume(5), 0u);
  EXPECT_EQ(generator.offset(), 2u);
  EXPECT_EQ(generator.consume(8), 2u);
  EXPECT_EQ(generator.offset(), 4u);
  EXPECT_EQ(generator.consume(0), 4u);
  EXPECT_EQ(generator.offset(), 4u);
  generator.set_offset(100);
  EXPECT_EQ(generator.offset(), 100u);
  generator.manual_seed(7);
  EXPECT_EQ(generator.seed(), 7u);
  EXPECT_EQ(generator.offset(), 0u);
  EXPECT_EQ(Generator().seed(), Generator::default_seed);
}

// ---- dnnx's own elementary functions against libm in double ----------------------------------

// |got - want| in units of the last place of the f32 nearest want.
double ulp_error(float got, double want) {
  const float nearest = static_cast<float>(want);
  const double ulp = std::abs(static_cast<double>(std::nextafter(nearest, INFINITY)) - nearest);
  return std::abs(static_cast<double>(got) - want) / (ulp > 0 ? ulp : 1e-45);
}

TEST(RandomMath, LogWithinOneUlpOnADenseSweep) {
  double worst = 0;
  float worst_at = 0;
  // Every 61st f32 from the smallest subnormal to 2^60: about 26 million arguments.
  for (std::uint32_t bits = 1; bits < 0x5d800000u; bits += 61) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    const double error = ulp_error(rnd::log(x), std::log(static_cast<double>(x)));
    if (error > worst) worst = error, worst_at = x;
  }
  // Every f32 of the Box-Muller argument's grid near 1, where log is smallest.
  for (std::uint32_t k = 1; k <= (1u << 24); k += 7) {
    const float x = static_cast<float>(k) * std::ldexp(1.0f, -24);
    const double error = ulp_error(rnd::log(x), std::log(static_cast<double>(x)));
    if (error > worst) worst = error, worst_at = x;
  }
  EXPECT_LT(worst, 1.0) << "worst at " << worst_at;
  EXPECT_EQ(rnd::log(1.0f), 0.0f);
  EXPECT_EQ(rnd::log(0.0f), -INFINITY);
  EXPECT_TRUE(std::isnan(rnd::log(-1.0f)));
  EXPECT_EQ(rnd::log(INFINITY), INFINITY);
}

TEST(RandomMath, SincospiWithinTwoUlpOnADenseSweep) {
  double worst_sin = 0, worst_cos = 0;
  float sin_at = 0, cos_at = 0;
  constexpr double pi = 3.14159265358979323846;
  auto check = [&](float x) {
    float s = 0, c = 0;
    rnd::sincospi(x, &s, &c);
    // sin(pi x) in double from x reduced exactly (x - 2 round(x / 2) is exact in double).
    const double r = static_cast<double>(x) - 2.0 * std::nearbyint(static_cast<double>(x) / 2.0);
    const double want_sin = std::sin(pi * r), want_cos = std::cos(pi * r);
    // Near the zeros the error is judged against the function's scale (|sin| <= 1).
    const double es =
        std::abs(want_sin) < 1e-3 ? std::abs(s - want_sin) / 6e-8 : ulp_error(s, want_sin);
    const double ec =
        std::abs(want_cos) < 1e-3 ? std::abs(c - want_cos) / 6e-8 : ulp_error(c, want_cos);
    if (es > worst_sin) worst_sin = es, sin_at = x;
    if (ec > worst_cos) worst_cos = ec, cos_at = x;
  };
  // The Box-Muller arguments 2 u, u on the 2^-24 grid, every 3rd one; then a sweep of other f32.
  for (std::uint32_t k = 0; k < (1u << 24); k += 3) check(2.0f * rnd::unit(k << 8));
  for (std::uint32_t bits = 0; bits < 0x4b000000u; bits += 997) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    check(x);
    check(-x);
  }
  EXPECT_LT(worst_sin, 2.0) << "worst sin at " << sin_at;
  EXPECT_LT(worst_cos, 2.0) << "worst cos at " << cos_at;
  float s = 0, c = 0;
  rnd::sincospi(0.5f, &s, &c);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(c, 0.0f);
  rnd::sincospi(1.0f, &s, &c);
  EXPECT_EQ(s, 0.0f);
  EXPECT_EQ(c, -1.0f);
  rnd::sincospi(INFINITY, &s, &c);
  EXPECT_TRUE(std::isnan(s) && std::isnan(c));
}

TEST(RandomMath, ErfinvInvertsErf) {
  double worst = 0;
  for (int i = -99999; i <= 99999; ++i) {
    const float x = static_cast<float>(i) / 100000.0f;
    const double y = rnd::erfinv(x);
    // erf(y) must give back x within the conditioning of erfinv: |dy| = |dx| sqrt(pi)/2 e^(y^2).
    const double slope = std::sqrt(3.14159265358979323846) / 2 * std::exp(y * y);
    const double error = std::abs(std::erf(y) - x) * slope / std::max(std::abs(y), 1e-30);
    worst = std::max(worst, error);
  }
  EXPECT_LT(worst, 5e-6);  // relative error of y, a few f32 ulps
  EXPECT_EQ(rnd::erfinv(0.0f), 0.0f);
  EXPECT_EQ(rnd::erfinv(1.0f), INFINITY);
  EXPECT_EQ(rnd::erfinv(-1.0f), -INFINITY);
  EXPECT_TRUE(std::isnan(rnd::erfinv(1.5f)));
}

TEST(RandomMath, HalfAndBf16RoundingMatchesTheCoreConversions) {
  for (std::uint32_t bits = 0; bits < 0xffffffffu - 4099; bits += 4099) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (std::isnan(x)) continue;
    Tensor h = Tensor::empty({1}, DType::f16);
    Tensor b = Tensor::empty({1}, DType::bf16);
    h.fill(x);
    b.fill(x);
    std::uint16_t hb, bb;
    std::memcpy(&hb, h.data(), 2);
    std::memcpy(&bb, b.data(), 2);
    ASSERT_EQ(rnd::to_half_bits(x), hb) << x;
    ASSERT_EQ(rnd::to_bf16_bits(x), bb) << x;
  }
}

// ---- fill: reference and cpu bit-identical ----------------------------------------------------

struct Draw {
  Distribution distribution;
  FillParams params;
};

std::vector<Draw> draws() {
  return {{Distribution::constant, FillParams::constant(-1.25f)},
          {Distribution::uniform, FillParams::uniform(-3.0f, 5.0f)},
          {Distribution::normal, FillParams::normal(0.5f, 2.0f)},
          {Distribution::trunc_normal, FillParams::trunc_normal(0.25f, 1.5f, -1.0f, 2.0f)}};
}

Tensor run_fill(BackendKind backend, const FillDesc& desc, const FillParams& params,
                Generator& generator) {
  Context context = private_context(backend);
  Tensor dst = Tensor::empty(desc.dims, desc.dtype, desc.layout);
  dst.fill(NAN);
  fill_fwd(context, desc, params, generator, dst);
  return dst;
}

bool cpu_available() {
  std::string why;
  return backend_available(BackendKind::cpu, &why);
}

TEST(Fill, ReferenceAndCpuBitIdentical) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend unavailable";
  const std::vector<Dims> shapes = {{0},      {1}, {7}, {3, 5}, {2, 3, 5, 7}, {2, 5, 3, 4, 3},
                                    {1, 0, 4}};
  int compared = 0;
  for (const Draw& draw : draws()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        for (const Dims& dims : shapes) {
          FillDesc desc;
          desc.dims = dims;
          desc.dtype = dtype;
          desc.layout = layout;
          desc.distribution = draw.distribution;
          for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1} << 40 | 3}) {
            Generator a(1234), b(1234);
            a.set_offset(offset), b.set_offset(offset);
            const Tensor ref = run_fill(BackendKind::reference, desc, draw.params, a);
            const Tensor cpu = run_fill(BackendKind::cpu, desc, draw.params, b);
            ASSERT_EQ(bits_of(ref), bits_of(cpu)) << desc.repro() << " offset " << offset;
            for (const float v : ref.to_f32()) ASSERT_FALSE(std::isnan(v)) << desc.repro();
            const std::uint64_t used =
                draw.distribution == Distribution::constant ? 0 : (dims.product() + 3) / 4;
            EXPECT_EQ(a.offset(), offset + used) << desc.repro();
            EXPECT_EQ(b.offset(), offset + used) << desc.repro();
            ++compared;
          }
        }
      }
    }
  }
  RecordProperty("cases_compared", compared);
}

TEST(Fill, ValuesFollowTheLogicalIndexAndTheStream) {
  FillDesc desc;
  desc.dims = {2, 3, 4, 5};
  desc.distribution = Distribution::normal;
  const FillParams params = FillParams::normal(0.0f, 1.0f);
  Generator g1(99), g2(99);
  const Tensor nchw = run_fill(BackendKind::reference, desc, params, g1);
  desc.layout = Layout::channels_last;
  const Tensor nhwc = run_fill(BackendKind::reference, desc, params, g2);
  EXPECT_EQ(bits_of(nchw), bits_of(nhwc));  // to_f32 reads in logical order
  // Consecutive calls continue the stream: a fill of 120 values then one of 8 equals one of 128.
  FillDesc more = desc;
  more.dims = {8};
  const Tensor next = run_fill(BackendKind::reference, more, params, g1);
  FillDesc whole;
  whole.dims = {128};
  whole.distribution = Distribution::normal;
  Generator g3(99);
  const std::vector<float> all = run_fill(BackendKind::reference, whole, params, g3).to_f32();
  const std::vector<float> first = nchw.to_f32(), second = next.to_f32();
  for (std::size_t i = 0; i < 120; ++i) ASSERT_EQ(first[i], all[i]) << i;
  for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(second[i], all[120 + i]) << i;
  // Another seed draws other numbers.
  Generator other(100);
  EXPECT_NE(bits_of(run_fill(BackendKind::reference, whole, params, other)),
            bits_of(run_fill(BackendKind::reference, whole, params, g3 = Generator(99))));
}

struct Moments {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
};

Moments moments(const std::vector<float>& values) {
  Moments m;
  double sum = 0, squares = 0;
  for (const float v : values) {
    sum += v;
    m.min = std::min<double>(m.min, v);
    m.max = std::max<double>(m.max, v);
  }
  m.mean = sum / static_cast<double>(values.size());
  for (const float v : values) squares += (v - m.mean) * (v - m.mean);
  m.std = std::sqrt(squares / static_cast<double>(values.size() - 1));
  return m;
}

TEST(Fill, Statistics) {
  const BackendKind backend = cpu_available() ? BackendKind::cpu : BackendKind::reference;
  FillDesc desc;
  desc.dims = {1 << 20};
  const double n = desc.dims.product();
  Generator generator(2024);
  desc.distribution = Distribution::uniform;
  Moments m =
      moments(run_fill(backend, desc, FillParams::uniform(-2.0f, 6.0f), generator).to_f32());
  // Uniform on [-2, 6): mean 2, std 8 / sqrt(12); the mean within 4 standard errors.
  EXPECT_NEAR(m.mean, 2.0, 4 * (8 / std::sqrt(12.0)) / std::sqrt(n));
  EXPECT_NEAR(m.std, 8 / std::sqrt(12.0), 0.01);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LT(m.max, 6.0);
  desc.distribution = Distribution::normal;
  m = moments(run_fill(backend, desc, FillParams::normal(1.0f, 3.0f), generator).to_f32());
  EXPECT_NEAR(m.mean, 1.0, 4 * 3 / std::sqrt(n));
  EXPECT_NEAR(m.std, 3.0, 4 * 3 / std::sqrt(2 * n));
  desc.distribution = Distribution::trunc_normal;
  m = moments(run_fill(backend, desc, FillParams::trunc_normal(0.0f, 1.0f, -2.0f, 2.0f), generator)
                  .to_f32());
  // N(0, 1) truncated to [-2, 2]: mean 0, std 0.8796 (1 - 2 * 2 phi(2) / (2 Phi(2) - 1)).
  EXPECT_NEAR(m.mean, 0.0, 4 * 0.88 / std::sqrt(n));
  EXPECT_NEAR(m.std, 0.8796, 0.003);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LE(m.max, 2.0);
}

TEST(Fill, BadInputs) {
  Context context = private_context(BackendKind::reference);
  Generator generator;
  FillDesc desc;
  desc.dims = {4};
  Tensor dst = Tensor::empty({4}, DType::f32);
  desc.distribution = Distribution::uniform;
  expect_error(ErrorKind::InvalidArgument, {"uniform needs low <= high, got low 2 and high 1"},
               [&] { fill_fwd(context, desc, FillParams::uniform(2, 1), generator, dst); });
  expect_error(ErrorKind::InvalidArgument, {"uniform bounds must be finite"},
               [&] { fill_fwd(context, desc, FillParams::uniform(0, INFINITY), generator, dst); });
  desc.distribution = Distribution::normal;
  expect_error(ErrorKind::InvalidArgument, {"normal's std must be finite and >= 0, got -1"},
               [&] { fill_fwd(context, desc, FillParams::normal(0, -1), generator, dst); });
  desc.distribution = Distribution::trunc_normal;
  expect_error(
      ErrorKind::InvalidArgument, {"trunc_normal needs finite bounds a < b, got a 1"},
      [&] { fill_fwd(context, desc, FillParams::trunc_normal(0, 1, 1, 1), generator, dst); });
  expect_error(
      ErrorKind::InvalidArgument, {"trunc_normal's std must be finite and > 0, got 0"},
      [&] { fill_fwd(context, desc, FillParams::trunc_normal(0, 0, -1, 1), generator, dst); });
  EXPECT_EQ(generator.offset(), 0u);  // failed calls draw nothing
  desc.distribution = Distribution::uniform;
  Tensor wrong = Tensor::empty({5}, DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"dst dims 5 do not match the desc, which expects 4"},
               [&] { fill_fwd(context, desc, FillParams{}, generator, wrong); });
  Tensor half = Tensor::empty({4}, DType::f16);
  expect_error(ErrorKind::InvalidArgument, {"dtype mix: dst is f16"},
               [&] { fill_fwd(context, desc, FillParams{}, generator, half); });
  FillDesc bad = desc;
  bad.dtype = DType::i32;
  expect_error(ErrorKind::InvalidArgument, {"dtype must be f32, f16 or bf16, got i32"},
               [&] { fill_list(context, bad, Direction::fwd); });
  bad = desc;
  bad.dims = {2, -1};
  expect_error(ErrorKind::InvalidArgument, {"entry 1 must be >= 0, got -1"},
               [&] { fill_list(context, bad, Direction::fwd); });
  expect_error(ErrorKind::InvalidArgument, {"fill has only the forward direction"},
               [&] { fill_list(context, desc, Direction::bwd_data); });
  expect_error(ErrorKind::InvalidArgument, {"unknown distribution 'poisson'"},
               [] { parse_distribution("poisson"); });
  EXPECT_EQ(parse_distribution("gaussian"), Distribution::normal);
  EXPECT_EQ(parse_op_kind("init"), OpKind::fill);
}

TEST(Fill, DescKeyAndRepro) {
  FillDesc desc;
  desc.dims = {64, 3, 7, 7};
  desc.distribution = Distribution::trunc_normal;
  desc.dtype = DType::bf16;
  desc.layout = Layout::channels_last;
  EXPECT_EQ(desc.key(), "fill dims=64x3x7x7 trunc_normal bf16 nhwc");
  EXPECT_EQ(desc.repro(),
            "dnnx profile fill --dims 64x3x7x7 --distribution trunc_normal --dtype bf16 --layout "
            "nhwc");
  FillDesc other = desc;
  other.distribution = Distribution::normal;
  EXPECT_NE(desc.hash(), other.hash());
  EXPECT_FALSE(desc == other);
}

// ---- device fills without a device --------------------------------------------------------------

// An allocator that claims a CUDA device nobody created a backend for (host memory underneath).
class FakeDeviceAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override { return host_allocator().allocate(bytes); }
  void deallocate(void* pointer, std::size_t bytes) noexcept override {
    host_allocator().deallocate(pointer, bytes);
  }
  Device device() const override { return Device::cuda(97); }
};

TEST(DeviceFill, NeedsABackendOnTheDevice) {
  FakeDeviceAllocator allocator;
  expect_error(ErrorKind::Unsupported,
               {"Tensor::fill: the tensor is on cuda:97", "create a Context on that device"}, [&] {
                 Tensor::zeros({4, 4}, DType::f32, Layout::channels_first, allocator);
               });
  void* memory = allocator.allocate(64);
  Tensor strided = Tensor::view(memory, {2, 2}, DType::f32, Dims{4, 2}, Device::cuda(97));
  expect_error(ErrorKind::InvalidArgument, {"needs a dense one"}, [&] { strided.fill(1.0f); });
  allocator.deallocate(memory, 64);
}

// ---- dropout: reference and cpu bit-identical ---------------------------------------------------

struct DropoutRun {
  Tensor dst, diff_src;
  SavedState state;
};

DropoutRun run_dropout(BackendKind backend, const DropoutDesc& desc, Generator& generator,
                       const Tensor& src, const Tensor& diff_dst) {
  Context context = private_context(backend);
  DropoutRun run;
  run.dst = Tensor::empty(desc.dims, desc.dtype, desc.layout);
  run.diff_src = Tensor::empty(desc.dims, desc.dtype, desc.layout);
  dropout_fwd_training(context, desc, generator, src, run.dst, run.state);
  dropout_bwd(context, desc, diff_dst, run.diff_src, run.state);
  return run;
}

Tensor random_input(const Dims& dims, DType dtype, Layout layout, std::uint64_t seed) {
  Context context = private_context(BackendKind::reference);
  Generator generator(seed);
  FillDesc desc;
  desc.dims = dims, desc.dtype = dtype, desc.layout = layout;
  Tensor t = Tensor::empty(dims, dtype, layout);
  fill_fwd(context, desc, FillParams::uniform(-2, 2), generator, t);
  return t;
}

TEST(Dropout, ReferenceAndCpuBitIdenticalAndTheMaskIsTheUniformStream) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend unavailable";
  const std::vector<Dims> shapes = {{0}, {1}, {33}, {3, 5}, {2, 3, 5, 7}, {2, 5, 3, 4, 3}};
  for (const float p : {0.0f, 0.3f, 0.5f, 1.0f}) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        for (const Dims& dims : shapes) {
          DropoutDesc desc;
          desc.dims = dims, desc.p = p, desc.dtype = dtype, desc.layout = layout;
          const Tensor src = random_input(dims, dtype, layout, 5);
          const Tensor dy = random_input(dims, dtype, layout, 6);
          Generator a(77), b(77), c(77);
          a.set_offset(9), b.set_offset(9), c.set_offset(9);
          const DropoutRun ref = run_dropout(BackendKind::reference, desc, a, src, dy);
          const DropoutRun cpu = run_dropout(BackendKind::cpu, desc, b, src, dy);
          ASSERT_EQ(bits_of(ref.dst), bits_of(cpu.dst)) << desc.repro(Direction::fwd_training);
          ASSERT_EQ(bits_of(ref.diff_src), bits_of(cpu.diff_src))
              << desc.repro(Direction::bwd_data);
          ASSERT_EQ(ref.state.bytes(), cpu.state.bytes());
          if (ref.state.bytes() > 0) {
            ASSERT_EQ(std::memcmp(ref.state.data(), cpu.state.data(), ref.state.bytes()), 0);
          }
          EXPECT_EQ(a.offset(), 9 + (dims.product() + 3) / 4);
          // keep = u >= p with u what fill(uniform(0, 1)) draws from the same state.
          FillDesc uniform;
          uniform.dims = dims, uniform.dtype = DType::f32;
          Context context = private_context(BackendKind::reference);
          Tensor u = Tensor::empty(dims, DType::f32);
          fill_fwd(context, uniform, FillParams::uniform(0, 1), c, u);
          const std::vector<float> uv = u.to_f32(), x = src.to_f32(), y = ref.dst.to_f32();
          const float scale = desc.scale();
          const auto* mask = static_cast<const std::uint32_t*>(ref.state.data());
          for (std::size_t i = 0; i < uv.size(); ++i) {
            const bool keep = uv[i] >= p;
            ASSERT_EQ(((mask[i / 32] >> (i % 32)) & 1u) != 0, keep) << i;
            Tensor expected = Tensor::empty({1}, dtype);
            expected.fill(x[i] * (keep ? scale : 0.0f));
            ASSERT_EQ(y[i], expected.to_f32()[0])
                << desc.repro(Direction::fwd_training) << " " << i;
          }
        }
      }
    }
  }
}

TEST(Dropout, KeepRateAndScale) {
  const BackendKind backend = cpu_available() ? BackendKind::cpu : BackendKind::reference;
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    DropoutDesc desc;
    desc.dims = {1 << 20};
    desc.p = p;
    Tensor ones = Tensor::empty(desc.dims, DType::f32);
    ones.fill(1.0f);
    Generator generator(31337);
    const DropoutRun run = run_dropout(backend, desc, generator, ones, ones);
    const std::vector<float> y = run.dst.to_f32();
    const double n = static_cast<double>(y.size());
    double kept = 0;
    for (const float v : y) {
      if (v != 0) {
        ASSERT_EQ(v, 1.0f / (1.0f - p));
        ++kept;
      }
    }
    // Binomial(n, 1 - p): within 3 sigma.
    EXPECT_NEAR(kept, n * (1 - p), 3 * std::sqrt(n * p * (1 - p))) << "p " << p;
    EXPECT_EQ(bits_of(run.dst), bits_of(run.diff_src));  // same mask, same scale
  }
}

TEST(Dropout, PyTorchSemantics) {
  Context context = private_context(BackendKind::reference);
  DropoutDesc desc;
  desc.dims = {8};
  desc.p = 1.0f;
  Tensor src = Tensor::empty({8}, DType::f32);
  src.copy_from_f32(std::vector<float>{1, -2, NAN, INFINITY, 0, 3, 4, 5});
  Tensor dst = Tensor::empty({8}, DType::f32);
  Generator generator;
  SavedState state;
  dropout_fwd_training(context, desc, generator, src, dst, state);
  const std::vector<float> y = dst.to_f32();
  // p = 1: src * 0, NaN and inf becoming NaN, as torch's dropout (input * 0).
  for (std::size_t i : {0u, 1u, 4u, 5u}) EXPECT_EQ(y[i], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]) && std::isnan(y[3]));
  // Inference: the identity, whatever p.
  desc.p = 0.5f;
  Tensor copy = Tensor::empty({8}, DType::f32);
  dropout_fwd(context, desc, src, copy);
  EXPECT_EQ(bits_of(copy), bits_of(src));
  // p = 0 keeps everything unscaled.
  desc.p = 0.0f;
  SavedState kept;
  dropout_fwd_training(context, desc, generator, src, copy, kept);
  EXPECT_EQ(bits_of(copy), bits_of(src));
}

TEST(Dropout, BadInputs) {
  Context context = private_context(BackendKind::reference);
  Generator generator;
  DropoutDesc desc;
  desc.dims = {16};
  Tensor src = Tensor::empty({16}, DType::f32), dst = Tensor::empty({16}, DType::f32);
  src.fill(1);
  SavedState state;
  expect_error(ErrorKind::InvalidArgument, {"saved_state is empty"},
               [&] { dropout_bwd(context, desc, src, dst, state); });
  dropout_fwd_training(context, desc, generator, src, dst, state);
  DropoutDesc other = desc;
  other.p = 0.25f;
  expect_error(ErrorKind::InvalidArgument, {"saved_state"},
               [&] { dropout_bwd(context, other, src, dst, state); });
  DropoutDesc bad = desc;
  bad.p = 1.5f;
  expect_error(ErrorKind::InvalidArgument, {"p must be a probability in [0, 1], got 1.5"},
               [&] { dropout_list(context, bad, Direction::fwd_training); });
  bad.p = NAN;
  expect_error(ErrorKind::InvalidArgument, {"p must be a probability in [0, 1], got nan"},
               [&] { dropout_list(context, bad, Direction::fwd_training); });
  expect_error(ErrorKind::InvalidArgument, {"dst overlaps src in memory"},
               [&] { dropout_fwd_training(context, desc, generator, src, src, state); });
  expect_error(ErrorKind::InvalidArgument, {"dropout has no direction bwd_weights"},
               [&] { dropout_list(context, desc, Direction::bwd_weights); });
  // A state of another desc (other dims) is refused too.
  DropoutDesc bigger = desc;
  bigger.dims = {32};
  Tensor big = Tensor::empty({32}, DType::f32), big_out = Tensor::empty({32}, DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"saved_state"},
               [&] { dropout_bwd(context, bigger, big, big_out, state); });
  EXPECT_EQ(op_info(OpKind::dropout).parse_direction("fwd_training"), Direction::fwd_training);
  EXPECT_EQ(op_info(OpKind::dropout).direction_name(Direction::bwd_data), "bwd");
}

TEST(Dropout, DescKeyAndRepro) {
  DropoutDesc desc;
  desc.dims = {64, 4096};
  desc.p = 0.1f;
  desc.dtype = DType::f16;
  EXPECT_EQ(desc.repro(Direction::fwd_training),
            "dnnx profile dropout --dims 64x4096 --p 0.1 --dtype f16 --layout nchw --direction "
            "fwd_training");
  desc.reproducible = false;
  EXPECT_EQ(desc.repro(Direction::bwd_data),
            "dnnx profile dropout --dims 64x4096 --p 0.1 --dtype f16 --layout nchw "
            "--not-reproducible --direction bwd");
  EXPECT_EQ(desc.scale(), 1.0f / 0.9f);
}

// ---- initialisers ---------------------------------------------------------------------------

TEST(Init, GainsAndFansAsPyTorch) {
  EXPECT_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_EQ(init::calculate_gain("conv_transpose3d"), 1.0);
  EXPECT_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_EQ(init::calculate_gain("selu"), 0.75);
  expect_error(ErrorKind::InvalidArgument, {"Unsupported nonlinearity gelu"},
               [] { init::calculate_gain("gelu"); });
  expect_error(ErrorKind::InvalidArgument, {"negative_slope nan not a valid number"},
               [] { init::calculate_gain("leaky_relu", NAN); });
  EXPECT_EQ(init::calculate_fans({64, 3, 7, 7}).fan_in, 3 * 49);
  EXPECT_EQ(init::calculate_fans({64, 3, 7, 7}).fan_out, 64 * 49);
  EXPECT_EQ(init::calculate_fans({1000, 2048}).fan_in, 2048);
  expect_error(ErrorKind::InvalidArgument,
               {"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"},
               [] { init::calculate_fans({10}); });
  expect_error(ErrorKind::InvalidArgument, {"Mode fan_avg not supported"},
               [] { init::parse_fan_mode("fan_avg"); });
  EXPECT_DOUBLE_EQ(init::kaiming_std({64, 3, 7, 7}, 0, init::FanMode::fan_out, "relu"),
                   std::sqrt(2.0) / std::sqrt(64.0 * 49));
  EXPECT_DOUBLE_EQ(init::xavier_uniform_bound({30, 20}, 2.0), 2.0 * std::sqrt(6.0 / 50));
}

TEST(Init, EmpiricalDistributionsFollowTheFormulas) {
  Context context = private_context(cpu_available() ? BackendKind::cpu : BackendKind::reference);
  Generator generator(5);
  Tensor w = Tensor::empty({256, 128, 3, 3}, DType::f32);
  const double n = static_cast<double>(w.numel());
  init::kaiming_normal(context, generator, w, 0, init::FanMode::fan_out, "relu");
  Moments m = moments(w.to_f32());
  const double std = init::kaiming_std(w.dims(), 0, init::FanMode::fan_out, "relu");
  EXPECT_NEAR(m.mean, 0, 4 * std / std::sqrt(n));
  EXPECT_NEAR(m.std, std, 4 * std / std::sqrt(2 * n));
  init::xavier_uniform(context, generator, w);
  m = moments(w.to_f32());
  const double bound = init::xavier_uniform_bound(w.dims());
  EXPECT_GE(m.min, -bound);
  EXPECT_LT(m.max, bound);
  EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 4 * bound / std::sqrt(3 * 2 * n));
  init::ones(context, w);
  m = moments(w.to_f32());
  EXPECT_EQ(m.min, 1.0);
  EXPECT_EQ(m.max, 1.0);
  init::zeros(context, w);
  EXPECT_EQ(moments(w.to_f32()).max, 0.0);
  Tensor bias = Tensor::empty({10}, DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"fewer than 2 dimensions"},
               [&] { init::xavier_normal(context, generator, bias); });
  Tensor empty = Tensor::empty({0, 4}, DType::f32);
  init::kaiming_uniform(context, generator, empty);  // left alone, as PyTorch warns and returns
}

}  // namespace
}  // namespace dnnx::test
