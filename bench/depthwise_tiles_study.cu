// How fast can a plain CUDA kernel run a channels_last (NHWC) f16 depthwise forward convolution
// (multiplier 1, K x K, stride S, padding K / 2) on this GPU? Two families of tilings, each
// variant checked against a naive f32 kernel (every 7th output) and timed with CUDA events around
// 50 back-to-back launches, printed as ms per call and the rate of the bytes that must move
// (input read once, output written once):
//   tiled  a thread computes V channels x R output rows x CW output columns, loading its
//          window's rows from global memory (L1 / L2 serve the overlap with its neighbours);
//   smem   (lines marked SMEM) a block copies its input tile (the window of TH x TW outputs, CB
//          channels) into shared memory with 16-byte asynchronous copies, its columns padded by
//          8 halves, then each thread computes V x R x CW outputs from it.
// Layers of MobileNetV2 and EfficientNet-B0 at batch 128 (bench/shapes/); the figures, against
// cuDNN's engines on the same layers, are in docs/benchmarks.md (*Kernels measured and
// dropped*). bwd_data at stride 1 is the same correlation with the kernel flipped, so its time
// is the forward's. Not part of the library: a study of what a dnnx kernel would have to beat.
// The two kernels keep their own copies of the window loop: the code as it was measured.
//
//   build-gpu/bench/depthwise_tiles_study        (no arguments; about 30 s on an H200)
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
template <int V>
struct alignas(2 * V) Pack {
  __half v[V];
};

template <int K, int V, int R, int CW, int S>
__global__ void __launch_bounds__(256)
    tiled(const __half* __restrict__ a, const float* __restrict__ wt, __half* __restrict__ y, int C,
          int H, int W, int OH, int OW, int packs, int xblocks, int strips, long items) {
  long item = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (item >= items) return;
  int pack = item % packs;
  long t = item / packs;
  int xb = t % xblocks;
  t /= xblocks;
  int strip = t % strips;
  int n = t / strips;
  constexpr int P = K / 2;
  const int c = pack * V, y0 = strip * R, x0 = xb * CW;
  float wk[K * K][V];
#pragma unroll
  for (int k = 0; k < K * K; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) wk[k][e] = wt[k * C + c + e];
  float acc[R][CW][V];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < CW; ++q)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r][q][e] = 0.f;
  constexpr int NC = (CW - 1) * S + K;
#pragma unroll
  for (int j = 0; j < (R - 1) * S + K; ++j) {
    const int ih = y0 * S - P + j;
    if (ih < 0 || ih >= H) continue;
    const __half* row = a + ((long)(n * H + ih) * W) * C + c;
    float v[NC][V];
#pragma unroll
    for (int q = 0; q < NC; ++q) {
      const int iw = x0 * S - P + q;
      if (iw >= 0 && iw < W) {
        Pack<V> p = *reinterpret_cast<const Pack<V>*>(row + (long)iw * C);
#pragma unroll
        for (int e = 0; e < V; ++e) v[q][e] = __half2float(p.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) v[q][e] = 0.f;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int kh = j - r * S;
      if (kh < 0 || kh >= K) continue;
#pragma unroll
      for (int q = 0; q < CW; ++q)
#pragma unroll
        for (int kw = 0; kw < K; ++kw)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[r][q][e] += v[q * S + kw][e] * wk[kh * K + kw][e];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (y0 + r >= OH) continue;
#pragma unroll
    for (int q = 0; q < CW; ++q) {
      if (x0 + q >= OW) continue;
      Pack<V> p;
#pragma unroll
      for (int e = 0; e < V; ++e) p.v[e] = __float2half(acc[r][q][e]);
      *reinterpret_cast<Pack<V>*>(y + ((long)(n * OH + y0 + r) * OW + x0 + q) * C + c) = p;
    }
  }
}

__global__ void naive(const __half* a, const float* wt, float* y, int N, int C, int H, int W, int K,
                      int S, int OH, int OW) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  long total = (long)N * OH * OW * C;
  if (i >= total) return;
  int c = i % C;
  long t = i / C;
  int x = t % OW;
  t /= OW;
  int yy = t % OH;
  int n = t / OH;
  int P = K / 2;
  float s = 0;
  for (int kh = 0; kh < K; ++kh)
    for (int kw = 0; kw < K; ++kw) {
      int ih = yy * S - P + kh, iw = x * S - P + kw;
      if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
      s += __half2float(a[((long)(n * H + ih) * W + iw) * C + c]) * wt[(kh * K + kw) * C + c];
    }
  y[i] = s;
}

