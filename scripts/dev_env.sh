#!/usr/bin/env bash
# Makes a private import root for one developer build directory, so that
# several people (or helpers) can build and test side by side without
# overwriting each other's extension module:
#   scripts/dev_env.sh NAME   -> /tmp/tp_NAME/tensorplay (symlinks to the
#   sources in python/tensorplay, _C from build/NAME)
# then: PYTHONPATH=/tmp/tp_NAME TP_CACHE_DIR=/tmp/tp_NAME/cache python ...
# Re-run it after adding a top-level file to python/tensorplay.
set -euo pipefail
name=${1:?usage: scripts/dev_env.sh NAME}
root=$(cd "$(dirname "$0")/.." && pwd)
dst=/tmp/tp_$name/tensorplay
mkdir -p "$dst" /tmp/tp_$name/cache
for f in "$root"/python/tensorplay/*; do
  base=$(basename "$f")
  case "$base" in _C*.so|__pycache__) continue ;; esac
  ln -sfn "$f" "$dst/$base"
done
so=$(ls "$root"/build/"$name"/_C*.so 2>/dev/null | head -1 || true)
[ -n "$so" ] && ln -sfn "$so" "$dst/$(basename "$so")"
echo "PYTHONPATH=/tmp/tp_$name TP_CACHE_DIR=/tmp/tp_$name/cache"
