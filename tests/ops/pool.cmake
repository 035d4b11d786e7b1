# Pooling tests, included by tests/CMakeLists.txt: the case table and its helpers, unit
# tests (desc, errors, dispatch and policies, the reference against hand-computed values and
# finite differences), parity of every cpu candidate with the reference, the PyTorch oracle, the
# GPU test of every cudnn candidate, and the CLI. Memory-only choice caches throughout
# (DNNX_CACHE=off): tests must not write the user's cache file.
set(_pool_dir ${CMAKE_CURRENT_LIST_DIR})
set(_pool_env "DNNX_CACHE=off")

add_library(dnnx_pool_cases STATIC ${_pool_dir}/pool_cases.cpp ${_pool_dir}/pool_support.cpp)
target_include_directories(dnnx_pool_cases PUBLIC ${_pool_dir}/..)
target_link_libraries(dnnx_pool_cases PUBLIC dnnx::dnnx dnnx_test_support)

foreach(_test pool_desc_test pool_errors_test pool_api_test pool_reference_test)
  add_executable(${_test} ${_pool_dir}/${_test}.cpp)
  target_link_libraries(${_test} PRIVATE dnnx_pool_cases GTest::gtest_main)
  dnnx_gtests(${_test} NO_PRETTY_VALUES PROPERTIES LABELS "unit" ENVIRONMENT "${_pool_env}"
              DISCOVERY_TIMEOUT 60)
endforeach()

# One GoogleTest case per (backend, shape); each runs the shape's 24 variants (max, max with indices
# and both averages, x 3 dtypes x 2 layouts) in both directions.
add_executable(pool_parity_test ${_pool_dir}/pool_parity_test.cpp)
target_link_libraries(pool_parity_test PRIVATE dnnx_pool_cases GTest::gtest_main)
dnnx_gtests(pool_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" ENVIRONMENT "${_pool_env}"
            TIMEOUT 300 DISCOVERY_TIMEOUT 60)

# cpu:kernel:max_indices exists once per ISA (Note [per-ISA pool kernels]): the cpu parity cases
# again on the AVX2 and SSE2 copies (on a machine without AVX-512 the first run already took the
# AVX2 one).
foreach(_isa avx2 baseline)
  add_test(NAME pool_parity_cpu_kernels_${_isa}
           COMMAND pool_parity_test --gtest_filter=*PoolParity*cpu_*)
  set_tests_properties(pool_parity_cpu_kernels_${_isa} PROPERTIES
    LABELS "parity" TIMEOUT 900 ENVIRONMENT "${_pool_env};DNNX_POOL_KERNEL_ISA=${_isa}")
endforeach()