#include <cuda_pipeline.h>
// Shared-memory tile: TH x TW outputs x CB channels per block, input tile by 16-byte async copies.
template <int K, int S, int V, int R, int CW, int CB, int TH, int TW>
__global__ void __launch_bounds__(256)
    smem(const __half* __restrict__ a, const float* __restrict__ wt, __half* __restrict__ y, int C,
         int H, int W, int OH, int OW) {
  extern __shared__ __align__(16) __half tile[];
  constexpr int IH = (TH - 1) * S + K, IW = (TW - 1) * S + K, CS = CB + 8, P = K / 2;
  constexpr int PACKS = CB / V, CG = TW / CW, RG = TH / R, NT = PACKS * CG * RG;
  const int cblocks = C / CB, xtiles = (OW + TW - 1) / TW, ytiles = (OH + TH - 1) / TH;
  int b = blockIdx.x;
  const int cb = b % cblocks;
  b /= cblocks;
  const int xt = b % xtiles;
  b /= xtiles;
  const int yt = b % ytiles;
  const int n = b / ytiles;
  const int c0 = cb * CB, oy0 = yt * TH, ox0 = xt * TW;
  const int iy0 = oy0 * S - P, ix0 = ox0 * S - P;
  constexpr int CH = CB / 8, TOTAL = IH * IW * CH;
  for (int i = threadIdx.x; i < TOTAL; i += NT) {
    const int k = i % CH;
    const int rest = i / CH;
    const int col = rest % IW;
    const int row = rest / IW;
    const int ih = iy0 + row, iw = ix0 + col;
    __half* dst = tile + (row * IW + col) * CS + k * 8;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
      __pipeline_memcpy_async(dst, a + ((long)(n * H + ih) * W + iw) * C + c0 + k * 8, 16);
    else
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
  __pipeline_commit();
  const int t = threadIdx.x;
  const int pack = t % PACKS;
  const int cg = (t / PACKS) % CG;
  const int rg = t / (PACKS * CG);
  const int c = c0 + pack * V;
  float wk[K * K][V];
#pragma unroll
  for (int k = 0; k < K * K; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) wk[k][e] = wt[k * C + c + e];
  float acc[R][CW][V];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < CW; ++q)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r][q][e] = 0.f;
  __pipeline_wait_prior(0);
  __syncthreads();
  constexpr int NC = (CW - 1) * S + K;
  const int lr0 = rg * R * S, lc0 = cg * CW * S;
