# Seeded random numbers and the ops on them (fill, dropout) and the initialisers, included by
# tests/CMakeLists.txt: unit tests (Philox known answers, the Generator, dnnx's log / sincospi /
# erfinv against libm, reference and cpu bit-identical, statistics, init formulas, bad inputs),
# parity of every cpu candidate with the reference, the CLI, and the GPU tests of the cudnn
# backend. The PyTorch oracle is tests/python/torch_init_parity.py.
add_executable(random_test ${CMAKE_CURRENT_LIST_DIR}/random_test.cpp)
target_link_libraries(random_test PRIVATE dnnx_test_support dnnx_internal GTest::gtest_main)
dnnx_gtests(random_test NO_PRETTY_VALUES PROPERTIES LABELS "unit" TIMEOUT 300 DISCOVERY_TIMEOUT 60)

add_executable(random_parity_test ${CMAKE_CURRENT_LIST_DIR}/random_parity_test.cpp)
target_link_libraries(random_parity_test PRIVATE dnnx_test_support GTest::gtest_main)
dnnx_gtests(random_parity_test NO_PRETTY_VALUES PROPERTIES LABELS "parity" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

if(COMMAND dnnx_cli_test)
  dnnx_cli_test(fill_algos_cpu
    ARGS algos fill --dims 64x3x7x7 --distribution normal --backend cpu
    STDOUT "fill fwd on cpu: fill dims=64x3x7x7 normal f32 nchw.*cpu:kernel:fill")
  dnnx_cli_test(fill_profile_reference_json
    ARGS profile fill --dims 7x5 --distribution trunc_normal --dtype bf16 --layout nhwc --backend reference --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(fill_alias_init
    ARGS algos init --dims 10 --distribution constant --backend reference
    STDOUT "reference:direct")
  dnnx_cli_test(fill_bad_distribution ARGS algos fill --dims 4 --distribution poisson CODE 2
    ONE_LINE_ERROR STDERR "unknown distribution 'poisson'")
  dnnx_cli_test(fill_bad_dtype ARGS algos fill --dims 4 --dtype i64 CODE 2 ONE_LINE_ERROR
    STDERR "dtype must be f32, f16 or bf16, got i64")
  dnnx_cli_test(dropout_algos_cpu
    ARGS algos dropout --dims 64x4096 --p 0.1 --backend cpu
    STDOUT "dropout fwd on cpu.*cpu:kernel:dropout.*dropout fwd_training on cpu.*dropout bwd_data on cpu")
  dnnx_cli_test(dropout_profile_cpu_training
    ARGS profile dropout --dims 3x1001 --p 0.5 --dtype f16 --backend cpu --direction fwd_training
    STDOUT "dropout fwd_training profile.*cpu:kernel:dropout.*repro: dnnx profile dropout --dims 3x1001 --p 0.5 --dtype f16 --layout nchw --direction fwd_training")
  dnnx_cli_test(dropout_profile_reference_bwd_json
    ARGS profile dropout --dims 33 --p 0.25 --backend reference --direction bwd --json
    JSON stdout JSON_LENGTH 1 JSON_REQUIRE "0/chosen|0/rows/0/algo/id")
  dnnx_cli_test(dropout_bad_p ARGS algos dropout --dims 4 --p 1.5 CODE 2 ONE_LINE_ERROR
    STDERR "p must be a probability in .0, 1., got 1.5")
  dnnx_cli_test(dropout_bad_direction ARGS algos dropout --dims 4 --direction bwd_weights CODE 2
    ONE_LINE_ERROR STDERR "dropout has no direction bwd_weights")
  dnnx_cli_test(dropout_help ARGS profile dropout --help STDOUT "--dims.*--p.*--not-reproducible")
endif()

if(DNNX_HAVE_CUDNN)
  add_executable(cudnn_random_test ${CMAKE_CURRENT_LIST_DIR}/../backends/cudnn_random_test.cpp)
  target_link_libraries(cudnn_random_test PRIVATE dnnx_test_support GTest::gtest_main)
  dnnx_gtests(cudnn_random_test NO_PRETTY_VALUES PROPERTIES LABELS "gpu" TIMEOUT 600 DISCOVERY_TIMEOUT 60)
endif()
