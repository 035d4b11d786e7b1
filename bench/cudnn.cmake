# The cudnn benchmark (included by bench/CMakeLists.txt when DNNX_HAVE_CUDNN): exhaustive
# selection per layer and direction, CUDA-event timing, host overhead per call. It needs only
# libdnnx (no Google Benchmark), so it runs on the GPU machine as built here.
# bench/compare_gpu.py runs it next to PyTorch and prints the results table.
add_executable(cudnn_conv_bench ${CMAKE_CURRENT_LIST_DIR}/cudnn_conv_bench.cpp)
target_link_libraries(cudnn_conv_bench PRIVATE dnnx_internal CUDA::cudart)
target_compile_definitions(cudnn_conv_bench PRIVATE
                           DNNX_BENCH_DEFAULT_SHAPES="${CMAKE_CURRENT_LIST_DIR}/shapes/resnet50.txt")

# The fused convolution against its parts run one after the other (Note [fused bench variants]):
# needs only libdnnx and the CUDA runtime, so it runs on the GPU machine as built here.
add_executable(conv_fused_bench ${CMAKE_CURRENT_LIST_DIR}/conv_fused_bench.cpp)
target_link_libraries(conv_fused_bench PRIVATE dnnx_internal CUDA::cudart)

# A study of channels_last depthwise tilings against a naive kernel (plain CUDA, no libdnnx):
# what a dnnx depthwise kernel would have to beat (docs/benchmarks.md, *Kernels measured and
# dropped*).
add_executable(depthwise_tiles_study ${CMAKE_CURRENT_LIST_DIR}/depthwise_tiles_study.cu)
target_link_libraries(depthwise_tiles_study PRIVATE CUDA::cudart)
set_target_properties(depthwise_tiles_study PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

# Back-to-back calls as stream launches, as replayed single-call graphs and as kernel nodes
# launched again with and without programmatic stream serialization (plain CUDA and cuBLASLt, no
# libdnnx): the GPU-side cost of a launch mode (docs/benchmarks.md, *Kernel design
# measurements*; Note [dependent launches] in src/backends/cudnn/kernels/common.cuh).
add_executable(graph_replay_study ${CMAKE_CURRENT_LIST_DIR}/graph_replay_study.cu)
target_link_libraries(graph_replay_study PRIVATE CUDA::cudart CUDA::cublasLt CUDA::cuda_driver)
set_target_properties(graph_replay_study PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
