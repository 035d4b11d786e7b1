#!/usr/bin/env bash
# Runs the GPU half of the suite and the GPU benchmarks from a build made elsewhere (the GPU machine
# need not build anything): every cudnn test binary of BUILD (label gpu), then the benchmarks that
# compare with PyTorch in the same run. Logs and JSON go to OUT.
#
#   bash scripts/gpu_run.sh BUILD OUT [WHAT]
#
# WHAT is a comma-separated list of tests, bench (convolution, layers, fused convolution), matmul
# (matmul_bench through compare_matmul.py), optim (optim_bench through compare_optim.py), rnn
# (rnn_bench through compare_rnn.py), python (the Python package built against BUILD's libdnnx
# and python/tests run with PYTHON's CUDA torch, through scripts/gpu_python.sh: pytest.log,
# pytest.xml), resnet50 (bench/torch_resnet50.py: converted torchvision ResNet-50 training steps
# against PyTorch; torch_resnet50.md / .json; then bench/torch_layer_overhead.py on CUDA, f32 and
# f16 channels_last: torch_layers.md; needs the python part first, whose package it imports),
# train (bench/train_bench through bench/train_resnet50_gpu.py: a dnnx::nn ResNet-50 training
# step, fp16 NHWC, against PyTorch; train.md / train.json), shapes (the convolution shape suite,
# bench/shapes/*.txt, through compare_gpu.py --suite: shapes.md / shapes.json; not part of all,
# it runs for as long as it is given), or all of them (the default).
#
# The shapes part is sized by the environment: SHAPES_FILES (comma-separated names in bench/shapes,
# default mobilenetv2), SHAPES_MAX_LAYERS (the first N layers of each file; default 0: all),
# SHAPES_BUDGET_S (no new layer or file starts after this many seconds; default 300),
# SHAPES_TAG (only the layers with this tag, e.g. dw; default all), SHAPES_CONFIGS (default
# f16_nhwc,f32_nchw), SHAPES_ROUNDS (the benchmark and PyTorch take turns this many times per
# file, rows the medians; default 1), SHAPES_REUSE (non-empty: the rounds after the first run
# the first round's choices from its file, as a later process would, and the tables give what
# that process's first calls cost; Note [suite rounds]) and SHAPES_TORCH_KERNELS (non-empty:
# PyTorch's kernels per row, from a few more calls under torch.profiler, listed for the rows at
# 0.98 or above; Note [PyTorch's kernels]), SHAPES_AGAINST_ITSELF (non-empty, with SHAPES_REUSE:
# each round also runs the benchmark once more on the kept choices, and the summary says how many
# rows of one choice read above 1.00 against themselves; Note [the suite against itself]) and
# SHAPES_RECHECK (non-empty: after the suite, its
# rows above 1.00 timed again with PyTorch in one process, bench/interleaved_rows.py through the
# Python module built against BUILD: recheck.md / recheck.json, and the suite summary again with
# their count; Note [rows above 1.00 in one process]) and SHAPES_SEARCH_ROWS (the search's N
# fastest rows in each record, 0 for every row with its status and reason; default 6: the
# benchmark's --search-rows). E.g. a few minutes of GPU time:
#   SHAPES_FILES=mobilenetv2,deeplabv3 SHAPES_MAX_LAYERS=6 bash scripts/gpu_run.sh build out shapes
# SHAPES_FILES=all names every file of the suite. On a machine of several GPUs, SHAPES_DEVICES
# (e.g. 0,1,2,3) runs one shard per GPU (Note [suite shards] in bench/compare_gpu.py): the files
# are dealt out in turn in SHAPES_FILES's order (put the long ones first), each shard has the
# whole budget, writes shapes-gpuN.md / .json, and shapes.md / shapes.json hold every shard's
# tables and the one suite summary (more files than the device tool brings back one by one: tar
# OUT).
#
# OUT receives few files (the device tool brings back at most eight): gpu.txt (the GPU, then the
# benchmarks' stderr), tests.log (every test binary's output, one after the other), tests-xml.tar
# (their gtest XML reports), conv.md / conv.json (cudnn_conv_bench against PyTorch through
# compare_gpu.py), layers.md / layers.json (compare_layers.py), conv_fused.jsonl
# (conv_fused_bench), matmul.md / matmul.json (compare_matmul.py), optim.md / optim.json
# (compare_optim.py), rnn.md / rnn.json (compare_rnn.py) and train.md / train.json
# (train_resnet50_gpu.py): ask for at most eight of them in one
# call.
#
# BUILD is a build tree configured with the cudnn backend (e.g. -DDNNX_WITH_ONEDNN=OFF on a machine
# without oneDNN); cuDNN and the CUDA runtime are found through LD_LIBRARY_PATH (set it to the
# cuDNN 9.19 of the PyTorch environment, see docs/testing.md). PYTHON (default python3) must have
# torch with CUDA for the benchmarks.
set -uo pipefail
build=${1:?usage: gpu_run.sh BUILD OUT [tests,bench,matmul,optim,rnn,train|all]}
out=${2:?usage: gpu_run.sh BUILD OUT [tests,bench,matmul,optim,rnn,train|all]}
what=${3:-all}
wants() { [[ ,$what, == *,$1,* || $what == all ]]; }
wants_only() { [[ ,$what, == *,$1,* ]]; }  # parts that `all` leaves out
python=${PYTHON:-python3}
mkdir -p "$out"
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1 || true

