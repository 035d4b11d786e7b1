# Matrix-multiply tests, included by tests/CMakeLists.txt: the case table, unit tests (desc,
# semantics worked out by hand, selection with accumulation, bad inputs), parity of every cpu
# candidate with the reference, and the CLI. The cudnn backend's GPU test is in
# tests/backends/cudnn_matmul_test.cpp; the PyTorch oracle in tests/python.
add_library(dnnx_matmul_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/matmul_cases.cpp)
target_link_libraries(dnnx_matmul_cases PUBLIC dnnx_test_support)

foreach(_name api errors)
  add_executable(matmul_${_name}_test ${CMAKE_CURRENT_LIST_DIR}/matmul_${_name}_test.cpp)
  target_link_libraries(matmul_${_name}_test PRIVATE dnnx_matmul_cases GTest::gtest_main)
  dnnx_gtests(matmul_${_name}_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
endforeach()

add_executable(matmul_parity_test ${CMAKE_CURRENT_LIST_DIR}/matmul_parity_test.cpp)
target_link_libraries(matmul_parity_test PRIVATE dnnx_matmul_cases GTest::gtest_main)
dnnx_gtests(matmul_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(matmul_algos_cpu
    ARGS algos matmul --m 8 --n 16 --k 32 --transpose-b --bias --backend cpu
    STDOUT "matmul fwd on cpu: matmul batch=1 m=8 n=16 k=32 aN bT \\+bias alpha=1 beta=0 f32.*onednn:[a-z0-9_:.+-]+:matmul.*matmul bwd_weights on cpu.*inner_product")
  dnnx_cli_test(matmul_algos_alias_json
    ARGS algos linear --m 4 --n 3 --k 2 --backend reference --direction bwd_data --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/algos/0/id|0/repro"
    STDOUT "reference:direct")
  dnnx_cli_test(matmul_profile_reference
    ARGS profile matmul --batch 3 --m 5 --n 4 --k 6 --transpose-a --broadcast-b --alpha 0.5 --beta 1 --dtype bf16 --backend reference
    STDOUT "matmul fwd profile.*reference:direct.*matmul bwd_weights profile.*repro: dnnx profile matmul --batch 3 --m 5 --n 4 --k 6 --transpose-a --broadcast-b --alpha 0.5 --beta 1 --dtype bf16 --direction bwd_weights")
  dnnx_cli_test(matmul_profile_cpu_json
    ARGS profile matmul --m 16 --n 8 --k 24 --backend cpu --direction bwd_weights --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(matmul_bad_broadcast ARGS algos matmul --m 2 --n 2 --k 2 --broadcast-b CODE 2
    ONE_LINE_ERROR STDERR "broadcast_b shares b between the products of a batch, but batch is 1")
  dnnx_cli_test(matmul_bad_m ARGS algos matmul --m 0 --n 2 --k 2 CODE 2 ONE_LINE_ERROR
    STDERR "--m")
  dnnx_cli_test(matmul_missing_k ARGS algos matmul --m 2 --n 2 CODE 2 ONE_LINE_ERROR STDERR "--k")
  dnnx_cli_test(matmul_bad_direction ARGS algos matmul --m 2 --n 2 --k 2 --direction bwd CODE 2
    ONE_LINE_ERROR STDERR "bwd_data")
  dnnx_cli_test(matmul_algos_gelu_cpu
    ARGS algos matmul --m 8 --n 16 --k 32 --transpose-b --bias --activation gelu --backend cpu
    STDOUT "matmul fwd on cpu: .* act=gelu_tanh.*:gelu_tanh.*matmul fwd_training on cpu.*\\+act.*matmul bwd_data on cpu.*\\+dact.*matmul bwd_weights on cpu.*\\+dact")
  dnnx_cli_test(matmul_profile_reference_relu
    ARGS profile matmul --m 4 --n 8 --k 3 --bias --activation relu --backend reference --direction bwd_weights
    STDOUT "reference:direct.*repro: dnnx profile matmul --batch 1 --m 4 --n 8 --k 3 --bias --alpha 1 --beta 0 --dtype f32 --activation relu --direction bwd_weights")
  dnnx_cli_test(matmul_profile_cpu_training_json
    ARGS profile matmul --m 16 --n 8 --k 24 --activation relu --backend cpu --direction fwd_training --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(matmul_bad_activation ARGS algos matmul --m 2 --n 2 --k 2 --activation swish CODE 2
    ONE_LINE_ERROR STDERR "--activation.*swish")
  dnnx_cli_test(matmul_help ARGS profile matmul --help
    STDOUT "--m.*--n.*--k.*--transpose-a.*--transpose-b.*--broadcast-b.*--bias.*--alpha.*--beta.*--activation")
endif()

# The reference against PyTorch (label oracle): matmul_harness runs the reference on .npy inputs,
# torch_matmul_parity.py compares with torch.matmul / F.linear and autograd in float64.
find_package(nlohmann_json 3 REQUIRED)
add_executable(matmul_harness ${CMAKE_CURRENT_LIST_DIR}/../python/matmul_harness.cpp)
target_include_directories(matmul_harness PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(matmul_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_matmul_parity
         COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../python/torch_matmul_parity.py
                 $<TARGET_FILE:matmul_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_matmul_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The cudnn backend's cuBLASLt and cuBLAS candidates against the reference (label gpu); every test
# skips, saying why, without a GPU.
if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_matmul_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_matmul_test.cpp)
  target_link_libraries(cudnn_matmul_test PRIVATE GTest::gtest_main dnnx_internal dnnx_test_support
                                          CUDA::cudart)
  dnnx_gtests(cudnn_matmul_test PROPERTIES LABELS "gpu" ENVIRONMENT "DNNX_CACHE=off"
              TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
endif()
