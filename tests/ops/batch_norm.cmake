# Batch-norm tests (included from tests/CMakeLists.txt; paths through CMAKE_CURRENT_LIST_DIR):
# the case table and shared helpers, unit tests (desc, reference vs finite differences, running
# statistics, bad inputs, policies), parity of every cpu candidate with the reference, the
# PyTorch oracle, the CLI, and the cudnn backend on a GPU.
set(_bnorm_dir ${CMAKE_CURRENT_LIST_DIR})

add_library(dnnx_bnorm_cases STATIC ${_bnorm_dir}/batch_norm_cases.cpp)
target_include_directories(dnnx_bnorm_cases PUBLIC ${_bnorm_dir}/..)
target_link_libraries(dnnx_bnorm_cases PUBLIC dnnx::dnnx dnnx_test_support GTest::gtest)

# One ctest test for the whole table, as every test binary is (Note [one process per test binary]
# in tests/CMakeLists.txt). A failure prints the case's repro line; run one case with
# --gtest_filter='*<case name>*'.
add_executable(batch_norm_parity_test ${_bnorm_dir}/batch_norm_parity_test.cpp)
target_link_libraries(batch_norm_parity_test PRIVATE dnnx_bnorm_cases GTest::gtest_main)
add_test(NAME parity.batch_norm COMMAND batch_norm_parity_test)
set_tests_properties(parity.batch_norm PROPERTIES LABELS "parity" TIMEOUT 300)

# The cpu backend's own kernel at each simd level against the reference and against each other
# (internal header; one process for the table, as above).
if(DNNX_HAVE_ONEDNN)
  add_executable(batch_norm_kernel_test ${_bnorm_dir}/batch_norm_kernel_test.cpp)
  target_link_libraries(batch_norm_kernel_test PRIVATE dnnx_bnorm_cases dnnx_internal
                                                       GTest::gtest_main)
  add_test(NAME parity.batch_norm_kernel COMMAND batch_norm_kernel_test)
  set_tests_properties(parity.batch_norm_kernel PROPERTIES LABELS "parity" TIMEOUT 600)
endif()

foreach(_test batch_norm_reference_test batch_norm_errors_test batch_norm_policy_test)
  add_executable(${_test} ${_bnorm_dir}/${_test}.cpp)
  target_link_libraries(${_test} PRIVATE dnnx_bnorm_cases GTest::gtest_main)
  dnnx_gtests(${_test} NO_PRETTY_VALUES
              PROPERTIES LABELS "unit" TIMEOUT 120 DISCOVERY_TIMEOUT 60)
endforeach()

