#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: a release build, then the same suite
# under AddressSanitizer + UndefinedBehaviorSanitizer, then a short bounded run of every
# libFuzzer target (clang, ASan + UBSan; only the fuzz targets are built in that tree).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh run build test
# TT_TESTS=ON said, not defaulted: a tree scripts/run.sh configured before Criterion was installed
# keeps its OFF in the cache, and ctest would find nothing to run (--no-tests=error catches that).
scripts/build.sh build -DTT_TESTS=ON
ctest --test-dir build --output-on-failure --no-tests=error -j2
scripts/build.sh build-asan -DTT_TESTS=ON -DTT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j2
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DTT_FUZZ=ON -DTT_TESTS=ON -DTT_SANITIZE=ON -DTT_WERROR=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz --target fuzz -j2
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-fuzz -L fuzz --output-on-failure --no-tests=error