if wants tests; then
  shopt -s nullglob
  xml=$(mktemp -d)
  : > "$out/tests.log"
  for test in "$build"/tests/cudnn_*_test; do
    name=$(basename "$test")
    echo "== $name"
    start=$(date +%s)
    echo "===== $name" >> "$out/tests.log"
    # A hung binary must not take the whole call: it is killed after GPU_TEST_TIMEOUT seconds.
    timeout "${GPU_TEST_TIMEOUT:-300}" "$test" --gtest_output="xml:$xml/$name.xml" \
      > "$xml/$name.log" 2>&1
    rc=$?
    cat "$xml/$name.log" >> "$out/tests.log"
    echo "   rc=$rc $(($(date +%s) - start)) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$xml/$name.log" | tr '\n' ' ')"
    [[ $rc -ne 0 ]] && status=1
  done
  tar -C "$xml" -cf "$out/tests-xml.tar" .
fi

if wants bench; then
  if [[ -x $build/bench/cudnn_conv_bench ]]; then
    echo "== cudnn_conv_bench + compare_gpu (ResNet-50 shapes, fp16 NHWC and fp32 NCHW, batch 64)"
    conv_results=$(mktemp)
    "$build/bench/cudnn_conv_bench" --shapes bench/shapes/resnet50.txt > "$conv_results" \
      2>> "$out/gpu.txt" || status=1
    # PyTorch brings its own cuDNN: the benchmark's library path is not its.
    env -u LD_LIBRARY_PATH "$python" bench/compare_gpu.py --dnnx-results "$conv_results" \
      --json "$out/conv.json" > "$out/conv.md" 2>> "$out/gpu.txt" || status=1
    grep -E "total" "$out/conv.md"
  fi
  if [[ -x $build/bench/layers_bench ]]; then
    echo "== compare_layers (fp32 NCHW, fp16 NHWC, batch 64)"
    "$python" bench/compare_layers.py --bench "$build/bench/layers_bench" --device cuda \
      --batch 64 --json "$out/layers.json" > "$out/layers.md" 2>> "$out/gpu.txt" || status=1
    tail -n 30 "$out/layers.md"
  fi
  if [[ -x $build/bench/conv_fused_bench ]]; then
    echo "== conv_fused_bench"
    "$build/bench/conv_fused_bench" > "$out/conv_fused.jsonl" 2>> "$out/gpu.txt" || status=1
    tail -n 30 "$out/conv_fused.jsonl"
  fi
fi

if wants matmul && [[ -x $build/bench/matmul_bench ]]; then
  echo "== matmul_bench + compare_matmul (classifier, transformer and attention products; f16, bf16, f32)"
  env -u LD_LIBRARY_PATH "$python" bench/compare_matmul.py --bench "$build/bench/matmul_bench" \
    --device cuda --bench-library-path "${LD_LIBRARY_PATH:-}" --json "$out/matmul.json" > "$out/matmul.md" 2>> "$out/gpu.txt" || status=1
  grep -E "total" "$out/matmul.md"
fi

