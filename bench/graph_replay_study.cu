// The GPU-side cost of replaying a call as a CUDA graph against launching it on the stream:
// back-to-back calls of a short kernel and of a cuBLASLt matmul, queued behind a spin kernel so
// that the host's launch time is hidden, timed with CUDA events (ms per call). Each case is timed
// as stream launches, as one single-call graph replayed per call (what the cudnn backend does for
// a plan called again on the same memory, Note [graph replay] in
// src/backends/cudnn/launch_graph.hpp), and as the call's kernel nodes launched again on the
// stream from the captured graph's parameters, without and with programmatic stream
// serialization; and axpy with griddepcontrol.wait at its start (a kernel that may be launched
// so: Note [dependent launches] in src/backends/cudnn/kernels/common.cuh) launched plainly and
// with it. The relaunches with the attribute of kernels that do not wait (axpy, cuBLASLt's)
// measure only the launch's overlap: their results are not ordered after their predecessor's.
//
//   graph_replay_study [M N K]...   (default: a set of small GEMMs of MobileNetV2's 1x1 layers)
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}
void check(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS) {
    const char* text = "?";
    cuGetErrorString(status, &text);
    std::fprintf(stderr, "%s: %s\n", what, text);
    std::exit(1);
  }
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cublas status %d\n", what, static_cast<int>(status));
    std::exit(1);
  }
}

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void axpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

// axpy that waits for the grids before it (griddepcontrol.wait) before touching memory: safe to
// launch with programmatic stream serialization.
__global__ void axpy_waiting(int n, float a, const float* x, float* y) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

// axpy_waiting launched with programmatic stream serialization allowed.
void launch_waiting(cudaStream_t stream, int n, const float* x, float* y) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(264);
  config.blockDim = dim3(256);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, axpy_waiting, n, 1.0f, x, y), "launch");
}

constexpr int calls = 50;

// ms per call of `issue` run `calls` times back to back behind a spin of ~2 ms; median of 9.
double timed(cudaStream_t stream, const std::function<void()>& issue) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 5; ++i) issue();
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> samples;
  for (int round = 0; round < 9; ++round) {
    spin<<<1, 1, 0, stream>>>(4'000'000);
    check(cudaEventRecord(start, stream), "record");
    for (int i = 0; i < calls; ++i) issue();
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    samples.push_back(ms / calls);
  }
  std::sort(samples.begin(), samples.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return samples[samples.size() / 2];
}

cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& issue,
                        cudaGraph_t* graph_out) {
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  issue();
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  *graph_out = graph;
  return exec;
}

// The graph's kernel nodes launched on `stream` in the graph's order (a chain here), with their
// cluster dimension; -1 nodes when the graph holds another kind of node.
struct Relaunch {
  std::vector<CUDA_KERNEL_NODE_PARAMS> params;
  std::vector<dim3> clusters;
  bool ok = true;
};

Relaunch relaunch_of(cudaGraph_t graph) {
  Relaunch r;
  size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "nodes");
  std::vector<cudaGraphNode_t> nodes(count);
  check(cudaGraphGetNodes(graph, nodes.data(), &count), "nodes");
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    check(cudaGraphNodeGetType(node, &type), "type");
    if (type != cudaGraphNodeTypeKernel) {
      std::printf("    node of type %d: no relaunch\n", static_cast<int>(type));
      r.ok = false;
      continue;
    }
    CUDA_KERNEL_NODE_PARAMS p{};
    check(cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p), "params");
    CUlaunchAttributeValue cluster{};
    check(cuGraphKernelNodeGetAttribute(reinterpret_cast<CUgraphNode>(node),
                                        CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &cluster),
          "cluster");
    r.params.push_back(p);
    r.clusters.push_back(dim3(cluster.clusterDim.x, cluster.clusterDim.y, cluster.clusterDim.z));
  }
  return r;
}

