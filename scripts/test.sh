#!/usr/bin/env bash
# Installs, builds (scripts/setup.sh) and runs every test through ctest, in stages:
#   release     BUILD_DIR (Release): every test, or the CTEST_ARGS given after --
#   python      pytest python/tests with the project venv's Python, on the dnnx package that
#               setup.sh installed there (built against BUILD_DIR's libdnnx)
#   avx2        BUILD_DIR again: the `unit` and `parity` tests under ONEDNN_MAX_CPU_ISA=AVX2, so
#               that what oneDNN lists on a CPU without AVX-512 is tested on every machine
#               (skipped, and said so, where oneDNN runs at AVX2 or below anyway)
#   sanitizers  BUILD_DIR-asan (Debug, ASan + UBSan + LSan): the `unit` and `cli` tests
#
#   bash scripts/test.sh [--build-dir DIR] [--no-python] [--no-avx2] [--no-sanitizers]
#                        [-DNAME=VALUE ...] [-- CTEST_ARGS ...]
#
# Tests labelled `gpu` skip themselves on a machine without a usable GPU. Every stage runs even if
# an earlier one failed. The end repeats each stage's result, then prints the summary of all of
# them in ctest's words as the last line ("N% tests passed, N tests failed out of N"); the exit
# status is non-zero if any stage failed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DNNX_BUILD_DIR:-$root/build}
sanitizers=1
avx2=1
python_tests=1
setup_args=()
ctest_args=()
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --no-sanitizers) sanitizers=0; shift ;;
    --no-avx2) avx2=0; shift ;;
    --no-python) python_tests=0; shift ;;
    -D*) setup_args+=("$1"); shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (accepted: --build-dir DIR, --no-python, --no-avx2," \
            "--no-sanitizers, -DNAME=VALUE, -- CTEST_ARGS)" >&2
       exit 2 ;;
  esac
done
build_dir=$(mkdir -p "$build_dir" && cd "$build_dir" && pwd)
asan_dir=$build_dir-asan
build_jobs=$(nproc 2>/dev/null || echo 2)
ctest_jobs=2
log() { printf '[test] %s\n' "$*"; }

bash "$root/scripts/setup.sh" --build-dir "$build_dir" "${setup_args[@]}"

# The tests set the DNNX_* variables they exercise; a value left in the caller's shell (say
# DNNX_BACKEND=reference) would silently change what the other tests check.
while IFS= read -r name; do
  log "unsetting $name for the test run"
  unset "$name"
done < <(compgen -e | grep '^DNNX_' || true)

# The choice cache's file (default ~/.cache/dnnx) would carry choices between runs and from the
# user's own work into the tests: each run starts from an empty one of its own.
export XDG_CACHE_HOME=$build_dir/test-cache
rm -rf "$XDG_CACHE_HOME"
mkdir -p "$XDG_CACHE_HOME"
# Tests run in parallel processes; a shared file would let one test's choices answer another's
# selections. The persistence tests name their own files and modes.
export DNNX_CACHE=off

# ---- stage bookkeeping ------------------------------------------------------------------------
stage_lines=()    # one line per finished stage, repeated at the end
stage_failed=0    # stages that failed
tests_total=0     # over every stage's ctest summary
tests_failed=0

