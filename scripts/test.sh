#!/usr/bin/env bash
# Installs, builds (scripts/setup.sh) and runs every test through ctest.
#
#   bash scripts/test.sh [--build-dir DIR] [-DNAME=VALUE ...] [-- CTEST_ARGS ...]
#
# Tests labelled `gpu` skip themselves on a machine without a usable GPU. The last line printed is
# ctest's summary ("N% tests passed, N tests failed out of N"); the exit status is ctest's.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DNNX_BUILD_DIR:-$root/build}
setup_args=()
ctest_args=()
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    -D*) setup_args+=("$1"); shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (accepted: --build-dir DIR, -DNAME=VALUE, -- CTEST_ARGS)" >&2
       exit 2 ;;
  esac
done

bash "$root/scripts/setup.sh" --build-dir "$build_dir" "${setup_args[@]}"

# The tests set the DNNX_* variables they exercise; a value left in the caller's shell (say
# DNNX_BACKEND=reference) would silently change what the other tests check.
while IFS= read -r name; do
  echo "[test] unsetting $name for the test run"
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

jobs=2
log=$build_dir/ctest.log
echo "[test] ctest -j$jobs in $build_dir (log: $log)"
set +e
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 900 "${ctest_args[@]}" 2>&1 |
  tee "$log"
status=${PIPESTATUS[0]}
set -e
# Repeat the summary last: ctest prints the failed tests' list after it, and CI reads the last line.
summary=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)
echo
echo "${summary:-ctest printed no summary (exit status $status)}"
exit "$status"
