#!/usr/bin/env bash
# Runs lists of GPU jobs on a machine of several GPUs, one list per GPU, the GPUs in parallel,
# under one time budget, for a device call of limited length: each job starts only while time is
# left and gets what is left as its limit; the logs are packed into OUT/logs.tgz every 30 s and at
# the end, so a call cut short still brings back what ran. The shape-suite jobs go through
# scripts/gpu_run.sh (three rounds, the choices kept: Note [suite rounds] in bench/compare_gpu.py).
#
#   bash scripts/gpu_jobs.sh BUILD OUT BUDGET_S JOB...
#
# JOB is GPU:KIND..., GPU the device index (CUDA_VISIBLE_DEVICES); the jobs of one GPU run in the
# order given:
#   G:FILES:CONFIGS                 the shape suite (SHAPES_FILES, SHAPES_CONFIGS), 3 rounds kept
#   G:env:VAR=VALUE[,VAR=VALUE...]:FILES:CONFIGS
#                                   the same with more variables (e.g. DNNX_SEARCH_BUDGET_MS=1000,
#                                   or SHAPES_TAG=bench,SHAPES_TORCH_KERNELS=1 for ResNet-50's
#                                   eight layers with PyTorch's kernels listed, or
#                                   SHAPES_RECHECK=1: the rows above 1.00 timed again with
#                                   PyTorch in one process, scripts/gpu_run.sh)
#   G:env:VAR=VALUE[,VAR=VALUE...]:JOB
#                                   any job below with more variables, e.g.
#                                   0:env:DNNX_CUDNN_GRAPHS=0:bench:FILE:f16_nhwc:--layers,NAME
#   G:tests:BIN,BIN                 test binaries of BUILD/tests, one after the other
#   G:verbose:SHAPES:CONFIGS[:LAYERS]
#                                   cudnn_conv_bench on a shapes file with DNNX_VERBOSE=1 (the
#                                   search's own report of where its time went, and every row of
#                                   its table in the records), every layer or the named ones
#                                   (LAYERS: names with commas)
#   G:bench:SHAPES:CONFIGS:ARGS     cudnn_conv_bench on a shapes file with DNNX_VERBOSE=1, every
#                                   search row and more arguments (commas become spaces), e.g.
#                                   0:bench:FILE:f16_nhwc:--directions,bwd_weights,--loop-rows,6
#   G:cli:ARGS                      BUILD's dnnx with ARGS (commas become spaces), e.g.
#                                   0:cli:profile,conv,--input,64x1024x14x14,...,--json
#   G:reuse:SHAPES:CONFIGS[:LAYERS] the same, once searching into a choices file (quiet), then as
#                                   a second process reusing it, verbose (its settling of late
#                                   plans, its plan loads)
#   G:ncu:SHAPES:CONFIGS[:LAYERS]   the same search into a choices file, then a process reusing
#                                   it under Nsight Compute, capture off but for each case's
#                                   choice in a profiled loop of 5 calls (Note [profiled loops] in
#                                   bench/cudnn_conv_bench.cpp): ncu's CSV (ncu.csv) names every
#                                   kernel the choices launch and its duration (NCU: the ncu to
#                                   run, by default the one on PATH or under /opt/nvidia)
#   G:python:SCRIPT[:ARGS]          PYTHON SCRIPT ARGS (commas in ARGS become spaces, {out} the
#                                   job's own folder in the logs), e.g.
#                                   1:python:bench/gemm_1x1_study.py:--json,{out}/gemm.json
#   G:interleaved:ARGS              bench/interleaved_rows.py ARGS (commas become spaces, `+`
#                                   commas): dnnx (its Python module) and PyTorch on the same
#                                   rows in one process, their loops taking turns, e.g.
#                                   0:interleaved:--shapes,unet,--layers,d3.conv2+e3.conv1,--kernels
#                                   0:interleaved:--from-suite,bench/results/F.json.gz (its rows
#                                   above 1.00). The module is built once per run against BUILD's
#                                   libdnnx with PYTHON (scripts/gpu_python.sh)
#   G:energy:MODEL:BATCH:CONFIG[:POLICY]
#                                   BUILD's `dnnx tune` of MODEL (resnet50 or a shapes file) at
#                                   BATCH in CONFIG (f16_nhwc, f32_nchw, bf16_nhwc, ...) with
#                                   POLICY (min_energy by default) on the cudnn backend, its JSON
#                                   and bench/energy_compare.py's tables (docs/energy.md)
#   G:train:ARGS                    BUILD's bench/train_bench ARGS (commas become spaces), e.g.
#                                   0:train:--policy,min_energy,--energy
# E.g. on two GPUs, 560 s:
#   bash scripts/gpu_jobs.sh build-gpu $OUT 560 0:odd_sizes:f16_nhwc \
#     0:tests:cudnn_conv_search_test 1:env:DNNX_SEARCH_BUDGET_MS=1000:mobilenetv2:f16_nhwc
# Each suite job gets 70% of the time left when it starts as its SHAPES_BUDGET_S (no new layer
# after that), the rest for PyTorch's turns. BUILD is a build tree with the cudnn backend (a
# build made elsewhere and carried works); the cuDNN 9.19 and CUDA libraries of the PyTorch
# environment are put on LD_LIBRARY_PATH, and PYTHON defaults to that environment's Python
# (docs/testing.md). Choice caches are off (DNNX_CACHE=off) except the files the suite's rounds
# keep their choices in.
set -uo pipefail
build=${1:?usage: gpu_jobs.sh BUILD OUT BUDGET_S JOB...}
out=${2:?usage: gpu_jobs.sh BUILD OUT BUDGET_S JOB...}
budget=${3:?usage: gpu_jobs.sh BUILD OUT BUDGET_S JOB...}
shift 3
torch_env=/opt/torch/.venv
export LD_LIBRARY_PATH=$PWD/$build/src:$torch_env/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHON=${PYTHON:-$torch_env/bin/python3} DNNX_CACHE=off
work=$(mktemp -d)
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv > "$work/smi.txt" 2>&1
start=$(date +%s)
declare -A jobs
for job in "$@"; do
  gpu=${job%%:*}
  [[ $gpu =~ ^[0-9]+$ && $job == *:* ]] || { echo "gpu_jobs.sh: '$job' is not GPU:KIND..." >&2; exit 2; }
  jobs[$gpu]="${jobs[$gpu]:+${jobs[$gpu]};}${job#*:}"
