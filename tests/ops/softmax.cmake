# Softmax tests, included by tests/CMakeLists.txt: the case table and its helpers, unit
# tests (reference against hand-computed values and finite differences, bad inputs, the call path
# and its policies), parity of every cpu candidate with the reference, the PyTorch oracle, the
# GPU test of every cudnn candidate, and the CLI. Memory-only choice caches throughout
# (DNNX_CACHE=off): tests must not write the user's cache file.
set(_softmax_dir ${CMAKE_CURRENT_LIST_DIR})
set(_softmax_env "DNNX_CACHE=off")

add_library(dnnx_softmax_cases STATIC ${_softmax_dir}/softmax_cases.cpp)
target_include_directories(dnnx_softmax_cases PUBLIC ${_softmax_dir}/..)
target_link_libraries(dnnx_softmax_cases PUBLIC dnnx::dnnx dnnx_test_support)

foreach(_test softmax_reference_test softmax_errors_test softmax_api_test)
  add_executable(${_test} ${_softmax_dir}/${_test}.cpp)
  target_link_libraries(${_test} PRIVATE dnnx_softmax_cases GTest::gtest_main)
  dnnx_gtests(${_test} PROPERTIES LABELS "unit" ENVIRONMENT "${_softmax_env}"
              DISCOVERY_TIMEOUT 60)
endforeach()

# The cpu kernels' SIMD building blocks (conversions exhaustively, exp's error); internal header.
if(DNNX_HAVE_ONEDNN)
  add_executable(softmax_simd_test ${_softmax_dir}/softmax_simd_test.cpp)
  target_link_libraries(softmax_simd_test PRIVATE dnnx_internal GTest::gtest_main)
  dnnx_gtests(softmax_simd_test PROPERTIES LABELS "unit" DISCOVERY_TIMEOUT 60)
endif()

# One ctest test per (case, dtype, direction).
add_executable(softmax_parity_test ${_softmax_dir}/softmax_parity_test.cpp)
target_link_libraries(softmax_parity_test PRIVATE dnnx_softmax_cases GTest::gtest_main)
dnnx_gtests(softmax_parity_test PROPERTIES LABELS "parity" ENVIRONMENT "${_softmax_env}"
            TIMEOUT 300 DISCOVERY_TIMEOUT 60)

# The reference against PyTorch (tests/python/torch_softmax_parity.py drives softmax_harness).
add_executable(softmax_harness ${_softmax_dir}/../python/softmax_harness.cpp)
target_include_directories(softmax_harness PRIVATE ${_softmax_dir}/..)
target_link_libraries(softmax_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_softmax_parity
         COMMAND ${DNNX_TEST_PYTHON} ${_softmax_dir}/../python/torch_softmax_parity.py
                 $<TARGET_FILE:softmax_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_softmax_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "${_softmax_env}")

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_softmax_test ${_softmax_dir}/../backends/cudnn_softmax_test.cpp)
  target_link_libraries(cudnn_softmax_test PRIVATE dnnx_softmax_cases dnnx_internal
                                                   GTest::gtest_main)
  dnnx_gtests(cudnn_softmax_test PROPERTIES LABELS "gpu" ENVIRONMENT "${_softmax_env}"
              TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
endif()

# `dnnx algos softmax` / `dnnx profile softmax` (label "cli"; helpers from
# tests/tools/cli_test.cmake).
if(COMMAND dnnx_cli_test)
  dnnx_cli_test(help.algos_softmax STDOUT "--input.*--mode.*--log.*--dtype.*--layout.*--direction.*--json"
                ARGS algos softmax --help)
  dnnx_cli_test(help.profile_softmax STDOUT "--input.*--mode.*--direction.*--json.*--runs.*--warmup"
                ARGS profile softmax --help)
  dnnx_cli_test(softmax.algos_reference
                STDOUT "^softmax fwd on reference: softmax in=64x1000 mode=channel exp f32 nchw\n.*reference:direct.*softmax bwd_data on reference"
                ARGS algos softmax --input 64x1000 --backend reference)
  dnnx_cli_test(softmax.algos_cpu_nhwc_copies STDOUT "onednn:[a-z0-9_]+:[a-z0-9_]+:nhwc +supported"
                ARGS algos softmax --input 2x21x16x16 --mode channel --log --direction fwd
                     --backend cpu)
  dnnx_cli_test(softmax.algos_json JSON stdout JSON_LENGTH 2
                JSON_REQUIRE 0/algos/0/id 0/algos/0/workspace_bytes 1/direction 1/repro
                ARGS algos softmax --input 8x3x5x5 --mode instance --layout nhwc --dtype bf16 --json)
  dnnx_cli_test(softmax.profile_text STDOUT "softmax bwd_data profile \\[reference\\].*reference:direct +[0-9.]+ .* ok"
                ARGS profile softmax --input 4x17 --direction bwd --runs 1 --backend reference)
  dnnx_cli_test(softmax.profile_json JSON stdout JSON_LENGTH 2 JSON_REQUIRE 0/rows/0/algo 1/chosen
                ARGS profile softmax --input 64x1000 --log --runs 2 --warmup 1 --json)
  # A desc's repro() line is a valid command line.
  dnnx_cli_test(softmax.repro_roundtrip
                STDOUT "repro: dnnx profile softmax --input 2x3x4x5x6 --mode instance --log --dtype f16 --layout nhwc --direction bwd"
                ARGS profile softmax --input 2x3x4x5x6 --mode instance --log --dtype f16
                     --layout nhwc --direction bwd --runs 1 --backend reference)
  dnnx_cli_usage_error(softmax.bad_mode "--mode 'spatial': unknown softmax mode 'spatial'; accepted: instance, channel"
                       algos softmax --input 2x3 --mode spatial)
  dnnx_cli_usage_error(softmax.bad_input_rank "--input '64': expected rank 2 to 5"
                       algos softmax --input 64)
  dnnx_cli_usage_error(softmax.bad_input_zero "--input" algos softmax --input 64x0)
  dnnx_cli_usage_error(softmax.bad_dtype "--dtype 'i32': softmax takes f32, f16 or bf16"
                       algos softmax --input 4x5 --dtype i32)
  dnnx_cli_usage_error(softmax.bad_layout "--layout 'nwhc'" algos softmax --input 4x5 --layout nwhc)
  dnnx_cli_usage_error(softmax.bad_direction "--direction 'bwd_weights': softmax has no direction bwd_weights; accepted: fwd, bwd_data \\(bwd\\)"
                       algos softmax --input 4x5 --direction bwd_weights)
  dnnx_cli_usage_error(softmax.missing_input "--input is required" algos softmax --log)
  dnnx_cli_usage_error(softmax.bad_flag "--axis" algos softmax --input 4x5 --axis 1)
  dnnx_cli_usage_error(softmax.bad_fixed_env "DNNX_SOFTMAX_FWD_ALGO"
                       profile softmax --input 4x5 --direction fwd --backend reference)
  set_tests_properties(cli.softmax.bad_fixed_env PROPERTIES ENVIRONMENT "DNNX_SOFTMAX_FWD_ALGO=fixed:")
endif()