void launch(const Relaunch& r, cudaStream_t stream, bool pdl) {
  for (size_t i = 0; i < r.params.size(); ++i) {
    const CUDA_KERNEL_NODE_PARAMS& p = r.params[i];
    CUlaunchConfig config{};
    config.gridDimX = p.gridDimX;
    config.gridDimY = p.gridDimY;
    config.gridDimZ = p.gridDimZ;
    config.blockDimX = p.blockDimX;
    config.blockDimY = p.blockDimY;
    config.blockDimZ = p.blockDimZ;
    config.sharedMemBytes = p.sharedMemBytes;
    config.hStream = stream;
    CUlaunchAttribute attributes[2];
    unsigned n = 0;
    if (r.clusters[i].x * r.clusters[i].y * r.clusters[i].z > 1) {
      attributes[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attributes[n].value.clusterDim.x = r.clusters[i].x;
      attributes[n].value.clusterDim.y = r.clusters[i].y;
      attributes[n].value.clusterDim.z = r.clusters[i].z;
      ++n;
    }
    if (pdl) {
      attributes[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attributes[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    config.attrs = attributes;
    config.numAttrs = n;
    if (p.func)
      check(cuLaunchKernelEx(&config, p.func, p.kernelParams, p.extra), "relaunch");
    else
      check(cuLaunchKernelEx(&config, reinterpret_cast<CUfunction>(p.kern), p.kernelParams,
                             p.extra), "relaunch");
  }
}

void study(cudaStream_t stream, const char* name, const std::function<void()>& issue) {
  const double direct = timed(stream, issue);
  cudaGraph_t graph;
  cudaGraphExec_t exec = capture(stream, issue, &graph);
  const double replay = timed(stream, [&] { check(cudaGraphLaunch(exec, stream), "launch"); });
  const Relaunch r = relaunch_of(graph);
  double again = -1, again_pdl = -1;
  if (r.ok) {
    again = timed(stream, [&] { launch(r, stream, false); });
    again_pdl = timed(stream, [&] { launch(r, stream, true); });
  }
  std::printf("%-34s stream %7.3f us  graph %7.3f us (%+.2f)  relaunch %7.3f us  relaunch+pdl %7.3f us"
              "  (%zu kernels)\n",
              name, direct * 1e3, replay * 1e3, (replay - direct) * 1e3, again * 1e3,
              again_pdl * 1e3, r.params.size());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> mnk;
  for (int i = 1; i < argc; ++i) mnk.push_back(std::atoi(argv[i]));
  if (mnk.empty())
    mnk = {100352, 32, 192, 100352, 192, 32, 192, 32, 100352, 25088, 64, 384, 6272, 160, 960,
           6272, 960, 160};
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");

  for (int n : {1 << 18, 1 << 20, 1 << 22}) {
    float *x, *y;
    check(cudaMalloc(&x, n * sizeof(float)), "malloc");
    check(cudaMalloc(&y, n * sizeof(float)), "malloc");
    check(cudaMemset(x, 0, n * sizeof(float)), "memset");
    check(cudaMemset(y, 0, n * sizeof(float)), "memset");
    char name[64];
    std::snprintf(name, sizeof name, "axpy n=%d", n);
    study(stream, name, [&] { axpy<<<264, 256, 0, stream>>>(n, 1.0f, x, y); });
    const double plain =
        timed(stream, [&] { axpy_waiting<<<264, 256, 0, stream>>>(n, 1.0f, x, y); });
    const double pdl = timed(stream, [&] { launch_waiting(stream, n, x, y); });
    std::printf("%-34s waiting at its start: stream %7.3f us  pdl %7.3f us (%+.2f)\n", name,
                plain * 1e3, pdl * 1e3, (pdl - plain) * 1e3);
    cudaFree(x);
    cudaFree(y);
  }

  cublasLtHandle_t lt;
  check(cublasLtCreate(&lt), "cublasLt");
  void* workspace;
  const size_t workspace_bytes = 32 << 20;
  check(cudaMalloc(&workspace, workspace_bytes), "workspace");
  for (size_t c = 0; c + 2 < mnk.size(); c += 3) {
    const int m = mnk[c], n = mnk[c + 1], k = mnk[c + 2];
    __half *a, *b, *d;
    check(cudaMalloc(&a, size_t(m) * k * 2), "a");
    check(cudaMalloc(&b, size_t(k) * n * 2), "b");
    check(cudaMalloc(&d, size_t(m) * n * 2), "d");
    cudaMemset(a, 0, size_t(m) * k * 2);
    cudaMemset(b, 0, size_t(k) * n * 2);
    cublasLtMatmulDesc_t op;
    check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    // Column-major: D (m x n) = A (m x k) B (k x n).
    cublasLtMatrixLayout_t la, lb, ld;
    check(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, m, k, m), "la");
    check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, n, k), "lb");
    check(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, m, n, m), "ld");
    cublasLtMatmulPreference_t pref;
    check(cublasLtMatmulPreferenceCreate(&pref), "pref");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof workspace_bytes),
          "pref ws");
    cublasLtMatmulHeuristicResult_t results[4];
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 4, results, &found),
          "heuristic");
    const float alpha = 1, beta = 0;
    for (int h = 0; h < std::min(found, 2); ++h) {
      char name[64];
      std::snprintf(name, sizeof name, "gemm %dx%dx%d algo %d", m, n, k, h);
      study(stream, name, [&] {
        check(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &results[h].algo,
                             workspace, workspace_bytes, stream),
              "matmul");
      });
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
  }
  check(cudaStreamSynchronize(stream), "sync");
  return 0;
}
