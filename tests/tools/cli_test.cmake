# Tests of the `dnnx` command-line tool (label "cli").
#
# This file has two roles. include()d by tests/CMakeLists.txt, it declares the tests. Run by those
# tests through `cmake -P`, it runs one dnnx command and checks it:
#   CLI            path of the dnnx binary
#   ARGS           the arguments, '|'-separated
#   CODE           the expected exit status
#   STDOUT_REGEX   a regex stdout must match ('.' also matches newlines)
#   STDERR_REGEX   a regex stderr must match
#   ONE_LINE_ERROR nothing on stdout and exactly one line on stderr
#   JSON           "stdout" or a file path: that text must be valid JSON
#   JSON_LENGTH    the length of the top-level JSON array or object
#   JSON_REQUIRE   '|'-separated member paths ("results/5/chosen/id") that must exist and be non-null
#   UNAVAILABLE    a backend that `dnnx version` must report unavailable, else the test is skipped
# A test whose arguments name a backend (`--backend cpu`, `--backend cudnn`) and that does not set
# UNAVAILABLE is skipped where `dnnx version` reports that backend unavailable (a build without
# oneDNN, a machine without a GPU): it tests that backend's tables, not its absence.

if(CMAKE_SCRIPT_MODE_FILE)
  if(DEFINED UNAVAILABLE)
    execute_process(COMMAND ${CLI} version OUTPUT_VARIABLE versions)
    if(NOT versions MATCHES "  ${UNAVAILABLE}: unavailable")
      message("dnnx-cli-test-skip: backend ${UNAVAILABLE} is available here\n${versions}")
      return()
    endif()
  endif()
  string(REPLACE "|" ";" args "${ARGS}")
  list(FIND args "--backend" at)
  if(NOT DEFINED UNAVAILABLE AND at GREATER_EQUAL 0)
    math(EXPR at "${at} + 1")
    list(LENGTH args count)
    if(at LESS count)
      list(GET args ${at} wanted)
      execute_process(COMMAND ${CLI} version OUTPUT_VARIABLE versions)
      if(versions MATCHES "  ${wanted}: unavailable")
        message("dnnx-cli-test-skip: the test needs backend ${wanted}, unavailable here\n${versions}")
        return()
      endif()
    endif()
  endif()
  execute_process(COMMAND ${CLI} ${args}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(shown "dnnx ${args}\n--- exit status: ${code}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(NOT code STREQUAL CODE)
    message(FATAL_ERROR "expected exit status ${CODE}\n${shown}")
  endif()
  if(DEFINED STDOUT_REGEX AND NOT out MATCHES "${STDOUT_REGEX}")
    message(FATAL_ERROR "stdout does not match '${STDOUT_REGEX}'\n${shown}")
  endif()
  if(DEFINED STDERR_REGEX AND NOT err MATCHES "${STDERR_REGEX}")
    message(FATAL_ERROR "stderr does not match '${STDERR_REGEX}'\n${shown}")
  endif()
  if(ONE_LINE_ERROR)
    string(STRIP "${err}" stripped)
    if(NOT out STREQUAL "" OR stripped STREQUAL "" OR stripped MATCHES "\n")
      message(FATAL_ERROR "expected nothing on stdout and one line on stderr\n${shown}")
    endif()
  endif()
  if(DEFINED JSON)
    if(JSON STREQUAL "stdout")
      set(document "${out}")
    else()
      file(READ "${JSON}" document)
    endif()
    string(JSON length ERROR_VARIABLE json_error LENGTH "${document}")
    if(json_error)
      message(FATAL_ERROR "invalid JSON (${JSON}): ${json_error}\n${shown}")
    endif()
    if(DEFINED JSON_LENGTH AND NOT length EQUAL JSON_LENGTH)
      message(FATAL_ERROR "JSON has ${length} top-level entries, expected ${JSON_LENGTH}\n${shown}")
    endif()
    string(REPLACE "|" ";" paths "${JSON_REQUIRE}")
    foreach(path IN LISTS paths)
      string(REPLACE "/" ";" keys "${path}")
      string(JSON type ERROR_VARIABLE json_error TYPE "${document}" ${keys})
      if(json_error OR type STREQUAL "NULL")
        message(FATAL_ERROR "JSON lacks '${path}' (${json_error}${type})\n${shown}")
      endif()
    endforeach()
  endif()
  return()
endif()

if(NOT TARGET dnnx_cli)
  return()
endif()

set(_dnnx_cli_script ${CMAKE_CURRENT_LIST_FILE})
set(_dnnx_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/cli)
file(MAKE_DIRECTORY ${_dnnx_cli_dir})

# dnnx_cli_test(<name> ARGS <arg>... [CODE n] [STDOUT regex] [STDERR regex] [ONE_LINE_ERROR]
#               [JSON stdout|<file>] [JSON_LENGTH n] [JSON_REQUIRE path...] [UNAVAILABLE backend]
#               [ENV VAR=value...])
function(dnnx_cli_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T "ONE_LINE_ERROR"
                        "CODE;STDOUT;STDERR;JSON;JSON_LENGTH;UNAVAILABLE" "ARGS;JSON_REQUIRE;ENV")
  if(NOT DEFINED T_CODE)
    set(T_CODE 0)
  endif()
  list(JOIN T_ARGS "|" joined)
  set(defines "-DCLI=$<TARGET_FILE:dnnx_cli>" "-DARGS=${joined}" "-DCODE=${T_CODE}")
  if(DEFINED T_STDOUT)
    list(APPEND defines "-DSTDOUT_REGEX=${T_STDOUT}")
  endif()
  if(DEFINED T_STDERR)
    list(APPEND defines "-DSTDERR_REGEX=${T_STDERR}")
  endif()
  if(T_ONE_LINE_ERROR)
    list(APPEND defines "-DONE_LINE_ERROR=ON")
  endif()
  if(DEFINED T_JSON)
    list(APPEND defines "-DJSON=${T_JSON}")
  endif()
  if(DEFINED T_JSON_LENGTH)
    list(APPEND defines "-DJSON_LENGTH=${T_JSON_LENGTH}")
  endif()
  if(DEFINED T_UNAVAILABLE)
    list(APPEND defines "-DUNAVAILABLE=${T_UNAVAILABLE}")
  endif()
  if(T_JSON_REQUIRE)
    list(JOIN T_JSON_REQUIRE "|" required)
    list(APPEND defines "-DJSON_REQUIRE=${required}")
  endif()
  add_test(NAME cli.${name} COMMAND ${CMAKE_COMMAND} ${defines} -P ${_dnnx_cli_script})
  # Tests that write a file run from their own directory and never share it.
  set_tests_properties(cli.${name} PROPERTIES LABELS cli WORKING_DIRECTORY ${_dnnx_cli_dir}
                                              SKIP_REGULAR_EXPRESSION "dnnx-cli-test-skip")
  if(T_ENV)
    set_tests_properties(cli.${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

# Runs the tests cli.<name> one after the other, in the order given, none beside another holding
# `lock` (tests that share one file): each requires the one before it as a fixture.
function(dnnx_cli_in_order lock)
  set(previous "")
  foreach(name IN LISTS ARGN)
    set_tests_properties(cli.${name} PROPERTIES FIXTURES_SETUP ${lock}_${name} RESOURCE_LOCK ${lock})
    if(previous)
      set_tests_properties(cli.${name} PROPERTIES FIXTURES_REQUIRED ${lock}_${previous})
    endif()
    set(previous ${name})
  endforeach()
endfunction()

# A bad command line: exit status 2, one line on stderr matching `regex` (it names the flag and
# the value), nothing on stdout.
function(dnnx_cli_usage_error name regex)
  dnnx_cli_test(${name} ARGS ${ARGN} CODE 2 STDERR "${regex}" ONE_LINE_ERROR)
endfunction()

set(_conv --input 1x4x8x8 --weights 8x4x3x3)

# --help and --version at every level.
dnnx_cli_test(help STDOUT "algos.*profile.*tune.*version" ARGS --help)
dnnx_cli_test(help.algos STDOUT "conv" ARGS algos --help)
dnnx_cli_test(help.algos_conv STDOUT "--input.*--weights.*--pad-before.*--layout.*--direction.*--json"
              ARGS algos conv --help)
dnnx_cli_test(help.profile STDOUT "conv" ARGS profile --help)
dnnx_cli_test(help.profile_conv STDOUT "--input.*--direction.*--json.*--runs.*--warmup"
              ARGS profile conv --help)
dnnx_cli_test(help.tune
              STDOUT "--model.*--batch.*--dtype.*--backend.*--policy.*--workspace-limit.*--deterministic.*--benchmark-limit.*--layers.*--json"
              ARGS tune --help)
dnnx_cli_test(help.version STDOUT "version" ARGS version --help)
dnnx_cli_test(version STDOUT "^dnnx [0-9]+\\.[0-9]+\\.[0-9]+\n.*reference: .*auto: " ARGS version)
dnnx_cli_test(version_flag STDOUT "^[0-9]+\\.[0-9]+\\.[0-9]+" ARGS --version)

# algos: nothing runs; 1-, 2- and 3-D, asymmetric padding, groups, every direction.
dnnx_cli_test(algos.json JSON stdout JSON_LENGTH 3
              JSON_REQUIRE 0/algos/0/id 0/algos/0/workspace_bytes 1/direction 2/repro
              ARGS algos conv ${_conv} --pad 1 --json)
dnnx_cli_test(algos.conv1d_reference STDOUT "^conv fwd on reference: .*reference:direct"
              ARGS algos conv --input 2x3x9 --weights 4x3x3 --stride 2 --direction fwd --backend reference)
dnnx_cli_test(algos.conv3d_asymmetric STDOUT "conv bwd_data on .*conv bwd_weights on "
              ARGS algos conv --input 1x4x5x6x7 --weights 4x2x3x3x3 --groups 2 --pad-before 1,0,1
                   --pad-after 0,1,1 --dilation 1,1,2 --direction bwd_data,bwd_weights)
dnnx_cli_test(algos.nhwc_bf16 STDOUT "conv fwd on .*nhwc"
              ARGS algos conv ${_conv} --layout nhwc --dtype bf16 --direction fwd)

# profile: times every candidate.
dnnx_cli_test(profile.json JSON stdout JSON_LENGTH 3
              ARGS profile conv ${_conv} --pad-before 1,0 --pad-after 0,1 --runs 2 --warmup 1 --json)
dnnx_cli_test(profile.text STDOUT "bwd_data.* ok" ARGS profile conv ${_conv} --stride 2
              --direction bwd_data --runs 1 --backend reference)

# tune: a two-layer model file (a grouped/depthwise layer included), one ResNet-50 layer.
file(WRITE ${_dnnx_cli_dir}/tiny_model.txt
     "# name  src  weights  stride  pad  count  [bench]\n"
     "tiny.conv  4x8x8  8x4x3x3  1  1  2\n"
     "tiny.depthwise  8x6x6  8x1x3x3  2  1  1  bench\n")
dnnx_cli_test(tune.model_file
              STDOUT "tiny\\.conv +fwd +2 .*tiny\\.depthwise +bwd_weights +1 .*totals.*all.*tuning wall time"
              STDERR "tune \\[1/6\\] tiny\\.conv fwd.*tune \\[6/6\\] tiny\\.depthwise bwd_weights"
              JSON ${_dnnx_cli_dir}/tiny_tune.json
              JSON_REQUIRE results/5/chosen/id results/5/chosen/time_ms results/5/heuristic/id
                           results/5/speedup totals/all/speedup tuning_wall_s
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --runs 1 --warmup 0
                   --json ${_dnnx_cli_dir}/tiny_tune.json)
dnnx_cli_test(tune.resnet50_layer JSON stdout
              JSON_REQUIRE results/1/chosen/id results/1/heuristic/time_ms totals/bwd_data
              ARGS tune --model resnet50 --batch 1 --layers l4.reduce --direction fwd,bwd_data
                   --runs 1 --warmup 0 --benchmark-limit 2 --json -)
dnnx_cli_test(tune.verbose_search_cost
              STDERR "policy=exhaustive -> .* candidates timed.*full runs .* ms, [0-9]+ probes on a slice .* ms, final round .* ms"
              ENV DNNX_CACHE=off
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 2 --layers tiny.conv
                   --direction fwd --runs 2 --verbose)
dnnx_cli_test(tune.no_final_round JSON stdout
              JSON_REQUIRE options/final_round results/0/chosen/id
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --no-final-round --json -)
# --variant-factor (Note [pruning variants] in src/tune/select.cpp): set by the flag, over the
# environment's DNNX_VARIANT_FACTOR; the tune JSON records it, `algos --json` lists each seed.
dnnx_cli_test(tune.variant_factor STDOUT "variant_factor.: 0\\.0"
              JSON stdout JSON_REQUIRE options/variant_factor results/0/chosen/id
              ENV DNNX_VARIANT_FACTOR=1.5
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --variant-factor 0 --json -)
dnnx_cli_test(env.variant_factor STDOUT "variant_factor.: 1\\.5"
              JSON stdout ENV DNNX_VARIANT_FACTOR=1.5
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --json -)
# --final-loop-ms (Note [final round]): set by the flag, over DNNX_FINAL_LOOP_MS; the tune JSON
# records it.
dnnx_cli_test(tune.final_loop_ms STDOUT "final_loop_ms.: 4\\.0"
              JSON stdout JSON_REQUIRE options/final_loop_ms results/0/chosen/id
              ENV DNNX_FINAL_LOOP_MS=2
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --final-loop-ms 4 --json -)
dnnx_cli_test(env.final_loop_ms STDOUT "final_loop_ms.: 2\\.0"
              JSON stdout ENV DNNX_FINAL_LOOP_MS=2
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --json -)
dnnx_cli_usage_error(bad.final_loop_ms "--final-loop-ms '2000': expected milliseconds from 0 to 1000"
                     profile act --input 2x3 --final-loop-ms 2000)
# --final-contenders (Note [final round]): set by the flag, over DNNX_FINAL_CONTENDERS; the tune
# JSON records it.
dnnx_cli_test(tune.final_contenders STDOUT "final_contenders.: 20"
              JSON stdout JSON_REQUIRE options/final_contenders results/0/chosen/id
              ENV DNNX_FINAL_CONTENDERS=6
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --final-contenders 20 --json -)
dnnx_cli_test(env.final_contenders STDOUT "final_contenders.: 6"
              JSON stdout ENV DNNX_FINAL_CONTENDERS=6
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --json -)
dnnx_cli_usage_error(bad.final_contenders "--final-contenders '1001': out of range"
                     profile act --input 2x3 --final-contenders 1001)
# --host-tie (Note [host cost ties]): set by the flag, over DNNX_HOST_TIE; the tune JSON records it.
dnnx_cli_test(tune.host_tie STDOUT "host_tie.: 0\\.05"
              JSON stdout JSON_REQUIRE options/host_tie results/0/chosen/id
              ENV DNNX_HOST_TIE=0.1
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --host-tie 0.05 --json -)
dnnx_cli_test(env.host_tie STDOUT "host_tie.: 0\\.1"
              JSON stdout ENV DNNX_HOST_TIE=0.1
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --json -)
dnnx_cli_usage_error(bad.host_tie "--host-tie '2': expected a fraction from 0 \\(off\\) to 1"
                     profile act --input 2x3 --host-tie 2)
# --late-plan-share (Note [late plans]): set by the flag, over DNNX_LATE_PLAN_SHARE; the tune JSON
# records it.
dnnx_cli_test(tune.late_plan_share STDOUT "late_plan_share.: 0\\.5"
              JSON stdout JSON_REQUIRE options/late_plan_share results/0/chosen/id
              ENV DNNX_LATE_PLAN_SHARE=0.1
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --late-plan-share 0.5 --json -)
dnnx_cli_usage_error(bad.late_plan_share
                     "--late-plan-share '2': expected a fraction from 0 \\(every late plan at once\\) to 1"
                     profile act --input 2x3 --late-plan-share 2)
# --search-budget-ms (Note [search budget]): set by the flag, over DNNX_SEARCH_BUDGET_MS; the tune
# JSON records it, and a search whose budget is spent at once still chooses.
dnnx_cli_test(tune.search_budget_ms STDOUT "search_budget_ms.: 0\\.001"
              JSON stdout JSON_REQUIRE options/search_budget_ms results/0/chosen/id
              ENV DNNX_SEARCH_BUDGET_MS=5000
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --search-budget-ms 0.001 --json -)
dnnx_cli_test(env.search_budget_ms STDOUT "search_budget_ms.: 5000\\.0"
              JSON stdout ENV DNNX_SEARCH_BUDGET_MS=5000
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --json -)
dnnx_cli_test(tune.search_budget_text STDOUT "benchmark limit: all; search budget: 250 ms; runs: 1"
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --search-budget-ms 250)
dnnx_cli_usage_error(bad.search_budget_ms "--search-budget-ms '4000000': expected milliseconds from 0 \\(no budget\\) to 3600000"
                     profile act --input 2x3 --search-budget-ms 4000000)
dnnx_cli_test(algos.variant_of JSON stdout JSON_REQUIRE 0/algos/0/variant_of
              ARGS algos conv ${_conv} --direction fwd --json)
dnnx_cli_usage_error(bad.variant_factor "--variant-factor '0\\.5': expected 0 \\(off\\) or a number >= 1"
                     profile act --input 2x3 --variant-factor 0.5)
dnnx_cli_test(tune.heuristic_policy STDOUT "policy: heuristic;.*1\\.00x"
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 2 --policy heuristic
                   --layers tiny.depthwise --direction fwd --runs 1)

# The environment: DNNX_BACKEND when --backend is not given; DNNX_CONV_*_ALGO per direction unless
# --policy is given; the tuning variables under the flags.
dnnx_cli_test(env.backend STDOUT "^conv fwd on reference: " ENV DNNX_BACKEND=reference
              ARGS algos conv ${_conv} --direction fwd)
dnnx_cli_test(env.backend_flag_wins STDOUT "^conv fwd on reference: " ENV DNNX_BACKEND=cudnn
              ARGS algos conv ${_conv} --direction fwd --backend reference)
dnnx_cli_test(env.policy STDOUT "policy: fwd heuristic, bwd_data exhaustive, bwd_weights exhaustive;"
              ENV DNNX_CONV_FWD_ALGO=heuristic
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv --runs 1)
dnnx_cli_test(env.policy_flag_wins STDOUT "policy: heuristic; workspace limit: 2.0 MiB;"
              ENV DNNX_CONV_FWD_ALGO=exhaustive DNNX_WORKSPACE_LIMIT=1048576
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --policy heuristic --workspace-limit 2M)
dnnx_cli_usage_error(bad.env_backend "DNNX_BACKEND 'tpu'" algos conv ${_conv})
set_tests_properties(cli.bad.env_backend PROPERTIES ENVIRONMENT DNNX_BACKEND=tpu)
dnnx_cli_usage_error(bad.env_workspace_limit "DNNX_WORKSPACE_LIMIT" tune --layers conv1)
set_tests_properties(cli.bad.env_workspace_limit PROPERTIES ENVIRONMENT DNNX_WORKSPACE_LIMIT=abc)

# Bad command lines: exit status 2 and one line naming the argument and the value.
dnnx_cli_usage_error(bad.no_subcommand "subcommand is required; accepted: algos, profile, tune")
dnnx_cli_usage_error(bad.unknown_subcommand "unknown subcommand 'frob'" frob)
dnnx_cli_usage_error(bad.no_op "dnnx algos: a subcommand is required; accepted: conv" algos)
dnnx_cli_usage_error(bad.unknown_flag "--bogus" algos conv ${_conv} --bogus)
dnnx_cli_usage_error(bad.missing_weights "--weights is required" algos conv --input 1x4x8x8)
dnnx_cli_usage_error(bad.dims "--input '32x64xx'" algos conv --input 32x64xx --weights 8x4x3x3)
dnnx_cli_usage_error(bad.zero_dim "--input '1x4x0x8'.*>= 1" algos conv --input 1x4x0x8 --weights 8x4x3x3)
dnnx_cli_usage_error(bad.rank "--weights '8x4x3x3'.*rank 3" algos conv --input 1x4x8 --weights 8x4x3x3)
dnnx_cli_usage_error(bad.negative_stride "--stride '-1'" algos conv ${_conv} --stride=-1)
dnnx_cli_usage_error(bad.stride_count "--stride '1,1,1'.*1 value or 2" algos conv ${_conv} --stride 1,1,1)
dnnx_cli_usage_error(bad.negative_pad "--pad '-2'" profile conv ${_conv} --pad=-2)
dnnx_cli_usage_error(bad.pad_exclusive "--pad excludes --pad-before"
                     algos conv ${_conv} --pad 1 --pad-before 1,0)
dnnx_cli_usage_error(bad.groups "--groups 'two'" algos conv ${_conv} --groups two)
dnnx_cli_usage_error(bad.backend "--backend 'tpu'" algos conv ${_conv} --backend tpu)
dnnx_cli_usage_error(bad.dtype "--dtype 'f64'" profile conv ${_conv} --dtype f64)
dnnx_cli_usage_error(bad.layout "--layout 'nchwc'" algos conv ${_conv} --layout nchwc)
dnnx_cli_usage_error(bad.direction "--direction 'sideways'" algos conv ${_conv} --direction sideways)
dnnx_cli_usage_error(bad.runs "--runs '0'" profile conv ${_conv} --runs 0)
dnnx_cli_usage_error(bad.policy "--policy 'fastest-ever'" tune --policy fastest-ever)
dnnx_cli_usage_error(bad.model "--model 'vgg'" tune --model vgg)
dnnx_cli_usage_error(bad.layers "--layers 'conv1,nope'.*no layer 'nope'" tune --layers conv1,nope)
dnnx_cli_usage_error(bad.batch "--batch '-3'" tune --batch=-3)
dnnx_cli_usage_error(bad.workspace_limit "--workspace-limit '12Q'" tune --workspace-limit 12Q)
dnnx_cli_usage_error(bad.benchmark_limit "--benchmark-limit 'x'" tune --benchmark-limit x)
dnnx_cli_usage_error(bad.json_path "--json '/nonexistent/dir/out.json'"
                     tune --json /nonexistent/dir/out.json)
file(WRITE ${_dnnx_cli_dir}/broken_model.txt "ok.layer 4x8x8 8x4x3x3 1 1 1\nbroken 4x8x8 8x4x3x3 1 1\n")
dnnx_cli_usage_error(bad.model_line "broken_model.txt:2: expected"
                     tune --model ${_dnnx_cli_dir}/broken_model.txt)
# The shapes file's options (Note [shapes file lines]): groups=, dilation=, a 3-D layer with
# per-dim stride and pad, tags, and the batch=N directive (the tool's batch stays --batch).
file(WRITE ${_dnnx_cli_dir}/options_model.txt
     "batch=64\n"
     "opt.dilated  8x9x9  8x1x3x3  1  2  1  dw groups=8 dilation=2\n"
     "opt.video  4x4x6x6  8x4x1x3x3  1,2,2  0,1,1  1\n")
dnnx_cli_test(tune.model_options
              STDOUT "opt\\.dilated +fwd +1 .*opt\\.video +fwd +1 "
              ARGS tune --model ${_dnnx_cli_dir}/options_model.txt --batch 1 --direction fwd
                   --runs 1 --warmup 0 --backend reference)
file(WRITE ${_dnnx_cli_dir}/bad_option_model.txt "x 8x9x9 8x1x3x3 1 1 1 colour=red\n")
dnnx_cli_usage_error(bad.model_option "bad_option_model.txt:1: unknown option 'colour=red'"
                     tune --model ${_dnnx_cli_dir}/bad_option_model.txt)
file(WRITE ${_dnnx_cli_dir}/bad_groups_model.txt "x 8x9x9 8x1x3x3 1 1 1 groups=4\n")
dnnx_cli_usage_error(bad.model_groups "bad_groups_model.txt:1: groups=4 disagrees"
                     tune --model ${_dnnx_cli_dir}/bad_groups_model.txt)
# Shapes the library rejects (dnnx::Error InvalidArgument) are bad arguments too.
dnnx_cli_usage_error(bad.channel_mismatch "8x3x3x3" algos conv --input 1x4x8x8 --weights 8x3x3x3)
dnnx_cli_usage_error(bad.kernel_too_large "30" algos conv --input 1x4x8x8 --weights 8x4x30x3)

# A valid request the library cannot serve: dnnx::Error (not InvalidArgument), exit status 1.
# Skipped where cudnn is usable (a GPU machine).
dnnx_cli_test(unavailable_backend CODE 1 STDERR "cudnn" ONE_LINE_ERROR UNAVAILABLE cudnn
              ARGS algos conv ${_conv} --backend cudnn)
# A layer-direction that fails while tuning is reported and the others still run: exit status 1.
# (A family the backend has no candidate of is a valid request it cannot serve; an unknown fixed id
# is a bad command line, cli.bad.policy_fixed_unknown_id.)
dnnx_cli_test(tune.step_failure CODE 1
              STDOUT "tiny\\.conv +fwd +2 +FAILED.*failures:.*tiny\\.conv fwd: .*family 'fft'"
              STDERR "dnnx: tune: 1 of 1 layer-directions failed"
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --backend reference --policy fft)

# The persistent choice cache: a second `tune` finds every choice in the file the first wrote,
# and `dnnx cache` manages that file. The tests share one file, ordered through fixtures.
set(_dnnx_cli_cache ${_dnnx_cli_dir}/cli-cache.json)
set(_dnnx_cli_cache_env DNNX_CACHE=readwrite DNNX_CACHE_FILE=${_dnnx_cli_cache} DNNX_BACKEND=reference)
set(_dnnx_cli_tune_args tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 2 --layers tiny.depthwise
    --runs 1)
dnnx_cli_test(cache.clear
              STDOUT "^cleared [0-9]+ entries from .*cli-cache.json.cleared [0-9]+ saved plans from .*cli-cache.json.plans"
              ENV ${_dnnx_cli_cache_env} ARGS cache clear)
dnnx_cli_test(cache.tune_first STDOUT "choice cache: readwrite .*cache hits: 0 of 3"
              ENV ${_dnnx_cli_cache_env} ARGS ${_dnnx_cli_tune_args})
dnnx_cli_test(cache.tune_second STDOUT "0 candidates timed.*cache hits: 3 of 3"
              ENV ${_dnnx_cli_cache_env} ARGS ${_dnnx_cli_tune_args})
dnnx_cli_test(cache.stats
              STDOUT "entries: 6 .*saved plans .*cli-cache.json.plans: 0 .*reference +6 +applies here"
              ENV ${_dnnx_cli_cache_env} ARGS cache stats)
dnnx_cli_test(cache.show_json JSON stdout JSON_LENGTH 6 ENV ${_dnnx_cli_cache_env}
              ARGS cache show --json)
dnnx_cli_test(cache.export STDOUT "^exported 6 entries" ENV ${_dnnx_cli_cache_env}
              ARGS cache export ${_dnnx_cli_dir}/cli-cache-shipped.json)
dnnx_cli_test(cache.prune STDOUT "^pruned 5 least recently used entries; 1 remain"
              ENV ${_dnnx_cli_cache_env} ARGS cache prune --max 1)
dnnx_cli_test(cache.import STDOUT "^imported 6 entries .*now 6 entries"
              ENV ${_dnnx_cli_cache_env} ARGS cache import ${_dnnx_cli_dir}/cli-cache-shipped.json)
dnnx_cli_test(cache.import_bad CODE 2 STDERR "not-there.json" ONE_LINE_ERROR
              ENV ${_dnnx_cli_cache_env} ARGS cache import ${_dnnx_cli_dir}/not-there.json)
dnnx_cli_test(cache.prune_bad CODE 2 STDERR "--max" ONE_LINE_ERROR ENV ${_dnnx_cli_cache_env}
              ARGS cache prune --max 0)
dnnx_cli_in_order(cli_cache cache.clear cache.tune_first cache.tune_second cache.stats
                  cache.show_json cache.export cache.prune cache.import)

# The choice cache never stands in the way and never harms a file it does not own
# (docs/tuning-cache.md): a location it cannot use costs a warning and fails nothing; `dnnx cache`
# says which path it cannot use, and readers change nothing.
file(WRITE ${_dnnx_cli_dir}/cache-folder-is-a-file "not a folder")
set(_dnnx_cli_unusable_env DNNX_CACHE=readwrite DNNX_BACKEND=reference
    DNNX_CACHE_FILE=${_dnnx_cli_dir}/cache-folder-is-a-file/tune.json)
set(_dnnx_cli_tune_one tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
    --direction fwd --runs 1)
dnnx_cli_test(cache_safety.unusable_location_algos STDOUT "^conv fwd on reference: "
              ENV ${_dnnx_cli_unusable_env} ARGS algos conv ${_conv} --direction fwd)
dnnx_cli_test(cache_safety.unusable_location_tune STDOUT "cache hits: 0 of 1"
              STDERR "dnnx: tune cache: creating the folder '[^']*cache-folder-is-a-file' failed: .*new choices are kept in memory only"
              ENV ${_dnnx_cli_unusable_env} ARGS ${_dnnx_cli_tune_one})
dnnx_cli_test(cache_safety.unusable_location_clear CODE 1 ONE_LINE_ERROR
              STDERR "creating the folder '[^']*cache-folder-is-a-file' failed"
              ENV ${_dnnx_cli_unusable_env} ARGS cache clear)
if(EXISTS /dev/null)
  dnnx_cli_test(cache_safety.device_tune STDOUT "cache hits: 0 of 1"
                STDERR "'/dev/null' is a character device, not a regular file; it is left untouched"
                ENV DNNX_CACHE=readwrite DNNX_CACHE_FILE=/dev/null DNNX_BACKEND=reference
                ARGS ${_dnnx_cli_tune_one})
  dnnx_cli_usage_error(cache_safety.device_show "'/dev/null' is a character device"
                       cache --file /dev/null show)
endif()
if(EXISTS /dev/zero)
  dnnx_cli_usage_error(cache_safety.import_device "'/dev/zero' is a character device"
                       cache --file ${_dnnx_cli_dir}/cache-import-target.json import /dev/zero)
endif()
dnnx_cli_usage_error(cache_safety.export_over_folder "'[^']*cli' is a directory"
                     cache --file ${_dnnx_cli_dir}/cache-folder-is-a-file/tune.json export
                     ${_dnnx_cli_dir})
# A corrupt cache file of dnnx's: readers report it and leave it where it is, so the last step
# finds it as the first did. A file of someone else's: even writers leave it as it is.
file(WRITE ${_dnnx_cli_dir}/cache-corrupt.json
     "{\"schema\": \"dnnx.tune-cache\", \"version\": 1, \"entries\": [{\"key\": \"k\", \"op\": \"co")
file(WRITE ${_dnnx_cli_dir}/cache-foreign.json "{\"my\": \"settings\"}\n")
set(_dnnx_cli_corrupt --file ${_dnnx_cli_dir}/cache-corrupt.json)
dnnx_cli_usage_error(cache_safety.corrupt_show "cache-corrupt.json' is unreadable"
                     cache ${_dnnx_cli_corrupt} show)
dnnx_cli_usage_error(cache_safety.corrupt_stats "cache-corrupt.json' is unreadable"
                     cache ${_dnnx_cli_corrupt} stats)
dnnx_cli_usage_error(cache_safety.corrupt_export "cache-corrupt.json' is unreadable"
                     cache ${_dnnx_cli_corrupt} export ${_dnnx_cli_dir}/cache-corrupt-export.json)
dnnx_cli_test(cache_safety.corrupt_read_mode_tune STDOUT "cache hits: 0 of 1"
              STDERR "cache-corrupt.json' is unreadable .*it is not used"
              ENV DNNX_CACHE=read DNNX_CACHE_FILE=${_dnnx_cli_dir}/cache-corrupt.json
                  DNNX_BACKEND=reference
              ARGS ${_dnnx_cli_tune_one})
dnnx_cli_usage_error(cache_safety.foreign_clear "cache-foreign.json' is not a dnnx tune cache"
                     cache --file ${_dnnx_cli_dir}/cache-foreign.json clear)
dnnx_cli_test(cache_safety.foreign_tune STDOUT "cache hits: 0 of 1"
              STDERR "cache-foreign.json' is not a dnnx tune cache .*left untouched"
              ENV DNNX_CACHE=readwrite DNNX_CACHE_FILE=${_dnnx_cli_dir}/cache-foreign.json
                  DNNX_BACKEND=reference
              ARGS ${_dnnx_cli_tune_one})
dnnx_cli_usage_error(cache_safety.corrupt_show_again "cache-corrupt.json' is unreadable"
                     cache ${_dnnx_cli_corrupt} show)
dnnx_cli_usage_error(cache_safety.foreign_show_again "cache-foreign.json' is not a dnnx tune cache"
                     cache --file ${_dnnx_cli_dir}/cache-foreign.json show)
dnnx_cli_in_order(cli_cache_safety cache_safety.corrupt_show cache_safety.corrupt_stats
                  cache_safety.corrupt_export cache_safety.corrupt_read_mode_tune
                  cache_safety.foreign_clear cache_safety.foreign_tune
                  cache_safety.corrupt_show_again cache_safety.foreign_show_again)

# Bad numbers, files and words, and output that cannot be written (docs/cli.md): exit status 2 and
# one line naming the flag, the value and what is accepted; a failure while running: exit status 1.
# Every numeric flag has a range, --runs and --warmup one that keeps a typo from running for days.
dnnx_cli_usage_error(bad.runs_too_large "--runs '2147483647': out of range; accepted: 1 to 1000"
                     profile conv ${_conv} --runs 2147483647)
dnnx_cli_usage_error(bad.runs_beyond_64_bits "--runs '99999999999999999999': out of range"
                     profile conv ${_conv} --runs 99999999999999999999)
dnnx_cli_usage_error(bad.warmup_too_large "--warmup '1001': out of range; accepted: 0 to 1000"
                     profile act --input 2x3 --warmup 1001)
dnnx_cli_usage_error(bad.benchmark_limit_too_large
                     "--benchmark-limit '5000': out of range; accepted: 0 to 1000"
                     tune --benchmark-limit 5000)
dnnx_cli_usage_error(bad.batch_too_large "--batch '4294967296': out of range; accepted: 1 to 2147483648"
                     tune --batch 4294967296)
dnnx_cli_usage_error(bad.device_too_large "--device '5000': out of range; accepted: 0 to 1023"
                     algos conv ${_conv} --device 5000)
dnnx_cli_usage_error(bad.workspace_limit_too_large "--workspace-limit '9000000000000G': out of range"
                     profile conv ${_conv} --workspace-limit 9000000000000G)
dnnx_cli_test(help.ranges STDOUT "--runs N +timed runs per candidate, 1 to 1000.*--warmup N +untimed runs per candidate first, 0 to 1000"
              ARGS profile conv --help)
# One integer grammar for flags, lists and dims: no '+', no spaces.
dnnx_cli_usage_error(bad.dims_plus_sign "--input '\\+1x\\+4x8x8': entry '\\+1' is not an integer"
                     algos conv --input +1x+4x8x8 --weights 8x4x3x3)
dnnx_cli_usage_error(bad.dims_space "--input '1x4x8x 8': entry ' 8' is not an integer"
                     algos conv "--input=1x4x8x 8" --weights 8x4x3x3)
dnnx_cli_usage_error(bad.stride_space "--stride ' 2': entry ' 2' is not an integer"
                     algos conv ${_conv} "--stride= 2")
dnnx_cli_usage_error(bad.pool_kernel_plus "--kernel '\\+2': entry '\\+2' is not an integer"
                     algos pool --input 1x2x8x8 --kernel +2)
dnnx_cli_usage_error(bad.groups_plus "--groups '\\+1': expected an integer"
                     algos conv ${_conv} --groups +1)
dnnx_cli_usage_error(bad.dims_too_many "--input '1x1x1x1x1x1': has 6 entries; at most 5"
                     algos softmax --input 1x1x1x1x1x1)
# A flag where a value belongs names the flag that lacks its value.
dnnx_cli_usage_error(bad.value_is_a_flag "--stride: expected a value .* but got the flag '--pad'"
                     algos conv ${_conv} --stride --pad 1)
dnnx_cli_usage_error(bad.layer_value_is_a_flag "--mode: expected a value .* but got the flag '--log'"
                     algos softmax --input 2x3 --mode --log)
# A grouped convolution whose channel product overflows: the value, never a wrapped one.
dnnx_cli_usage_error(bad.groups_overflow "groups=9223372036854775807 .*4 x 9223372036854775807"
                     algos conv --input 1x9x8x8 --weights 8x4x3x3 --groups 9223372036854775807)
# An unknown fixed id is a bad command line naming the id and the valid ones (from the flag or
# from the environment), reported before anything is tuned.
dnnx_cli_usage_error(bad.policy_fixed_unknown_id
                     "--policy 'fixed:no:such:algorithm': no fwd candidate of backend reference has the id 'no:such:algorithm'; valid ids: reference:direct"
                     tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                     --direction fwd --backend reference --policy fixed:no:such:algorithm)
dnnx_cli_test(bad.env_policy_fixed_unknown_id CODE 2 ONE_LINE_ERROR
              STDERR "DNNX_CONV_BWD_DATA_ALGO 'fixed:nope': no bwd_data candidate .*valid ids: "
              ENV DNNX_CONV_BWD_DATA_ALGO=fixed:nope DNNX_CACHE=off
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction bwd_data --backend reference)
dnnx_cli_test(bad.env_algo_policy_fixed_unknown_id CODE 2 ONE_LINE_ERROR
              STDERR "DNNX_ALGO_CONV_BWD_WEIGHTS 'fixed:nope': no bwd_weights candidate .*valid ids: "
              ENV DNNX_ALGO_CONV_BWD_WEIGHTS=fixed:nope DNNX_CACHE=off
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction bwd_weights --backend reference)
# Both spellings of one policy, set to different values: exit 2 naming both.
dnnx_cli_test(bad.env_policy_two_spellings CODE 2 ONE_LINE_ERROR
              STDERR "DNNX_ALGO_POOL_BWD='exhaustive' and DNNX_POOL_BWD_ALGO='heuristic'"
              ENV DNNX_ALGO_POOL_BWD=exhaustive DNNX_POOL_BWD_ALGO=heuristic DNNX_CACHE=off
              ARGS profile pool --input 1x1x4x4 --kernel 2 --backend reference --direction bwd)
# Model files: regular files of at most 1 MiB only (/dev/zero never ends).
dnnx_cli_usage_error(bad.model_missing "--model 'vgg': no such file; expected a built-in model \\(resnet50\\)"
                     tune --model vgg)
dnnx_cli_usage_error(bad.model_directory "--model '.*': is a directory" tune --model ${_dnnx_cli_dir})
if(EXISTS /dev/zero)
  dnnx_cli_usage_error(bad.model_device "--model '/dev/zero': is a character device"
                       tune --model /dev/zero)
endif()
string(REPEAT "# padding\n" 104858 _dnnx_cli_padding)
file(WRITE ${_dnnx_cli_dir}/huge_model.txt "${_dnnx_cli_padding}")
dnnx_cli_usage_error(bad.model_too_large "huge_model.txt': the file has 1048580 bytes"
                     tune --model ${_dnnx_cli_dir}/huge_model.txt)
unset(_dnnx_cli_padding)
# A profile in which no candidate ran timed nothing: exit status 1 after the table.
dnnx_cli_test(profile.nothing_ran CODE 1 STDOUT "reference:direct .*unsupported: swish backward"
              STDERR "dnnx: profile: no candidate ran for act bwd_data \\(1 unsupported\\)"
              ARGS profile act --input 2x3 --kind swish --saved dst --direction bwd
                   --backend reference --runs 1)
dnnx_cli_test(profile.nothing_ran_json CODE 1 JSON stdout JSON_LENGTH 2
              STDERR "no candidate ran for act bwd_data"
              ARGS profile act --input 2x3 --kind swish --saved dst --direction all
                   --backend reference --runs 1 --json)
# Output that cannot be written is a failure naming where it went (Note [write errors]).
if(EXISTS /dev/full)
  add_test(NAME cli.write_error.stdout
           COMMAND sh -c "\"$0\" \"$@\" 2>&1 >/dev/full; echo \"exit status $?\""
                   $<TARGET_FILE:dnnx_cli> algos conv ${_conv} --direction fwd --backend reference)
  set_tests_properties(cli.write_error.stdout PROPERTIES LABELS cli
    PASS_REGULAR_EXPRESSION "dnnx: writing to stdout failed: No space left on device; the output is incomplete\nexit status 1")
  add_test(NAME cli.write_error.help
           COMMAND sh -c "\"$0\" \"$@\" 2>&1 >/dev/full; echo \"exit status $?\""
                   $<TARGET_FILE:dnnx_cli> --help)
  set_tests_properties(cli.write_error.help PROPERTIES LABELS cli
    PASS_REGULAR_EXPRESSION "writing to stdout failed.*exit status 1")
  dnnx_cli_test(write_error.tune_json CODE 1 STDERR "--json '/dev/full': writing the results failed"
                ENV DNNX_CACHE=off
                ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                     --direction fwd --backend reference --runs 1 --json /dev/full)
endif()

# Pictures: `profile --plot` and `tune --report`, checked against the JSON of the same command
# (structure: the SVG's points, Pareto front, marks and list of what did not run; the report's
# rows, bars and facts, nothing loaded from elsewhere), then the report in headless Chromium (its
# script runs without an error and sorts as the address asks) and the SVG rendered there; 77:
# no Chromium (scripts/setup.sh installs Debian's).
foreach(_what structure browser)
  add_test(NAME cli.pictures_${_what}
           COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/pictures_test.py
                   $<TARGET_FILE:dnnx_cli> ${_dnnx_cli_dir}/pictures ${_what})
  set_tests_properties(cli.pictures_${_what} PROPERTIES
    LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT DNNX_CACHE=off)
endforeach()
# tune --json keeps its file up to date while it runs ("complete": false until the last step):
# a run killed halfway keeps a partial document, which `dnnx report` marks incomplete.
add_test(NAME cli.tune.progress
         COMMAND ${DNNX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/tune_progress_test.py
                 $<TARGET_FILE:dnnx_cli> ${_dnnx_cli_dir}/tune_progress)
set_tests_properties(cli.tune.progress PROPERTIES LABELS cli TIMEOUT 300)
dnnx_cli_usage_error(bad.plot_unwritable "--plot '/nonexistent/p.svg': cannot open for writing"
                     profile conv ${_conv} --plot /nonexistent/p.svg)
dnnx_cli_usage_error(bad.report_unwritable "--report '/nonexistent/r.html': cannot open for writing"
                     tune --model ${_dnnx_cli_dir}/tiny_model.txt --report /nonexistent/r.html)
if(EXISTS /dev/full)
  dnnx_cli_test(write_error.plot CODE 1 STDERR "--plot '/dev/full': writing the results failed"
                ARGS profile conv ${_conv} --direction fwd --backend reference --runs 1
                     --plot /dev/full)
  dnnx_cli_test(write_error.report CODE 1 STDERR "--report '/dev/full': writing the results failed"
                ENV DNNX_CACHE=off
                ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                     --direction fwd --backend reference --runs 1 --report /dev/full)
endif()

# Energy (docs/energy.md): the host backends read no energy counter, so min_energy keeps the
# fastest and says why (stderr once, the JSON per step), and profile --energy says so and adds no
# energy columns; the window and the repeats are checked like every flag.
dnnx_cli_test(tune.min_energy_without_counter
              STDOUT "\"energy_window_ms\": 250.*\"energy_meter\": \"the reference backend reads no energy counter\""
              STDERR "dnnx: energy is not measured: the reference backend reads no energy counter"
              ENV DNNX_CACHE=off
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --backend reference --runs 1 --policy min_energy
                   --energy-window-ms 250 --energy-repeats 2 --json -)
# An energy policy's choice in the cache file: `cache show --json` gives its energy fields.
set(_dnnx_cli_energy_cache_env DNNX_CACHE=readwrite
    DNNX_CACHE_FILE=${_dnnx_cli_dir}/cli-energy-cache.json DNNX_BACKEND=reference)
dnnx_cli_test(cache_energy.clear STDOUT "^cleared" ENV ${_dnnx_cli_energy_cache_env}
              ARGS cache clear)
dnnx_cli_test(cache_energy.tune STDOUT "cache hits: 0 of 1" ENV ${_dnnx_cli_energy_cache_env}
              ARGS tune --model ${_dnnx_cli_dir}/tiny_model.txt --batch 1 --layers tiny.conv
                   --direction fwd --runs 1 --policy min_energy --energy-window-ms 50
                   --energy-repeats 1)
dnnx_cli_test(cache_energy.show_json
              STDOUT "\"energy_fastest\": null,.*\"energy_j\": null,.*\"energy_meter\": \"the reference backend reads no energy counter\""
              ENV ${_dnnx_cli_energy_cache_env} ARGS cache show --json)
dnnx_cli_in_order(cli_energy_cache cache_energy.clear cache_energy.tune cache_energy.show_json)
dnnx_cli_test(profile.energy_without_counter
              STDOUT "energy: the reference backend reads no energy counter"
              ARGS profile conv ${_conv} --direction fwd --backend reference --runs 1 --energy)
dnnx_cli_usage_error(bad.energy_window_ms
                     "--energy-window-ms '10': expected milliseconds from 50 to 60000"
                     profile act --input 2x3 --energy-window-ms 10)
dnnx_cli_usage_error(bad.energy_repeats "--energy-repeats '0'"
                     tune --model ${_dnnx_cli_dir}/tiny_model.txt --energy-repeats 0)
dnnx_cli_usage_error(bad.policy_energy "unknown algorithm policy 'min_power'.*min_energy, energy_delay"
                     tune --model ${_dnnx_cli_dir}/tiny_model.txt --policy min_power)
# `dnnx plot` and `dnnx report` redraw saved JSON (the pictures tests above check what they draw);
# a file that is not such a document is a usage error naming it.
file(WRITE ${_dnnx_cli_dir}/not_json.txt "conv fwd profile\n")
file(WRITE ${_dnnx_cli_dir}/not_profile.json "{\"model\": \"m\", \"results\": []}")
dnnx_cli_usage_error(bad.plot_not_json "not_json.txt': not JSON; expected the JSON of `dnnx profile"
                     plot ${_dnnx_cli_dir}/not_json.txt --out p.svg)
dnnx_cli_usage_error(bad.plot_not_profile "not_profile.json': not a profile"
                     plot ${_dnnx_cli_dir}/not_profile.json --out p.svg)
dnnx_cli_usage_error(bad.plot_missing "missing.json': no such file"
                     plot ${_dnnx_cli_dir}/missing.json --out p.svg)
dnnx_cli_usage_error(bad.report_not_tune "not_json.txt': not JSON; expected the JSON of `dnnx tune"
                     report ${_dnnx_cli_dir}/not_json.txt --out r.html)
dnnx_cli_usage_error(bad.report_folder "cli': is not a regular file"
                     report ${_dnnx_cli_dir} --out r.html)
dnnx_cli_test(help.plot STDOUT "PROFILE.json.*--out" ARGS plot --help)
dnnx_cli_test(help.report STDOUT "TUNE.json.*--out" ARGS report --help)