# finish_stage NAME STATUS SECONDS SUMMARY: records a stage's outcome.
finish_stage() {
  local name=$1 status=$2 seconds=$3 summary=$4
  local verdict=passed
  if ((status != 0)); then
    verdict="FAILED (exit status $status)"
    stage_failed=$((stage_failed + 1))
  fi
  stage_lines+=("$(printf '%-11s %s in %dm%02ds: %s' "$name" "$verdict" $((seconds / 60)) \
                   $((seconds % 60)) "$summary")")
  if [[ $summary =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    tests_failed=$((tests_failed + BASH_REMATCH[1]))
    tests_total=$((tests_total + BASH_REMATCH[2]))
  fi
}

# run_ctest LOG ARGS...: ctest with the suite's common arguments, its output also in LOG. Returns
# ctest's exit status.
run_ctest() {
  local log_file=$1
  shift
  local status=0
  ctest --output-on-failure -j "$ctest_jobs" --timeout 900 "$@" 2>&1 | tee "$log_file" ||
    status=${PIPESTATUS[0]}
  return "$status"
}

# ctest's summary line in LOG ("N% tests passed, ..."), or why there is none.
ctest_summary() {
  local summary
  summary=$(grep -E '^[0-9]+% tests passed' "$1" | tail -n 1 || true)
  echo "${summary:-ctest printed no summary (log: $1)}"
}

# ---- stage: release ---------------------------------------------------------------------------
stage_release() {
  local start=$SECONDS status=0
  log "stage release: ctest -j$ctest_jobs in $build_dir (log: $build_dir/ctest.log)"
  run_ctest "$build_dir/ctest.log" --test-dir "$build_dir" "${ctest_args[@]}" || status=$?
  finish_stage release "$status" $((SECONDS - start)) "$(ctest_summary "$build_dir/ctest.log")"
}

# ---- stage: python ----------------------------------------------------------------------------
# The Python package's tests (python/tests) under pytest, pinned in python/requirements.txt and
# installed into the venv by setup.sh, as is the package itself. pytest runs from the build
# folder, so `import dnnx` is the installed package, not python/dnnx of the source tree. Its
# counts go into the summary in ctest's words; skipped tests count as passed, as ctest counts them.
venv_python=$root/.venv/bin/python

# pytest's counts in JUNIT_XML as a ctest summary line, or why there are none.
pytest_summary() {
  python3 - "$1" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as error:
    print(f"pytest wrote no report ({error})")
    sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
count = lambda name: sum(int(suite.get(name, 0)) for suite in suites)
total, failed, skipped = count("tests"), count("failures") + count("errors"), count("skipped")
percent = (total - failed) * 100 // total if total else 100
print(f"{percent}% tests passed, {failed} tests failed out of {total} ({skipped} skipped)")
PY
}

stage_python() {
  local start=$SECONDS status=0 report=$build_dir/pytest.xml
  log "stage python: pytest $root/python/tests with $venv_python (log: $build_dir/pytest.log)"
  rm -f "$report"
  (cd "$build_dir" && "$venv_python" -m pytest -p no:cacheprovider -ra \
     -c "$root/python/pyproject.toml" --rootdir "$root/python" --junitxml="$report" \
     "$root/python/tests") 2>&1 | tee "$build_dir/pytest.log" || status=${PIPESTATUS[0]}
  finish_stage python "$status" $((SECONDS - start)) "$(pytest_summary "$report")"
}

# ---- stage: avx2 ------------------------------------------------------------------------------
# Which candidates oneDNN offers depends on the CPU (f16/bf16 kernels need AVX-512 variants; on
# AVX2 the cpu backend's f16/bf16 candidates are its f32-compute ones, docs/algorithms.md). The
# tests derive their expectations from the listing, and this stage makes every CI machine prove it
# on AVX2: oneDNN is capped by ONEDNN_MAX_CPU_ISA, which only ever lowers the ISA. Where oneDNN
# already runs at AVX2 or below, the release stage was that run.
isa_labels='^(unit|parity)$'

stage_avx2() {
  local start=$SECONDS cli=$build_dir/tools/dnnx/dnnx isa
  isa=$("$cli" version 2>/dev/null | sed -n 's/.*(cpu isa \([a-z0-9_]*\),.*/\1/p' || true)
  if [[ -z $isa ]]; then
    log "stage avx2: skipped (no cpu backend in $build_dir: $cli version names no cpu isa)"
    return
  fi
  case $isa in
    sse41 | avx | avx2)
      log "stage avx2: skipped (oneDNN runs at $isa here: the release stage tested it)"
      finish_stage avx2 0 0 "covered by the release stage (oneDNN cpu isa $isa)"
      return ;;
  esac
  log "stage avx2: ctest -L '$isa_labels' -j$ctest_jobs in $build_dir under ONEDNN_MAX_CPU_ISA=AVX2 (native: $isa; log: $build_dir/ctest-avx2.log)"
  local status=0
  ONEDNN_MAX_CPU_ISA=AVX2 run_ctest "$build_dir/ctest-avx2.log" --test-dir "$build_dir" \
    -L "$isa_labels" || status=$?
  finish_stage avx2 "$status" $((SECONDS - start)) "$(ctest_summary "$build_dir/ctest-avx2.log")"
}

# ---- stage: sanitizers ------------------------------------------------------------------------
# The `unit` and `cli` tests again, in a Debug build with AddressSanitizer (LeakSanitizer
# included) and UndefinedBehaviorSanitizer compiled into dnnx's own code (DNNX_SANITIZE,
# cmake/DnnxSanitize.cmake), with the options of tests/sanitizers/env.sh. Only the executables
# those tests run are built: they are read from the release build's test list, so a new test
# binary is covered without being named here. Not run here, and why:
#   parity, oracle  minutes of oneDNN candidates and PyTorch comparisons; under ASan at -O0 they
#                   would take several times that, beyond CI's time (2 cores, under 25 min in all)
#   install, fuzz   the install test builds examples/ against an install tree; the fuzz target is
#                   a clang ASan + UBSan build of its own already
#   gpu             the cudnn backend is not built (nvcc code cannot be instrumented)
# -g1 (line tables) instead of -g keeps file:line in reports at a smaller build cost and size.
sanitizer_labels='^(unit|cli)$'

# The executables the release build's `unit` and `cli` tests run, relative to its folder: test
# binaries and what a test's arguments name (the CLI tests pass -DCLI=<path>).
unit_cli_executables() {
  ctest --test-dir "$build_dir" -N -L "$sanitizer_labels" --show-only=json-v1 |
    python3 -c '
import json, os, sys
build = os.path.realpath(sys.argv[1])
found = set()
for test in json.load(sys.stdin).get("tests", []):
    for arg in test.get("command", []):
        for path in (arg, arg.partition("=")[2]):
            path = os.path.realpath(path) if path else ""
            if path.startswith(build + os.sep) and os.path.isfile(path) and os.access(path, os.X_OK):
                found.add(os.path.relpath(path, build))
print("\n".join(sorted(found)))' "$build_dir"
}

# Tests labelled unit or cli that ctest lists in a build folder.
count_unit_cli_tests() {
  ctest --test-dir "$1" -N -L "$sanitizer_labels" | sed -n 's/^Total Tests: \([0-9]*\)$/\1/p' ||
    true
}

# fail_sanitizers START WHY: records the sanitizer stage as failed before its tests ran.
fail_sanitizers() {
  echo "test.sh: sanitizer stage: $2" >&2
  finish_stage sanitizers 1 $((SECONDS - $1)) "$2"
}

stage_sanitizers() {
  local start=$SECONDS
  # shellcheck source=SCRIPTDIR/../tests/sanitizers/env.sh
  . "$root/tests/sanitizers/env.sh"
  local targets=()
  mapfile -t targets < <(unit_cli_executables)
  if ((${#targets[@]} == 0)); then
    fail_sanitizers "$start" "the release build lists no unit or cli test to rebuild"
    return
  fi
  log "stage sanitizers: configuring $asan_dir (Debug, DNNX_SANITIZE=address,undefined)"
  if ! cmake -S "$root" -B "$asan_dir" -G Ninja "${setup_args[@]}" -DCMAKE_BUILD_TYPE=Debug \
         -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DDNNX_SANITIZE=address,undefined -DDNNX_WITH_CUDNN=OFF \
         -DDNNX_BUILD_BENCH=OFF; then
    fail_sanitizers "$start" "configuring $asan_dir failed"
    return
  fi
  log "stage sanitizers: building ${#targets[@]} executables with $build_jobs jobs"
  local build_args=() target
  for target in "${targets[@]}"; do build_args+=(--target "$target"); done
  if ! cmake --build "$asan_dir" -j "$build_jobs" "${build_args[@]}"; then
    fail_sanitizers "$start" "building in $asan_dir failed"
    return
  fi
  # A binary whose test discovery failed would leave its tests out silently.
  local expected listed
  expected=$(count_unit_cli_tests "$build_dir")
  listed=$(count_unit_cli_tests "$asan_dir")
  if [[ $expected != "$listed" ]]; then
    fail_sanitizers "$start" \
      "$asan_dir lists ${listed:-no} unit and cli tests where $build_dir lists ${expected:-none}"
    return
  fi
  log "stage sanitizers: ctest -L '$sanitizer_labels' -j$ctest_jobs in $asan_dir (log: $asan_dir/ctest.log)"
  local status=0
  run_ctest "$asan_dir/ctest.log" --test-dir "$asan_dir" -L "$sanitizer_labels" || status=$?
  finish_stage sanitizers "$status" $((SECONDS - start)) "$(ctest_summary "$asan_dir/ctest.log")"
}

stage_release
if ((python_tests)); then
  stage_python
else
  log "stage python: skipped (--no-python)"
fi
if ((avx2)); then
  stage_avx2
else
  log "stage avx2: skipped (--no-avx2)"
fi
if ((sanitizers)); then
  stage_sanitizers
else
  log "stage sanitizers: skipped (--no-sanitizers)"
fi

# ---- summary ----------------------------------------------------------------------------------
echo
echo "[test] stages:"
for line in "${stage_lines[@]}"; do echo "  $line"; done
echo
percent=100
if ((tests_total > 0)); then
  percent=$(((tests_total - tests_failed) * 100 / tests_total))
fi
summary="$percent% tests passed, $tests_failed tests failed out of $tests_total"
((stage_failed == 0)) || summary+=" ($stage_failed of ${#stage_lines[@]} stages failed)"
echo "$summary"
((stage_failed == 0))