# `dnnx algos|profile bnorm` (label cli); dnnx_cli_test comes from tests/tools/cli_test.cmake.
if(COMMAND dnnx_cli_test)
  set(_bn --input 4x3x5x7 --backend reference)
  dnnx_cli_test(help.algos_bnorm
                STDOUT "--input.*--mode.*--training.*--inference.*--no-affine.*--eps.*--momentum.*--dtype.*--layout.*--backend.*--direction.*--json"
                ARGS algos bnorm --help)
  dnnx_cli_test(help.profile_bnorm STDOUT "--input.*--direction.*--json.*--runs.*--warmup"
                ARGS profile bnorm --help)
  dnnx_cli_test(algos.bnorm
                STDOUT "bnorm fwd on reference: bnorm dims=4x3x5x7 spatial training affine.*reference:direct.*bnorm bwd_data on reference"
                ARGS algos bnorm ${_bn})
  dnnx_cli_test(algos.bnorm_json JSON stdout JSON_LENGTH 2
                JSON_REQUIRE "0/algos/0/id|0/repro|1/direction|1/algos/0/supported"
                ARGS algos bnorm ${_bn} --json)
  dnnx_cli_test(algos.bnorm_cpu STDOUT "cpu:kernel:bnorm.*cpu:kernel:bnorm"
                ARGS algos bnorm --input 2x8x4x4 --layout nhwc --dtype bf16 --backend cpu)
  dnnx_cli_test(algos.bnorm_per_activation_no_affine
                STDOUT "per_activation inference no_affine.*reference:direct"
                ARGS algos bnorm --input 1x10 --mode per_activation --inference --no-affine
                     --backend reference)
  dnnx_cli_test(profile.bnorm_json JSON stdout JSON_LENGTH 1
                JSON_REQUIRE "0/chosen|0/rows/0/median_ms|0/repro"
                ARGS profile bnorm ${_bn} --direction bwd --inference --json)
  # A repro line (BatchNormDesc::repro) parses as it is printed.
  dnnx_cli_test(profile.bnorm_repro STDOUT "fastest: reference:direct"
                ARGS profile bnorm --input 4x3x5x7 --mode spatial --training --eps 0.001
                     --momentum 0.2 --dtype f32 --layout nchw --direction bwd --backend reference)
  dnnx_cli_test(profile.bnorm_3d_nhwc_f16 STDOUT "bnorm dims=2x3x2x3x4 spatial training"
                ARGS profile bnorm --input 2x3x2x3x4 --layout nhwc --dtype f16 --direction fwd
                     --backend reference)

  dnnx_cli_usage_error(bnorm.bad_eps "--eps 'abc': expected a finite number"
                       algos bnorm ${_bn} --eps abc)
  dnnx_cli_usage_error(bnorm.eps_zero "eps must be > 0 and finite, got 0" algos bnorm ${_bn} --eps 0)
  dnnx_cli_usage_error(bnorm.momentum_range "momentum must be in \\[0, 1\\], got 1.5"
                       algos bnorm ${_bn} --momentum 1.5)
  dnnx_cli_usage_error(bnorm.bad_mode "--mode 'channel'.*per_activation, spatial"
                       algos bnorm ${_bn} --mode channel)
  dnnx_cli_usage_error(bnorm.rank_one "--input '7': expected rank 2 to 5" algos bnorm --input 7)
  dnnx_cli_usage_error(bnorm.training_and_inference "--training excludes --inference"
                       algos bnorm ${_bn} --training --inference)
  dnnx_cli_usage_error(bnorm.bad_direction "--direction 'bwd_weights': bnorm has no direction bwd_weights; accepted: fwd, bwd_data \\(bwd\\)"
                       algos bnorm ${_bn} --direction bwd_weights)
  dnnx_cli_usage_error(bnorm.training_one_value "more than one value per statistic, got 1"
                       algos bnorm --input 1x3x1x1 --backend reference)
  dnnx_cli_usage_error(bnorm.bad_dtype "--dtype 'i8'" algos bnorm ${_bn} --dtype i8)
  dnnx_cli_usage_error(bnorm.missing_input "--input is required" profile bnorm --backend reference)
endif()

# The reference against PyTorch (label oracle): bnorm_harness runs the reference on .npy inputs,
# torch_bnorm_parity.py compares with torch in float64 (running statistics after k training
# steps, eval mode, fwd + bwd, BatchNorm1d/2d/3d). DNNX_TEST_PYTHON comes from
# tests/python/CMakeLists.txt.
find_package(nlohmann_json 3 REQUIRED)
add_executable(bnorm_harness ${_bnorm_dir}/../python/bnorm_harness.cpp)
target_include_directories(bnorm_harness PRIVATE ${_bnorm_dir}/..)
target_link_libraries(bnorm_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_bnorm_parity
         COMMAND ${DNNX_TEST_PYTHON} ${_bnorm_dir}/../python/torch_bnorm_parity.py
                 $<TARGET_FILE:bnorm_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_bnorm_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The cudnn backend on a GPU (label gpu); every test skips, saying why, without one.
if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_batch_norm_test ${_bnorm_dir}/../backends/cudnn_batch_norm_test.cpp)
  target_link_libraries(cudnn_batch_norm_test PRIVATE dnnx_bnorm_cases dnnx_internal
                                                      GTest::gtest_main CUDA::cudart)
  # One process (CUDA and cuDNN start once); shown as skipped where the backend is unavailable.
  add_test(NAME gpu.cudnn_batch_norm COMMAND cudnn_batch_norm_test)
  set_tests_properties(gpu.cudnn_batch_norm PROPERTIES LABELS "gpu" TIMEOUT 1200
                       SKIP_REGULAR_EXPRESSION "cudnn backend not available")
endif()