done

# The jobs of GPU $1, in turn; its log is $work/g$1.log.
run_gpu() {
  local gpu=$1 k=0 job left
  local -a list
  IFS=';' read -r -a list <<< "${jobs[$gpu]}"
  for job in "${list[@]}"; do
    k=$((k + 1))
    left=$((budget - ($(date +%s) - start)))
    if ((left <= 30)); then
      echo "skipped $job: the budget ran out" >> "$work/g$gpu.log"
      continue
    fi
    echo "== $(date +%T) gpu$gpu job$k $job, $left s left" >> "$work/g$gpu.log"
    run_job "$gpu" "$k" "$left" "$job"
    echo "   rc=$? $(date +%T)" >> "$work/g$gpu.log"
  done
}

# dnnx's Python module for the interleaved jobs, built once per run by scripts/gpu_python.sh
# against BUILD's libdnnx with PYTHON, without dnnx._torch_ext, into $module/stage (outside the
# logs; its build's log is in $work/module); the GPUs' lists wait for each other's build.
module=$(mktemp -d)
python_module() {
  (
    flock 9
    [[ -d $module/stage/dnnx ]] && exit 0
    GPU_PYTHON_WORK=$module GPU_PYTHON_BUILD_ONLY=1 GPU_PYTHON_TORCH_EXT=OFF \
      bash scripts/gpu_python.sh "$build/src" "$work/module" > "$work/module.log" 2>&1
  ) 9> "$module/lock"
}

