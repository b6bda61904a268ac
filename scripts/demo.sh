#!/usr/bin/env bash
# Build urpc and run its demo on the default transport, on a fresh Debian 12
# machine (installs the packages it needs first). Extra arguments go to the
# demo (see `build/release/apps/demo/urpc-demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DURPC_BUILD_TESTS=OFF >/dev/null
cmake --build build/release -j "$(nproc)"
exec build/release/apps/demo/urpc-demo "$@"