if wants optim && [[ -x $build/bench/optim_bench ]]; then
  echo "== optim_bench + compare_optim (ResNet-50's 161 tensors: adam, adamw, sgd; f32, bf16 + master)"
  env -u LD_LIBRARY_PATH "$python" bench/compare_optim.py --bench "$build/bench/optim_bench" \
    --device cuda --bench-library-path "${LD_LIBRARY_PATH:-}" --json "$out/optim.json" > "$out/optim.md" 2>> "$out/gpu.txt" || status=1
  cat "$out/optim.md"
fi

if wants rnn && [[ -x $build/bench/rnn_bench ]]; then
  echo "== rnn_bench + compare_rnn (LSTM, GRU: inference and training step; f16, f32)"
  env -u LD_LIBRARY_PATH "$python" bench/compare_rnn.py --bench "$build/bench/rnn_bench" \
    --bench-library-path "${LD_LIBRARY_PATH:-}" --json "$out/rnn.json" > "$out/rnn.md" 2>> "$out/gpu.txt" || status=1
  cat "$out/rnn.md"
fi

if wants train && [[ -x $build/bench/train_bench ]]; then
  echo "== train_bench + train_resnet50_gpu (ResNet-50 training step, fp16 NHWC, batch 64, vs PyTorch)"
  env -u LD_LIBRARY_PATH "$python" bench/train_resnet50_gpu.py --bench "$build/bench/train_bench" --graph \
    --lr "${TRAIN_LR:-0.002}" \
    --bench-library-path "${LD_LIBRARY_PATH:-}" --json "$out/train.json" > "$out/train.md" 2>> "$out/gpu.txt" || status=1
  cat "$out/train.md"
fi