#pragma unroll
  for (int j = 0; j < (R - 1) * S + K; ++j) {
    float v[NC][V];
#pragma unroll
    for (int q = 0; q < NC; ++q) {
      Pack<V> p =
          *reinterpret_cast<const Pack<V>*>(tile + ((lr0 + j) * IW + lc0 + q) * CS + pack * V);
#pragma unroll
      for (int e = 0; e < V; ++e) v[q][e] = __half2float(p.v[e]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int kh = j - r * S;
      if (kh < 0 || kh >= K) continue;
#pragma unroll
      for (int q = 0; q < CW; ++q)
#pragma unroll
        for (int kw = 0; kw < K; ++kw)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[r][q][e] += v[q * S + kw][e] * wk[kh * K + kw][e];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int oy = oy0 + rg * R + r;
    if (oy >= OH) continue;
#pragma unroll
    for (int q = 0; q < CW; ++q) {
      const int ox = ox0 + cg * CW + q;
      if (ox >= OW) continue;
      Pack<V> p;
#pragma unroll
      for (int e = 0; e < V; ++e) p.v[e] = __float2half(acc[r][q][e]);
      *reinterpret_cast<Pack<V>*>(y + ((long)(n * OH + oy) * OW + ox) * C + c) = p;
    }
  }
}

struct Shape {
  const char* name;
  int N, C, H, W, K, S;
};
static __half* A;
static float* WT;
static __half* Y;
static float* REF;
template <int K, int V, int R, int CW, int S>
void run(const Shape& s) {
  if (s.K != K || s.S != S || s.C % V) return;
  int OH = (s.H + 2 * (K / 2) - K) / S + 1, OW = (s.W + 2 * (K / 2) - K) / S + 1;
  int packs = s.C / V, xblocks = (OW + CW - 1) / CW, strips = (OH + R - 1) / R;
  long items = (long)s.N * strips * xblocks * packs;
  int blocks = (items + 255) / 256;
  cudaMemset(Y, 0, (size_t)s.N * OH * OW * s.C * 2);
  tiled<K, V, R, CW, S>
      <<<blocks, 256>>>(A, WT, Y, s.C, s.H, s.W, OH, OW, packs, xblocks, strips, items);
  size_t n = (size_t)s.N * OH * OW * s.C;
  std::vector<__half> h(n);
  std::vector<float> r(n);
  cudaMemcpy(h.data(), Y, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(r.data(), REF, n * 4, cudaMemcpyDeviceToHost);
  double err = 0;
  for (size_t i = 0; i < n; i += 7) err = fmax(err, fabs(__half2float(h[i]) - r[i]));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 5; ++i)
    tiled<K, V, R, CW, S>
        <<<blocks, 256>>>(A, WT, Y, s.C, s.H, s.W, OH, OW, packs, xblocks, strips, items);
  cudaEventRecord(e0);
  for (int i = 0; i < 50; ++i)
    tiled<K, V, R, CW, S>
        <<<blocks, 256>>>(A, WT, Y, s.C, s.H, s.W, OH, OW, packs, xblocks, strips, items);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  ms /= 50;
  double bytes = ((double)s.N * s.H * s.W * s.C + (double)n) * 2;
  printf("%-8s K%d S%d V%d R%d CW%d: %.4f ms  %.2f TB/s  err %.2e  %s\n", s.name, K, S, V, R, CW,
         ms, bytes / ms / 1e9, err, cudaGetErrorString(cudaGetLastError()));
}

template <int K, int S, int V, int R, int CW, int CB, int TH, int TW>
void srun(const Shape& s) {
  if (s.K != K || s.S != S || s.C % CB) return;
  constexpr int IH = (TH - 1) * S + K, IW = (TW - 1) * S + K, CS = CB + 8;
  constexpr int NT = (CB / V) * (TW / CW) * (TH / R);
  static_assert(NT <= 256 && TW % CW == 0 && TH % R == 0, "threads");
  const int bytes = IH * IW * CS * 2;
  auto f = smem<K, S, V, R, CW, CB, TH, TW>;
  cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  int OH = (s.H + 2 * (K / 2) - K) / S + 1, OW = (s.W + 2 * (K / 2) - K) / S + 1;
  long blocks = (long)s.N * ((OH + TH - 1) / TH) * ((OW + TW - 1) / TW) * (s.C / CB);
  size_t n = (size_t)s.N * OH * OW * s.C;
  cudaMemset(Y, 0, n * 2);
  f<<<blocks, NT, bytes>>>(A, WT, Y, s.C, s.H, s.W, OH, OW);
  std::vector<__half> h(n);
  std::vector<float> r(n);
  cudaMemcpy(h.data(), Y, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(r.data(), REF, n * 4, cudaMemcpyDeviceToHost);
  double err = 0;
  for (size_t i = 0; i < n; i += 7) err = fmax(err, fabs(__half2float(h[i]) - r[i]));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 5; ++i) f<<<blocks, NT, bytes>>>(A, WT, Y, s.C, s.H, s.W, OH, OW);
  cudaEventRecord(e0);
  for (int i = 0; i < 50; ++i) f<<<blocks, NT, bytes>>>(A, WT, Y, s.C, s.H, s.W, OH, OW);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  ms /= 50;
  double tb = ((double)s.N * s.H * s.W * s.C + (double)n) * 2;
  printf(
      "%-8s SMEM K%d S%d V%d R%d CW%d CB%d TH%d TW%d nt%d smem%d: %.4f ms  %.2f TB/s  err %.2e  "
      "%s\n",
      s.name, K, S, V, R, CW, CB, TH, TW, NT, bytes, ms, tb / ms / 1e9, err,
      cudaGetErrorString(cudaGetLastError()));
}

int main() {
  Shape shapes[] = {{"b1dw", 128, 32, 112, 112, 3, 1}, {"b3dw", 128, 144, 56, 56, 3, 1},
                    {"b4dw", 128, 192, 28, 28, 3, 1},  {"s3dw5", 128, 240, 28, 28, 5, 1},
                    {"s5dw5", 128, 480, 14, 14, 5, 1}, {"b2dws2", 128, 96, 112, 112, 3, 2}};
  size_t maxa = 128ull * 144 * 56 * 56 * 2;
  if (128ull * 32 * 112 * 112 * 2 > maxa) maxa = 128ull * 32 * 112 * 112 * 2;
  if (128ull * 96 * 112 * 112 > maxa) maxa = 128ull * 96 * 112 * 112;
  cudaMalloc(&A, maxa * 2);
  cudaMalloc(&Y, maxa * 2);
  cudaMalloc(&REF, maxa * 4);
  cudaMalloc(&WT, 25 * 1024 * 4);
  std::vector<__half> ha(maxa);
  for (size_t i = 0; i < maxa; ++i)
    ha[i] = __float2half((float)((i * 2654435761u) % 1000) / 500.f - 1.f);
  cudaMemcpy(A, ha.data(), maxa * 2, cudaMemcpyHostToDevice);
  std::vector<float> hw(25 * 1024);
  for (size_t i = 0; i < hw.size(); ++i) hw[i] = (float)((i * 40503u) % 100) / 50.f - 1.f;
  cudaMemcpy(WT, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice);
  for (auto& s : shapes) {
    int OH = (s.H + 2 * (s.K / 2) - s.K) / s.S + 1, OW = (s.W + 2 * (s.K / 2) - s.K) / s.S + 1;
    long total = (long)s.N * OH * OW * s.C;
    naive<<<(total + 255) / 256, 256>>>(A, WT, REF, s.N, s.C, s.H, s.W, s.K, s.S, OH, OW);
#define V3(V, R, CW) run<3, V, R, CW, 1>(s);
#define V5(V, R, CW) run<5, V, R, CW, 1>(s);
#define V32(V, R, CW) run<3, V, R, CW, 2>(s);

#define S3(V, R, CW, CB, TH, TW) srun<3, 1, V, R, CW, CB, TH, TW>(s);
#define S5(V, R, CW, CB, TH, TW) srun<5, 1, V, R, CW, CB, TH, TW>(s);
#define S32(V, R, CW, CB, TH, TW) srun<3, 2, V, R, CW, CB, TH, TW>(s);
    S3(4, 2, 4, 32, 8, 32)
    S3(4, 4, 4, 32, 16, 32)
    S3(4, 4, 4, 32, 8, 28) S3(4, 4, 4, 32, 16, 28) S3(4, 2, 4, 32, 8, 28) S3(2, 4, 4, 32, 8, 28) S3(
        2, 4, 4, 32, 8, 16) S3(4, 4, 4, 16, 16, 28) S3(4, 4, 4, 16, 16, 16) S3(2, 4, 4, 16, 16, 28)
        S3(4, 4, 2, 16, 16, 28) S3(4, 4, 7, 32, 16, 28) S3(4, 2, 7, 32, 8, 28)
            S3(4, 4, 4, 48, 8, 28) S3(4, 4, 4, 8, 16, 28) S3(4, 4, 4, 32, 12, 28)
                S3(4, 2, 4, 16, 8, 28) S5(2, 4, 4, 16, 16, 28) S5(4, 4, 4, 16, 8, 28)
                    S5(4, 2, 4, 16, 8, 28) S5(2, 4, 4, 16, 8, 28) S5(4, 4, 2, 16, 16, 28)
                        S5(2, 2, 7, 16, 8, 28) S5(4, 4, 7, 16, 16, 28) S5(2, 2, 4, 16, 8, 28) S5(
                            4, 4, 4, 48, 8, 28) S32(4, 2, 4, 32, 8, 28) S32(4, 2, 2, 32, 4, 28)
                            S32(4, 4, 2, 32, 8, 28) S32(2, 4, 4, 32, 8, 28) S32(4, 2, 4, 16, 8, 28)
                                S32(4, 2, 4, 32, 8, 16) V3(4, 4, 1) V3(4, 4, 2) V3(4, 4, 4)
                                    V3(4, 2, 4) V3(4, 8, 2) V3(4, 8, 1) V3(8, 4, 1) V3(8, 4, 2)
                                        V3(8, 2, 4) V3(8, 2, 2) V3(2, 4, 4) V3(2, 8, 4) V3(2, 4, 8)
                                            V3(8, 1, 4) V3(4, 1, 8) V3(4, 2, 8) V5(4, 4, 1)
                                                V5(4, 2, 2) V5(4, 4, 2) V5(2, 4, 4) V5(2, 4, 2)
                                                    V5(8, 2, 1) V5(8, 1, 2) V5(4, 2, 4) V32(4, 4, 1)
                                                        V32(4, 2, 2) V32(4, 4, 2) V32(8, 2, 2)
                                                            V32(8, 1, 2) V32(2, 4, 4) V32(4, 2, 4)
                                                                V32(8, 4, 1)
  }
  return 0;
}
