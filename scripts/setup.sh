#!/usr/bin/env bash
# Installs what dnnx needs on Debian 12, then configures (Release, Ninja) and builds it.
#
#   bash scripts/setup.sh [--build-dir DIR] [--deps-only] [-DNAME=VALUE ...]
#
# Debian packages come from apt (skipped when already installed, so re-runs are fast); oneDNN 3.x
# comes from PyPI's onednn-cpu-gomp wheels, installed into the project venv .venv (see README.md,
# "Dependencies", for why not Debian's libdnnl-dev or PyPI's `onednn`). Extra -D arguments go to
# the CMake configure step. Safe to run again at any time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DNNX_BUILD_DIR:-$root/build}
deps_only=0
cmake_args=()
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --deps-only) deps_only=1; shift ;;
    -D*) cmake_args+=("$1"); shift ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (accepted: --build-dir DIR, --deps-only, -DNAME=VALUE)" >&2
       exit 2 ;;
  esac
done

log() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------------------
apt_packages=(
  build-essential cmake ninja-build git
  nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
  python3-venv
  python3-torch python3-numpy  # the PyTorch oracle of the parity tests and the CPU benchmark
  clang libclang-rt-14-dev     # libFuzzer, for the tune-cache loader's fuzz test
)
missing=()
for package in "${apt_packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$package" 2>/dev/null || true)
  [[ $status == ii* ]] || missing+=("$package")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "Debian packages: all present"
fi

# --- oneDNN 3.x (CPU, OpenMP) from PyPI into the project venv --------------------------------
venv=$root/.venv
onednn_version=2023.2.0  # the wheels' version; the library inside is oneDNN 3.2.0
onednn_wheels=("onednn-cpu-gomp==$onednn_version" "onednn-devel-cpu-gomp==$onednn_version")
if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  # Debian's interpreter: python3-venv is installed above for it (a PATH python3 may lack venv).
  python=/usr/bin/python3
  [[ -x $python ]] || python=python3
  log "creating the venv $venv with $python"
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ -d $site/onednn_cpu_gomp-$onednn_version.dist-info && -d $site/onednn_devel_cpu_gomp-$onednn_version.dist-info \
      && -f $venv/lib/cmake/dnnl/dnnl-config.cmake ]]; then
  log "oneDNN wheels: present in $venv"
else
  log "installing ${onednn_wheels[*]} into $venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q "${onednn_wheels[@]}"
fi

((deps_only)) && { log "dependencies ready"; exit 0; }

# --- configure and build -----------------------------------------------------------------------
jobs=$(nproc 2>/dev/null || echo 2)
log "configuring $build_dir (Release, Ninja)"
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
log "building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"
log "built: $build_dir"