if wants_only shapes; then
  if [[ -x $build/bench/cudnn_conv_bench ]]; then
    echo "== shape suite: ${SHAPES_FILES:-mobilenetv2} (max layers ${SHAPES_MAX_LAYERS:-0}, budget ${SHAPES_BUDGET_S:-300} s)"
    # The benchmark runs with the build's cuDNN (LD_LIBRARY_PATH), PyTorch with its own.
    bench_env=$(mktemp)
    printf '#!/usr/bin/env bash\nLD_LIBRARY_PATH=%q exec %q %s"$@"\n' "${LD_LIBRARY_PATH:-}" \
      "$(cd "$build/bench" && pwd)/cudnn_conv_bench" \
      "${SHAPES_SEARCH_ROWS:+--search-rows $((SHAPES_SEARCH_ROWS)) }" > "$bench_env"
    chmod +x "$bench_env"
    files=${SHAPES_FILES:-mobilenetv2}
    if [[ $files == all ]]; then
      files=$(cd bench/shapes && ls *.txt | grep -vx resnet50.txt | sed 's/\.txt$//' | paste -sd,)
    fi
    suite() {  # suite FILES JSON: compare_gpu.py --suite on FILES, tables on stdout
      env -u LD_LIBRARY_PATH "$python" bench/compare_gpu.py --suite --bench "$bench_env" \
        --files "$1" --max-layers "${SHAPES_MAX_LAYERS:-0}" \
        --budget-s "${SHAPES_BUDGET_S:-300}" --configs "${SHAPES_CONFIGS:-f16_nhwc,f32_nchw}" \
        --tag "${SHAPES_TAG:-all}" --rounds "${SHAPES_ROUNDS:-1}" \
        ${SHAPES_REUSE:+--reuse-choices} ${SHAPES_TORCH_KERNELS:+--torch-kernels} \
        ${SHAPES_AGAINST_ITSELF:+--against-itself} --json "$2"
    }
    IFS=, read -r -a devices <<< "${SHAPES_DEVICES:-}"
    if ((${#devices[@]} <= 1)); then
      (if ((${#devices[@]} == 1)); then export CUDA_VISIBLE_DEVICES=${devices[0]}; fi
       suite "$files" "$out/shapes.json") > "$out/shapes.md" 2>> "$out/gpu.txt" || status=1
    else
      # Note [suite shards]: file i goes to device i mod N.
      IFS=, read -r -a names <<< "$files"
      declare -A shard
      for i in "${!names[@]}"; do
        device=${devices[i % ${#devices[@]}]}
        shard[$device]=${shard[$device]:+${shard[$device]},}${names[i]}
      done
      pids=() jsons=()
      for device in "${devices[@]}"; do
        [[ -n ${shard[$device]:-} ]] || continue
        echo "== shard on GPU $device: ${shard[$device]}"
        CUDA_VISIBLE_DEVICES=$device suite "${shard[$device]}" "$out/shapes-gpu$device.json" \
          > "$out/shapes-gpu$device.md" 2>> "$out/gpu.txt" &
        pids+=($!) jsons+=("$out/shapes-gpu$device.json")
      done
      for pid in "${pids[@]}"; do wait "$pid" || status=1; done
      cat "$out"/shapes-gpu*.md > "$out/shapes.md"
      env -u LD_LIBRARY_PATH "$python" bench/compare_gpu.py --merge "$(IFS=,; echo "${jsons[*]}")" \
        --json "$out/shapes.json" >> "$out/shapes.md" 2>> "$out/gpu.txt" || status=1
    fi
    rm -f "$bench_env"
    if [[ -n ${SHAPES_RECHECK:-} && -s $out/shapes.json ]]; then
      # Note [rows above 1.00 in one process] in bench/compare_gpu.py: the rows above 1.00
      # timed again with PyTorch in one process, through the Python module built against BUILD.
      echo "== the rows above 1.00 in one process (recheck.md / recheck.json)"
      recheck_work=${GPU_PYTHON_WORK:-${TMPDIR:-/tmp}/dnnx-gpu-python}
      if GPU_PYTHON_WORK=$recheck_work GPU_PYTHON_BUILD_ONLY=1 GPU_PYTHON_TORCH_EXT=OFF \
           PYTHON=$python bash "$(dirname "$0")/gpu_python.sh" "$build/src" "$out/module" \
           >> "$out/gpu.txt" 2>&1; then
        PYTHONPATH=$recheck_work/stage "$python" bench/interleaved_rows.py \
          --from-suite "$out/shapes.json" --kernels --json "$out/recheck.json" \
          > "$out/recheck.md" 2>> "$out/gpu.txt" || status=1
        if [[ -s $out/recheck.json ]]; then
          env -u LD_LIBRARY_PATH "$python" bench/compare_gpu.py --merge "$out/shapes.json" \
            --interleaved "$out/recheck.json" >> "$out/shapes.md" 2>> "$out/gpu.txt" || status=1
        fi
      else
        echo "gpu_run.sh: the Python module did not build ($out/module/pytest.log)" >&2
        status=1
      fi
    fi
    # The last suite summary (with shards, the merged one; with SHAPES_RECHECK, the rows above
    # 1.00 in one process).
    awk '/^## Suite summary/ { text = "" } { text = text $0 "\n" } END { printf "%s", text }' \
      "$out/shapes.md"
  else
    echo "gpu_run.sh: shapes needs $build/bench/cudnn_conv_bench" >&2
    status=1
  fi
fi

if wants python; then
  echo "== python/tests with $python (module built against $build/src/libdnnx)"
  GPU_PYTHON_WORK=${GPU_PYTHON_WORK:-${TMPDIR:-/tmp}/dnnx-gpu-python} PYTHON=$python \
    bash "$(dirname "$0")/gpu_python.sh" "$build/src" "$out" || status=1
fi

if wants resnet50; then
  echo "== bench/torch_resnet50.py (converted torchvision ResNet-50 training steps vs PyTorch)"
  stage=${GPU_PYTHON_WORK:-${TMPDIR:-/tmp}/dnnx-gpu-python}/stage
  if [[ ! -d $stage/dnnx ]]; then
    echo "gpu_run.sh: resnet50 needs the package the python part builds ($stage)" >&2
    status=1
  else
    PYTHONPATH=$stage "$python" bench/torch_resnet50.py --graphed --json "$out/torch_resnet50.json" \
      > "$out/torch_resnet50.md" 2>> "$out/gpu.txt" || status=1
    cat "$out/torch_resnet50.md"
    : > "$out/torch_layers.md"
    for options in "" "--dtype f16 --channels-last"; do
      # shellcheck disable=SC2086  # the options are words
      PYTHONPATH=$stage "$python" bench/torch_layer_overhead.py --device cuda $options \
        >> "$out/torch_layers.md" 2>> "$out/gpu.txt" || status=1
    done
    cat "$out/torch_layers.md"
  fi
fi
exit $status
