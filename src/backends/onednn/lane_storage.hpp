// Lanes of f32 in and out of the three storage types, for a register of `Vec` (floats), `VecU`
// (their bits) and `VecS` (16-bit storage) of any width: simd.hpp's 16 lanes, and each ISA's
// register in pool_indices_kernels.hpp (Note [per-ISA pool kernels]). The includer defines
// DNNX_LANE_INLINE, the specifiers of every function here (with the ISA's target attribute
// where it needs one); this file undefines it. It is included once per register type, inside
// the namespace that defines those types (hence no include guard).

DNNX_LANE_INLINE Vec load_lanes(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// binary16 -> f32, exact: the exponent and mantissa bits moved into place and scaled by 2^112
// (which also normalizes subnormals), inf / NaN given an all-ones exponent.
DNNX_LANE_INLINE Vec load_lanes(const simd::F16* p) {
  VecS half;
  std::memcpy(&half, p, sizeof half);
  const VecU h = __builtin_convertvector(half, VecU);
  const VecU magnitude = (h & 0x7fffu) << 13;
  const Vec scaled = reinterpret_cast<Vec>(magnitude) * 0x1p112f;
  const VecU special = magnitude | 0x7f800000u;
  const VecU bits = (h & 0x7c00u) == 0x7c00u ? special : reinterpret_cast<VecU>(scaled);
  return reinterpret_cast<Vec>(bits | ((h & 0x8000u) << 16));
}
DNNX_LANE_INLINE Vec load_lanes(const simd::Bf16* p) {
  VecS bits;
  std::memcpy(&bits, p, sizeof bits);
  return reinterpret_cast<Vec>(__builtin_convertvector(bits, VecU) << 16);
}

DNNX_LANE_INLINE void store_lanes(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
// f32 -> binary16, round to nearest even (detail::float_to_half): overflow to inf, NaN to a
// quiet NaN, results below binary16's normal range through a float addition that rounds them
// onto the subnormal grid.
DNNX_LANE_INLINE void store_lanes(simd::F16* p, Vec v) {
  const VecU bits = reinterpret_cast<VecU>(v);
  const VecU sign = (bits >> 16) & 0x8000u;
  const VecU magnitude = bits & 0x7fffffffu;
  const VecU overflow = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;
  constexpr std::uint32_t denorm_magic = ((127 - 15) + (23 - 10) + 1) << 23;
  const VecU subnormal = reinterpret_cast<VecU>(reinterpret_cast<Vec>(magnitude) +
                                                std::bit_cast<float>(denorm_magic)) -
                         denorm_magic;
  const VecU normal = (magnitude + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu +
                       ((magnitude >> 13) & 1u)) >>
                      13;
  const VecU chosen = magnitude >= 0x477ff000u   ? overflow
                      : magnitude < (113u << 23) ? subnormal
                                                 : normal;
  const VecS narrow = __builtin_convertvector(chosen | sign, VecS);
  std::memcpy(p, &narrow, sizeof narrow);
}
// f32 -> bf16, round to nearest even, NaN stays NaN (simd::store(Bf16*) on every lane).
DNNX_LANE_INLINE void store_lanes(simd::Bf16* p, Vec v) {
  const VecU bits = reinterpret_cast<VecU>(v);
  const VecU rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const VecU nan = (bits >> 16) | 0x40u;
  const VecU chosen = (bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  const VecS narrow = __builtin_convertvector(chosen, VecS);
  std::memcpy(p, &narrow, sizeof narrow);
}

#undef DNNX_LANE_INLINE