# Job $4 (GPU:KIND... less its GPU) as job $2 of GPU $1, with $3 s left; its status is the job's.
run_job() {
  local gpu=$1 k=$2 left=$3 job=$4 kind a b c
  IFS=: read -r kind a b c <<< "$job"
  local -a suite_env=("CUDA_VISIBLE_DEVICES=$gpu" SHAPES_ROUNDS=3 SHAPES_REUSE=1
                      "SHAPES_BUDGET_S=$((left * 7 / 10))")
  case $kind in
    tests)
      for test in ${a//,/ }; do
        echo "-- $test" >> "$work/g$gpu-tests.log"
        CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$build/tests/$test" --gtest_brief=1 \
          >> "$work/g$gpu-tests.log" 2>&1
        echo "   $test rc=$?" | tee -a "$work/g$gpu-tests.log" >> "$work/g$gpu.log"
      done ;;
    verbose)
      CUDA_VISIBLE_DEVICES=$gpu DNNX_VERBOSE=1 timeout "$left" "$build/bench/cudnn_conv_bench" \
        --shapes "$a" --tag all --configs "$b" --no-heuristic --search-rows 0 ${c:+--layers "$c"} \
        > "$work/g$gpu-j$k-verbose.jsonl" 2> "$work/g$gpu-j$k-verbose.err" ;;
    bench)
      local -a bench_args=()
      [[ -n $c ]] && read -r -a bench_args <<< "${c//,/ }"
      CUDA_VISIBLE_DEVICES=$gpu DNNX_VERBOSE=1 timeout "$left" "$build/bench/cudnn_conv_bench" \
        --shapes "$a" --tag all --configs "$b" --no-heuristic --search-rows 0 "${bench_args[@]}" \
        > "$work/g$gpu-j$k-bench.jsonl" 2> "$work/g$gpu-j$k-bench.err" ;;
    cli)
      local -a cli_args=()
      local cli_line=${job#cli:}
      read -r -a cli_args <<< "${cli_line//,/ }"
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$build/tools/dnnx/dnnx" "${cli_args[@]}" \
        > "$work/g$gpu-j$k-cli.txt" 2> "$work/g$gpu-j$k-cli.err" ;;
    reuse)
      local choices="$work/g$gpu-j$k-choices.json"
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$build/bench/cudnn_conv_bench" \
        --shapes "$a" --tag all --configs "$b" --no-heuristic ${c:+--layers "$c"} \
        --choices-file "$choices" > "$work/g$gpu-j$k-first.jsonl" 2> "$work/g$gpu-j$k-first.err"
      CUDA_VISIBLE_DEVICES=$gpu DNNX_VERBOSE=1 timeout "$left" "$build/bench/cudnn_conv_bench" \
        --shapes "$a" --tag all --configs "$b" --no-heuristic ${c:+--layers "$c"} \
        --choices-file "$choices" --reuse > "$work/g$gpu-j$k-verbose.jsonl" \
        2> "$work/g$gpu-j$k-verbose.err" ;;
    ncu)
      local choices="$work/g$gpu-j$k-choices.json"
      local ncu=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null \
                          | tail -n 1)}
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$build/bench/cudnn_conv_bench" \
        --shapes "$a" --tag all --configs "$b" --no-heuristic ${c:+--layers "$c"} \
        --choices-file "$choices" > "$work/g$gpu-j$k-first.jsonl" 2> "$work/g$gpu-j$k-first.err"
      left=$((budget - ($(date +%s) - start)))
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "${ncu:-ncu}" --profile-from-start off \
        --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        --log-file "$work/g$gpu-j$k-ncu.csv" "$build/bench/cudnn_conv_bench" \
        --shapes "$a" --tag all --configs "$b" --no-heuristic ${c:+--layers "$c"} \
        --choices-file "$choices" --reuse --profile-loop 5 > "$work/g$gpu-j$k-ncu.jsonl" \
        2> "$work/g$gpu-j$k-ncu.err" ;;
    python)
      local job_out="$work/g$gpu-j$k"
      mkdir -p "$job_out"
      local -a script_args=()
      [[ -n $b ]] && read -r -a script_args <<< "${b//,/ }"
      script_args=("${script_args[@]//\{out\}/$job_out}")
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$PYTHON" "$a" "${script_args[@]}" \
        > "$job_out/stdout.txt" 2> "$job_out/stderr.txt" ;;
    interleaved)
      local job_out="$work/g$gpu-j$k" line=${job#interleaved:}
      local -a script_args=()
      read -r -a script_args <<< "${line//,/ }"
      script_args=("${script_args[@]//+/,}")
      mkdir -p "$job_out"
      python_module || { echo "   the Python module did not build ($work/module)" \
                           >> "$work/g$gpu.log"; return 1; }
      CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH="$module/stage" timeout "$left" "$PYTHON" \
        bench/interleaved_rows.py "${script_args[@]}" --json "$job_out/rows.json" \
        > "$job_out/rows.md" 2> "$job_out/stderr.txt" ;;
    energy)
      local tuned="$work/g$gpu-j$k-energy.json" config=${c%%:*} policy=min_energy
      [[ $c == *:* ]] && policy=${c#*:}
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$build/tools/dnnx/dnnx" tune --model "$a" \
        --batch "$b" --dtype "${config%%_*}" --layout "${config#*_}" --backend cudnn \
        --policy "$policy" --json "$tuned" > "$work/g$gpu-j$k-energy.txt" 2>&1
      "$PYTHON" bench/energy_compare.py "$tuned" --rows --json "$work/g$gpu-j$k-compare.json" \
        > "$work/g$gpu-j$k-compare.md" 2>&1 ;;
    train)
      local -a train_args=()
      read -r -a train_args <<< "${a//,/ }"
      CUDA_VISIBLE_DEVICES=$gpu timeout "$left" "$build/bench/train_bench" "${train_args[@]}" \
        > "$work/g$gpu-j$k-train.json" 2> "$work/g$gpu-j$k-train.err" ;;
    env)
      local -a assignments
      IFS=, read -r -a assignments <<< "$a"
      local inner=${job#env:"$a":}
      case ${inner%%:*} in
        tests | verbose | bench | cli | reuse | ncu | python | interleaved | energy | train | env)
          (export "${assignments[@]}" && run_job "$gpu" "$k" "$left" "$inner") ;;
        *)
          env "${assignments[@]}" "${suite_env[@]}" SHAPES_FILES="$b" SHAPES_CONFIGS="$c" \
            timeout "$left" bash scripts/gpu_run.sh "$build" "$work/g$gpu-j$k" shapes \
            >> "$work/g$gpu.log" 2>&1 ;;
      esac ;;
    *)
      env "${suite_env[@]}" SHAPES_FILES="$kind" SHAPES_CONFIGS="$a" timeout "$left" \
        bash scripts/gpu_run.sh "$build" "$work/g$gpu-j$k" shapes >> "$work/g$gpu.log" 2>&1 ;;
  esac
}

pids=()
for gpu in "${!jobs[@]}"; do
  run_gpu "$gpu" &
  pids+=($!)
done
(while sleep 30; do tar czf "$out/logs.tgz" -C "$work" . 2> /dev/null; done) &
snapshots=$!
wait "${pids[@]}"
kill "$snapshots" 2> /dev/null
tar czf "$out/logs.tgz" -C "$work" .
rm -rf "$module"
for gpu in "${!jobs[@]}"; do cat "$work/g$gpu.log"; done
cat "$work"/*/shapes.md 2> /dev/null | grep -A4 "Suite summary"
