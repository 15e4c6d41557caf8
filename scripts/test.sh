#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: a release build, then the same suite
# under AddressSanitizer + UndefinedBehaviorSanitizer, then a short bounded run of every
# libFuzzer target (clang, ASan + UBSan; only the fuzz targets are built in that tree).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
ctest --test-dir build --output-on-failure -j2
scripts/build.sh build-asan -DTT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j2
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DTT_FUZZ=ON -DTT_SANITIZE=ON -DTT_WERROR=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz --target fuzz -j2
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-fuzz -L fuzz --output-on-failure
