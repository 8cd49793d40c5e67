#!/usr/bin/env bash
# ASan + UBSan run of the Python test suite (and, with --cpp, the C++ units):
# the extension module is built with the sanitizers into build/asan and
# imported from a private root; the sanitizer runtime is preloaded because the
# Python interpreter itself is not instrumented. Generated kernels are compiled
# as usual (they are checked by the compiled-vs-eager tests, not here).
#
#   scripts/sanitize.sh [--cpp] [pytest args...]     (default: the whole suite)
#
# Findings go to build/asan/logs/; the script fails if any report was written.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
run_cpp=0
if [ "${1:-}" = "--cpp" ]; then run_cpp=1; shift; fi
B=build/asan
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize=vptr"
CXX=${CXX:-g++}
export CCACHE_BASEDIR="$ROOT"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTP_BUILD_PYTHON=ON -DTP_BUILD_TESTS=$([ $run_cpp = 1 ] && echo ON || echo OFF) \
  -DPython_EXECUTABLE="$(command -v python3 || command -v python)" \
  -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_MODULE_LINKER_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >/dev/null
cmake --build $B
rm -rf $B/logs && mkdir -p $B/logs
# Private import root: the package's Python files plus the sanitized _C.
PKG=$B/pkg/tensorplay
rm -rf $B/pkg && mkdir -p $PKG
for f in python/tensorplay/*; do
  case "$(basename "$f")" in _C*.so|__pycache__) continue ;; esac
  ln -s "$ROOT/$f" "$PKG/$(basename "$f")"
done
ln -s "$ROOT/$(ls $B/_C*.so | head -1)" "$PKG/"
export ASAN_OPTIONS="detect_leaks=0:log_path=$ROOT/$B/logs/asan:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:log_path=$ROOT/$B/logs/ubsan"
export TP_CACHE_DIR="$ROOT/$B/cache"
if [ $run_cpp = 1 ]; then (cd $B && ctest -j"$(nproc)" --output-on-failure) || true; fi
PRELOAD="$($CXX -print-file-name=libasan.so):$($CXX -print-file-name=libubsan.so)"
rc=0
(cd tests && LD_PRELOAD="$PRELOAD" PYTHONPATH="$ROOT/$B/pkg" python3 -m pytest -q -p no:cacheprovider "${@:-python}") || rc=$?
if ls $B/logs/* >/dev/null 2>&1; then
  echo "sanitizer reports:"; for f in $B/logs/*; do echo "== $f"; head -40 "$f"; done
  exit 1
fi
echo "sanitizers: no reports (pytest rc=$rc)"
exit $rc
