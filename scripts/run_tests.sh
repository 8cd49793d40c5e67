#!/usr/bin/env bash
# The test command of the README: C++ unit tests (GoogleTest under ctest) and
# the Python API tests (pytest). Installs what is missing on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CCACHE_BASEDIR="$ROOT"

need_apt=()
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
[ -f /usr/include/openssl/sha.h ] || need_apt+=(libssl-dev)
command -v g++ >/dev/null || need_apt+=(g++)
command -v ninja >/dev/null || pip install -q ninja
command -v cmake >/dev/null || pip install -q cmake
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} (apt-get)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Python package, always built from this checkout (an installed copy from
# elsewhere must never be what gets tested). ccache keeps rebuilds short.
python -m pip install -q ".[test]" --config-settings=cmake.define.TP_WERROR=ON
# PyTorch (CPU) is the second oracle of many operator tests; they skip without it.
python -c "import torch" 2>/dev/null || python -m pip install -q torch==2.13.0 \
  || echo "note: torch==2.13.0 could not be installed; PyTorch-oracle tests will be skipped"
# torch's OpInfo database (the oracle of tests/python/opinfo) imports expecttest.
python -c "import expecttest" 2>/dev/null || python -m pip install -q expecttest \
  || echo "note: expecttest could not be installed; the OpInfo tests will be skipped"
# NVRTC from NVIDIA's wheel compiles the generated CUDA kernels' source without a GPU, so the
# CUDA printer is checked on CPU machines too (tests/python/test_cuda.py).
python -m pip show -q nvidia-cuda-nvrtc >/dev/null 2>&1 || python -m pip install -q "nvidia-cuda-nvrtc" \
  || echo "note: nvidia-cuda-nvrtc could not be installed; CUDA source compilation tests will be skipped"

echo "== C++ unit tests (ctest) =="
cmake -S . -B build/tests -G Ninja -DTP_BUILD_PYTHON=OFF -DTP_BUILD_TESTS=ON -DTP_WERROR=ON -DPython_EXECUTABLE="$(command -v python)" >/dev/null
cmake --build build/tests
cpp_rc=0
(cd build/tests && ctest --output-on-failure -j2) || cpp_rc=$?

echo "== Python tests (pytest) =="
py_rc=0
# Run from outside the source tree so the installed package is what gets imported.
(cd tests && python -m pytest -q -p no:cacheprovider python) || py_rc=$?

if [ $cpp_rc -ne 0 ] || [ $py_rc -ne 0 ]; then
  echo "tests failed: ctest rc=$cpp_rc pytest rc=$py_rc"
  exit 1
fi