# The reference against PyTorch (tests/python/torch_pool_parity.py drives pool_harness).
add_executable(pool_harness ${_pool_dir}/../python/pool_harness.cpp)
target_include_directories(pool_harness PRIVATE ${_pool_dir}/..)
target_link_libraries(pool_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_pool_parity
         COMMAND ${DNNX_TEST_PYTHON} ${_pool_dir}/../python/torch_pool_parity.py
                 $<TARGET_FILE:pool_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_pool_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "${_pool_env}")

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_pool_test ${_pool_dir}/../backends/cudnn_pool_test.cpp)
  target_link_libraries(cudnn_pool_test PRIVATE dnnx_pool_cases dnnx_internal GTest::gtest_main)
  dnnx_gtests(cudnn_pool_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" ENVIRONMENT "${_pool_env}"
              TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
endif()

# `dnnx algos pool` / `dnnx profile pool` (label "cli"; helpers from tests/tools/cli_test.cmake).
if(COMMAND dnnx_cli_test)
  set(_pool_cli --input 2x3x9x9 --kernel 3 --stride 2 --pad 1)
  dnnx_cli_test(help.algos_pool
                STDOUT "--input.*--kernel.*--stride.*--pad-before.*--dilation.*--ceil.*--mode.*--layout.*--direction.*--json"
                ARGS algos pool --help)
  dnnx_cli_test(help.profile_pool STDOUT "--input.*--kernel.*--direction.*--json.*--runs.*--warmup"
                ARGS profile pool --help)
  dnnx_cli_test(pool.algos_reference
                STDOUT "^pool fwd on reference: pool2d max .*reference:direct.*pool bwd_data on reference"
                ARGS algos pool ${_pool_cli} --backend reference)
  dnnx_cli_test(pool.algos_json JSON stdout JSON_LENGTH 2
                JSON_REQUIRE 0/algos/0/id 0/algos/0/workspace_bytes 1/direction 1/repro
                ARGS algos pool ${_pool_cli} --json)
  dnnx_cli_test(pool.algos_cpu_overhang
                STDOUT "cpu:kernel:pool +supported.*avg_include_padding divides every window"
                ARGS algos pool --input 2x16x14x14 --kernel 3 --stride 2 --pad 1 --ceil
                     --mode avg_include_pad --direction bwd --backend cpu)
  dnnx_cli_test(pool.algos_3d_asymmetric STDOUT "pool3d avg_exclude_pad .*pb=1,0,1 pa=0,1,0 ceil=1 bf16 nhwc"
                ARGS algos pool --input 1x4x6x5x7 --kernel 2,3,3 --stride 2,1,2 --pad-before 1,0,1
                     --pad-after 0,1,0 --ceil --mode avg_exclude --dtype bf16 --layout nhwc)
  dnnx_cli_test(pool.algos_1d_default_stride STDOUT "pool1d max n=2 c=3 in=9 k=3 s=3 "
                ARGS algos pool --input 2x3x9 --kernel 3 --direction fwd --backend reference)
  dnnx_cli_test(pool.profile_text STDOUT "bwd_data.*reference:direct +[0-9.]+ .* ok"
                ARGS profile pool ${_pool_cli} --direction bwd --runs 1 --backend reference)
  dnnx_cli_test(pool.profile_json JSON stdout JSON_LENGTH 2 JSON_REQUIRE 0/rows/0/algo 1/chosen
                ARGS profile pool ${_pool_cli} --mode avg_exclude_pad --runs 2 --warmup 1 --json)
  # A desc's repro() line is a valid command line.
  dnnx_cli_test(pool.repro_roundtrip STDOUT "repro: dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad-before 1 --pad-after 0 --ceil --mode max --dtype f16 --layout nhwc --direction bwd"
                ARGS profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad-before 1 --pad-after 0
                     --ceil --mode max --dtype f16 --layout nhwc --direction bwd --runs 1
                     --backend reference)
  # Max pooling with indices.
  dnnx_cli_test(help.algos_pool_indices STDOUT "--indices +max pooling that saves argmax indices"
                ARGS algos pool --help)
  dnnx_cli_test(pool.algos_indices_cpu
                STDOUT "pool2d max .* indices.*cpu:kernel:max_indices +supported.*implementation-defined window offsets"
                ARGS algos pool ${_pool_cli} --indices --direction bwd --backend cpu)
  dnnx_cli_test(pool.profile_indices_cpu STDOUT "cpu:kernel:max_indices +[0-9.]+ .* ok"
                ARGS profile pool ${_pool_cli} --indices --runs 2 --backend cpu)
  dnnx_cli_test(pool.repro_roundtrip_indices
                STDOUT "repro: dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 1 --mode max --indices --dtype bf16 --layout nhwc --direction bwd"
                ARGS profile pool ${_pool_cli} --mode max --indices --dtype bf16 --layout nhwc
                     --direction bwd --runs 1 --backend reference)
  # Dilation.
  dnnx_cli_test(pool.algos_dilated STDOUT "pool2d max n=2 c=3 in=9,9 k=3,3 s=2,2 pb=2,1 pa=2,1 d=2,1 ceil=0"
                ARGS algos pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 2,1 --dilation 2,1
                     --direction fwd --backend reference)
  dnnx_cli_test(pool.algos_dilated_indices_cpu
                STDOUT "pool2d max .* d=2,2 .*indices.*cpu:kernel:max_indices +supported"
                ARGS algos pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 2 --dilation 2 --indices
                     --direction bwd --backend cpu)
  dnnx_cli_test(pool.repro_roundtrip_dilated
                STDOUT "repro: dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 1 --dilation 2,1 --ceil --mode avg_exclude_pad --dtype f32 --layout nchw --direction bwd"
                ARGS profile pool ${_pool_cli} --dilation 2,1 --ceil --mode avg_exclude_pad
                     --direction bwd --runs 1 --backend reference)
  dnnx_cli_usage_error(pool.bad_dilation "--dilation '0'" algos pool ${_pool_cli} --dilation 0)
  dnnx_cli_usage_error(pool.bad_dilated_pad
                       "pad_before along H is 3 but must be at most half the effective kernel size"
                       algos pool --input 2x3x9x9 --kernel 3 --pad 3 --dilation 2)
  dnnx_cli_usage_error(pool.bad_dilated_empty_window "the window of output 1 along W holds no input element"
                       algos pool --input 1x1x3 --kernel 2 --stride 1 --pad 2 --dilation 4)
  dnnx_cli_usage_error(pool.bad_indices_mode "indices is set with mode avg_include_pad"
                       algos pool ${_pool_cli} --mode avg --indices)
  dnnx_cli_usage_error(pool.bad_mode "--mode 'sum': unknown pooling mode 'sum'; accepted: max"
                       algos pool ${_pool_cli} --mode sum)
  dnnx_cli_usage_error(pool.bad_kernel_count "--kernel '3,3,3': expected 1 value or 2"
                       algos pool --input 2x3x9x9 --kernel 3,3,3)
  dnnx_cli_usage_error(pool.bad_input_rank "--input '2x3': expected rank 3, 4 or 5"
                       algos pool --input 2x3 --kernel 3)
  dnnx_cli_usage_error(pool.bad_pad "pad_before along H is 2 but must be at most half the kernel size"
                       algos pool --input 2x3x9x9 --kernel 3 --pad 2)
  dnnx_cli_usage_error(pool.bad_kernel_too_large "kernel along W \\(size 12\\) is larger than the padded input"
                       algos pool --input 2x3x9x9 --kernel 3,12)
  dnnx_cli_usage_error(pool.bad_direction "--direction 'bwd_weights': pool has no direction bwd_weights; accepted: fwd, bwd_data \\(bwd\\)"
                       algos pool ${_pool_cli} --direction bwd_weights)
  dnnx_cli_usage_error(pool.bad_flag "--frob" algos pool ${_pool_cli} --frob)
  dnnx_cli_usage_error(pool.missing_kernel "--kernel is required" algos pool --input 2x3x9x9)
  dnnx_cli_usage_error(pool.bad_dtype "dtype must be f32, f16 or bf16, got i32"
                       algos pool ${_pool_cli} --dtype i32)
  dnnx_cli_usage_error(pool.bad_fixed_env "DNNX_POOL_FWD_ALGO"
                       profile pool ${_pool_cli} --direction fwd --backend reference)
  set_tests_properties(cli.pool.bad_fixed_env PROPERTIES ENVIRONMENT "DNNX_POOL_FWD_ALGO=fixed:")
endif()
