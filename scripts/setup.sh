#!/usr/bin/env bash
# Installs what dnnx needs on Debian 12, then configures (Release, Ninja) and builds it, and
# installs the Python package (python/) into the project venv, linked against that build.
#
#   bash scripts/setup.sh [--build-dir DIR] [--deps-only] [-DNAME=VALUE ...]
#
# Debian packages come from apt (skipped when already installed, so re-runs are fast); oneDNN 3.x
# comes from PyPI's onednn-cpu-gomp wheels, installed into the project venv .venv (see README.md,
# "Dependencies", for why not Debian's libdnnl-dev or PyPI's `onednn`). Extra -D arguments go to
# the CMake configure step. Safe to run again at any time. The venv gets, besides oneDNN, the
# pinned tools of python/requirements.txt (nanobind, scikit-build-core, pytest) and a .pth that
# makes Debian's PyTorch and NumPy importable; all of it is added next to what is there.
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
  zlib1g-dev                   # gzip-compressed IDX files (src/data)
  dataset-fashion-mnist        # Fashion-MNIST, /usr/share/datasets/fashion-mnist (dnnx train)
  python3-venv python3-dev     # the project venv; Python's headers for the dnnx module
  python3-torch python3-numpy  # the PyTorch oracle of the parity tests and the CPU benchmark
  libtorch-dev pybind11-dev    # PyTorch's C++ headers, for dnnx._torch_ext (dnnx.torch's layers)
  clang libclang-rt-14-dev     # libFuzzer, for the tune-cache loader's fuzz test
  chromium                     # headless, for the test that renders `dnnx tune --report`'s page
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

# --- the Python package's tools, and Debian's PyTorch and NumPy in the venv ----------------------
# nanobind and scikit-build-core build python/ without build isolation, so the pinned versions in
# requirements.txt are the ones that build it; pip finds them installed on re-runs (no download).
log "Python tools (python/requirements.txt) in $venv"
"$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$root/python/requirements.txt"
# Debian's torch and numpy live in /usr/lib/python3/dist-packages, outside the venv. A .pth file
# appends that folder to the venv's sys.path (after the venv's own packages, which keep priority):
# unlike re-creating the venv with --system-site-packages, it works for an existing venv and
# changes nothing else in it.
debian_site=/usr/lib/python3/dist-packages
debian_pth=$site/dnnx-debian-dist-packages.pth
venv_version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
debian_version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
                 2>/dev/null || true)
if [[ $venv_version != "$debian_version" ]]; then
  log "not adding $debian_site to $venv: its Python is $venv_version," \
      "Debian's ${debian_version:-missing} (the PyTorch tests will skip)"
elif [[ $(cat "$debian_pth" 2>/dev/null) != "$debian_site" ]]; then
  log "making Debian's PyTorch and NumPy visible in $venv ($debian_pth)"
  echo "$debian_site" >"$debian_pth"
fi

((deps_only)) && { log "dependencies ready"; exit 0; }

# --- configure and build -----------------------------------------------------------------------
jobs=$(nproc 2>/dev/null || echo 2)
log "configuring $build_dir (Release, Ninja)"
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
log "building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"
log "built: $build_dir"

# --- the Python package ------------------------------------------------------------------------
# scikit-build-core builds the module in $build_dir/python (kept, so re-runs rebuild only what
# changed) against the libdnnx just built (its CMake package in $build_dir): the library is not
# compiled a second time.
# A sanitizer build's libdnnx cannot be loaded by a plain Python (the sanitizer runtime must come
# first), so the package is built only against uninstrumented builds.
if grep -q '^DNNX_SANITIZE:[A-Z]*=.' "$build_dir/CMakeCache.txt"; then
  log "Python package: not installed from a sanitizer build ($build_dir)"
else
  log "installing the Python package dnnx into $venv (module built in $build_dir/python)"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps \
    --no-index --config-settings=cmake.define.dnnx_DIR="$build_dir" \
    --config-settings=build-dir="$build_dir/python" "$root/python"
  "$venv/bin/python" -c 'import dnnx' || { echo "setup.sh: import dnnx failed in $venv" >&2; exit 1; }
  log "installed: $venv/bin/python -c 'import dnnx'"
fi
