#!/usr/bin/env bash
# Builds the Python module against a libdnnx with the cudnn backend that was built elsewhere, and runs
# the Python tests with a CUDA build of PyTorch (the GPU machine's): the half of python/tests that
# Debian's CPU PyTorch skips (test_cuda.py) and, with it, the rest of the suite on the same torch.
#
#   bash scripts/gpu_python.sh LIBDIR OUT [PYLIB]
#
# LIBDIR holds libdnnx.so.0.1.0 (e.g. the folder that scripts/gpu_run.sh's BUILD/src is); PYTHON
# (default python3) is the interpreter with torch and nanobind; PYLIB, when given, is put on
# PYTHONPATH first (a folder holding pytest and its pure-Python dependencies, for an interpreter that
# lacks them). OUT receives pytest.log and pytest.xml. The module is compiled with the interpreter's
# own nanobind and a CMake package written here for LIBDIR (the build tree's exported one names the
# paths of the machine it was made on).
set -uo pipefail
libdir=$(cd "${1:?usage: gpu_python.sh LIBDIR OUT [PYLIB]}" && pwd)
out=${2:?usage: gpu_python.sh LIBDIR OUT [PYLIB]}
pylib=${3:-}
python=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
# GPU_PYTHON_WORK keeps the built package (in GPU_PYTHON_WORK/stage) for a later command;
# GPU_PYTHON_BUILD_ONLY=1 stops there; GPU_PYTHON_TORCH_EXT sets DNNX_TORCH_EXT (AUTO by default).
if [[ -n ${GPU_PYTHON_WORK:-} ]]; then
  work=$GPU_PYTHON_WORK
  mkdir -p "$work" && rm -rf "$work/stage" "$work/site"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

if [[ ! -f $libdir/libdnnx.so.0.1.0 ]]; then
  echo "gpu_python.sh: no libdnnx.so.0.1.0 in $libdir" >&2
  exit 2
fi
ln -sf libdnnx.so.0.1.0 "$libdir/libdnnx.so.0"

mkdir -p "$work/pkg"
cat > "$work/pkg/dnnxConfig.cmake" <<EOF
add_library(dnnx::dnnx SHARED IMPORTED)
set_target_properties(dnnx::dnnx PROPERTIES
  IMPORTED_LOCATION "$libdir/libdnnx.so.0.1.0"
  IMPORTED_SONAME "libdnnx.so.0"
  INTERFACE_INCLUDE_DIRECTORIES "$root/include"
  INTERFACE_COMPILE_FEATURES cxx_std_20)
EOF
cat > "$work/pkg/dnnxConfigVersion.cmake" <<'EOF'
set(PACKAGE_VERSION 0.1.0)
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF

# The system compiler, whose libstdc++ is the shared one libdnnx uses: a toolchain that links its
# own libstdc++ statically into the module would give the process two C++ runtimes.
cxx=${GPU_PYTHON_CXX:-}
[[ -z $cxx && -x /usr/bin/g++ ]] && cxx=/usr/bin/g++
echo "== building the Python module with $python${cxx:+ and $cxx}"
if ! cmake -S "$root/python" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DPython_EXECUTABLE="$(command -v "$python")" -Ddnnx_DIR="$work/pkg" \
       ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} \
       ${GPU_PYTHON_TORCH_EXT:+-DDNNX_TORCH_EXT="$GPU_PYTHON_TORCH_EXT"} > "$out/pytest.log" 2>&1 ||
   ! cmake --build "$work/build" >> "$out/pytest.log" 2>&1; then
  echo "gpu_python.sh: the module did not build (see $out/pytest.log)" >&2
  tail -40 "$out/pytest.log" >&2
  exit 1
fi

# The package as an install would lay it out: the Python layer and the module side by side.
cp -r "$root/python/dnnx" "$work/site"
cp "$work"/build/_dnnx*.so "$work/site/"
# dnnx._torch_ext, where the build found PyTorch's headers (python/CMakeLists.txt).
cp "$work"/build/_torch_ext*.so "$work"/build/_torch_ext_info.py "$work/site/" 2>/dev/null || true
grep -o 'dnnx._torch_ext: .*' "$out/pytest.log" | head -1
mkdir -p "$work/stage" && mv "$work/site" "$work/stage/dnnx"

[[ -n ${GPU_PYTHON_BUILD_ONLY:-} ]] && exit 0
echo "== pytest python/tests"
export DNNX_CACHE=off
PYTHONPATH="$work/stage${pylib:+:$pylib}" "$python" -m pytest -p no:cacheprovider -ra \
  -c "$root/python/pyproject.toml" --rootdir "$root/python" --junitxml="$out/pytest.xml" \
  "$root/python/tests" >> "$out/pytest.log" 2>&1
status=$?
tail -30 "$out/pytest.log"
exit $status
