# Recurrent-layer tests, included by tests/CMakeLists.txt: the case table (shared with the GPU
# test and the benchmark), unit tests on the reference backend (desc, finite differences,
# semantics, saved state, bad inputs), the CLI, the PyTorch oracle, and the cudnn backend's GPU
# test (tests/backends/cudnn_rnn_test.cpp).
add_library(dnnx_rnn_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/rnn_cases.cpp)
target_link_libraries(dnnx_rnn_cases PUBLIC dnnx_test_support)

add_executable(rnn_test ${CMAKE_CURRENT_LIST_DIR}/rnn_test.cpp)
target_link_libraries(rnn_test PRIVATE dnnx_rnn_cases GTest::gtest_main)
dnnx_gtests(rnn_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" TIMEOUT 300 DISCOVERY_TIMEOUT 60)

# The cpu backend's candidates against the reference, every direction (label parity).
add_executable(rnn_cpu_test ${CMAKE_CURRENT_LIST_DIR}/rnn_cpu_test.cpp)
target_link_libraries(rnn_cpu_test PRIVATE dnnx_rnn_cases GTest::gtest_main)
dnnx_gtests(rnn_cpu_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" ENVIRONMENT "DNNX_CACHE=off"
            TIMEOUT 300 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(rnn_algos_reference
    ARGS algos rnn --cell gru --seq 5 --batch 3 --input 4 --hidden 6 --layers 2 --bidirectional --backend reference
    STDOUT "rnn fwd on reference: rnn gru T=5 N=3 in=4 H=6 layers=2 bidirectional.*reference:direct.*rnn bwd_weights on reference")
  dnnx_cli_test(rnn_profile_reference_training
    ARGS profile rnn --cell lstm --seq 3 --batch 2 --input 3 --hidden 4 --batch-first --variable-lengths --dtype bf16 --backend reference --direction fwd_training
    STDOUT "rnn fwd_training profile.*reference:direct.*repro: dnnx profile rnn --cell lstm --seq 3 --batch 2 --input 3 --hidden 4 --layers 1 --batch-first --variable-lengths --dtype bf16 --direction fwd_training")
  dnnx_cli_test(rnn_profile_reference_bwd_weights_json
    ARGS profile rnn --cell rnn_relu --seq 2 --batch 2 --input 3 --hidden 3 --layers 2 --dropout 0.25 --backend reference --direction bwd_weights --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(rnn_alias_recurrent
    ARGS algos recurrent --cell tanh --seq 2 --batch 1 --input 1 --hidden 1 --backend reference --direction bwd_data
    STDOUT "reference:direct")
  dnnx_cli_test(rnn_bad_hidden ARGS algos rnn --seq 2 --batch 1 --input 1 --hidden 0 CODE 2
    ONE_LINE_ERROR STDERR "--hidden")
  dnnx_cli_test(rnn_bad_cell ARGS algos rnn --cell elman --seq 2 --batch 1 --input 1 --hidden 2
    CODE 2 ONE_LINE_ERROR STDERR "unknown rnn cell 'elman'")
  dnnx_cli_test(rnn_bad_dropout ARGS algos rnn --seq 2 --batch 1 --input 1 --hidden 2 --dropout 1
    CODE 2 ONE_LINE_ERROR STDERR "dropout must be in .0, 1., got 1")
  dnnx_cli_test(rnn_bad_direction ARGS algos rnn --seq 2 --batch 1 --input 1 --hidden 2 --direction bwd
    CODE 2 ONE_LINE_ERROR STDERR "unknown direction 'bwd' for rnn")
  dnnx_cli_test(rnn_algos_cpu
    ARGS algos rnn --cell gru --seq 5 --batch 3 --input 4 --hidden 6 --layers 2 --bidirectional --backend cpu
    STDOUT "rnn fwd on cpu: rnn gru T=5 N=3 in=4 H=6 layers=2 bidirectional.*onednn:[a-z0-9_:.+-]+:lbr_gru.*rnn bwd_weights on cpu.*onednn:[a-z0-9_:.+-]+:lbr_gru")
  dnnx_cli_test(rnn_algos_cpu_varlen
    ARGS algos rnn --cell lstm --seq 4 --batch 2 --input 3 --hidden 4 --variable-lengths --backend cpu --direction fwd
    STDOUT "variable_lengths.*onednn:[a-z0-9_:.+-]+:lstm +supported.*grouped_by_length")
  dnnx_cli_test(rnn_profile_cpu_varlen_bwd_data
    ARGS profile rnn --cell gru --seq 5 --batch 3 --input 3 --hidden 4 --layers 2 --bidirectional --variable-lengths --dropout 0.25 --backend cpu --direction bwd_data
    STDOUT "rnn bwd_data profile.*onednn:[a-z0-9_:.+-]+:lbr_gru.*repro: dnnx profile rnn --cell gru --seq 5 --batch 3 --input 3 --hidden 4 --layers 2 --bidirectional --variable-lengths")
  dnnx_cli_test(rnn_profile_cpu_training_json
    ARGS profile rnn --cell lstm --seq 3 --batch 2 --input 3 --hidden 4 --layers 2 --dropout 0.5 --dtype bf16 --backend cpu --direction fwd_training --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(rnn_profile_cpu_bwd_weights
    ARGS profile rnn --cell rnn_tanh --seq 4 --batch 2 --input 3 --hidden 5 --batch-first --no-bias --backend cpu --direction bwd_weights
    STDOUT "rnn bwd_weights profile.*onednn:[a-z0-9_:.+-]+:vanilla_rnn.*repro: dnnx profile rnn --cell rnn_tanh")
  dnnx_cli_test(rnn_help ARGS profile rnn --help
    STDOUT "--cell.*--seq.*--batch.*--input.*--hidden.*--layers.*--bidirectional.*--no-bias.*--batch-first.*--variable-lengths.*--dropout")
endif()

# The reference against PyTorch (label oracle): rnn_harness runs the reference on .npy inputs,
# torch_rnn_parity.py compares with torch.nn.RNN / LSTM / GRU and autograd in float64.
find_package(nlohmann_json 3 REQUIRED)
add_executable(rnn_harness ${CMAKE_CURRENT_LIST_DIR}/../python/rnn_harness.cpp)
target_include_directories(rnn_harness PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(rnn_harness PRIVATE dnnx::dnnx nlohmann_json::nlohmann_json)
add_test(NAME oracle.torch_rnn_parity
         COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../python/torch_rnn_parity.py
                 $<TARGET_FILE:rnn_harness>)
# 77: torch or numpy is not importable; ctest shows the test as skipped, not passed.
set_tests_properties(oracle.torch_rnn_parity PROPERTIES
  LABELS "oracle" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The cudnn backend's candidates against the reference (label gpu); every test skips, saying why,
# without a GPU.
if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_rnn_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_rnn_test.cpp)
  target_include_directories(cudnn_rnn_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(cudnn_rnn_test PRIVATE GTest::gtest_main dnnx_rnn_cases dnnx_internal
                                               CUDA::cudart)
  dnnx_gtests(cudnn_rnn_test PROPERTIES LABELS "gpu" ENVIRONMENT "DNNX_CACHE=off"
              TIMEOUT 1200 DISCOVERY_TIMEOUT 60)
endif()
