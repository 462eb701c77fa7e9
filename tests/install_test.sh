#!/usr/bin/env bash
# Install into a temporary prefix, then build a consumer with
# find_package(MagiAOT) and one with pkg-config, and run both.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -L "$tmp/prefix/lib/libmagi_aot.so" || { echo "no libmagi_aot.so symlink"; exit 1; }
ls "$tmp/prefix/lib/"libmagi_aot.so.0* >/dev/null || { echo "no versioned soname"; exit 1; }
test -f "$tmp/prefix/lib/libmagi_aot.a" || { echo "no static library"; exit 1; }
cmake -S "$src/tests/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_RPATH="$tmp/prefix/lib" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
out=$("$tmp/consumer/consumer" "$src/fixtures/real/block.json")
echo "find_package consumer: $out"
[ "$out" = "nodes=45 version=0.1.0" ] || { echo "unexpected output"; exit 1; }
out=$("$tmp/consumer/consumer_static" "$src/fixtures/real/block.json")
[ "$out" = "nodes=45 version=0.1.0" ] || { echo "static consumer: unexpected output"; exit 1; }
# pkg-config consumer
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -o "$tmp/pc_consumer" "$src/tests/consumer/main.c" $(pkg-config --cflags --libs magi_aot) -Wl,-rpath,"$tmp/prefix/lib"
out=$("$tmp/pc_consumer" "$src/fixtures/real/block.json")
echo "pkg-config consumer: $out"
[ "$out" = "nodes=45 version=0.1.0" ] || { echo "pkg-config consumer: unexpected output"; exit 1; }
