#!/usr/bin/env bash
# Style checks with the repository's .clang-format and .clang-tidy (Debian: clang-format clang-tidy).
#
#   bash scripts/lint.sh format          # names the files clang-format would change; exit 1 if any
#   bash scripts/lint.sh format --fix    # reformats them in place
#   bash scripts/lint.sh tidy [BUILD_DIR] [REGEX]
#                                        # clang-tidy over the sources in BUILD_DIR's
#                                        # compile_commands.json (default build/), optionally only
#                                        # the files matching REGEX
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

need() {
  command -v "$1" >/dev/null || { echo "lint.sh: $1 not found (apt-get install ${2:-$1})" >&2; exit 1; }
}

case ${1:-} in
  format)
    need clang-format
    mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
      '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh' | grep -v '^\.venv/')
    if [[ ${2:-} == --fix ]]; then
      clang-format -i "${files[@]}"
      echo "reformatted ${#files[@]} files"
      exit 0
    fi
    changed=0
    for file in "${files[@]}"; do
      if ! clang-format --dry-run --Werror "$file" 2>/dev/null; then
        echo "needs formatting: $file"
        changed=$((changed + 1))
      fi
    done
    echo "$changed of ${#files[@]} files need formatting"
    ((changed == 0))
    ;;
  tidy)
    need run-clang-tidy clang-tidy
    build_dir=${2:-$root/build}
    [[ -f $build_dir/compile_commands.json ]] ||
      { echo "lint.sh: no $build_dir/compile_commands.json; configure first (bash scripts/setup.sh)" >&2; exit 1; }
    run-clang-tidy -p "$build_dir" -j "$(nproc)" -quiet "${3:-$root/(src|tools|tests|bench)/}"
    ;;
  *)
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    [[ ${1:-} == -h || ${1:-} == --help ]]
    ;;
esac
