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
# The Python document extension, when built, is installed beside the
# library, and the package finds it there (the direct document path).
py=${3:-}
if [ -f "$build/_docbuild.abi3.so" ]; then
  test -f "$tmp/prefix/lib/_docbuild.abi3.so" || { echo "document extension not installed"; exit 1; }
  if [ -n "$py" ]; then
    MAGI_AOT_LIB="$tmp/prefix/lib/libmagi_aot.so" PYTHONPATH="$src/python" "$py" -c \
      "from magi_aot import docio; p = docio.path_used(); assert p == 'direct', (p, docio.extension_missing()); print('python document path:', p)"
  fi
fi
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
# pkg-config --static: the static library alone (no .so beside it) links
# with exactly the flags the .pc file gives, and the binary does not need
# libmagi_aot.so at run time.
cp -a "$tmp/prefix" "$tmp/static"
rm -f "$tmp/static/lib/"libmagi_aot.so*
export PKG_CONFIG_PATH="$tmp/static/lib/pkgconfig"
flags=$(pkg-config --static --cflags --libs magi_aot)
echo "pkg-config --static: $flags"
case " $flags " in *" -lm "*) ;; *) echo "pkg-config --static lacks -lm"; exit 1 ;; esac
cc -o "$tmp/pc_static" "$src/tests/consumer/main.c" $flags
if ldd "$tmp/pc_static" | grep -q libmagi_aot; then echo "pc_static links libmagi_aot.so"; exit 1; fi
out=$("$tmp/pc_static" "$src/fixtures/real/block.json")
[ "$out" = "nodes=45 version=0.1.0" ] || { echo "pkg-config --static consumer: unexpected output"; exit 1; }
# README.md's library example, on an artifact the installed CLI writes.
"$tmp/prefix/bin/magi-aot" save "$src/fixtures/real/fsdp_block.json" -o "$tmp/fsdp.magi"
out=$("$tmp/consumer/list_inputs" "$tmp/fsdp.magi")
echo "list_inputs: ${out%%$'\n'*}"
want=$("$tmp/prefix/bin/magi-aot" inputs "$tmp/fsdp.magi" | grep -o '"name"' | wc -l)
[ "$(echo "$out" | wc -l)" -eq "$want" ] || { echo "list_inputs: $(echo "$out" | wc -l) lines, want $want"; exit 1; }
first=${out%%$'\n'*}
[[ $first =~ ^0\ [A-Za-z_][A-Za-z0-9_]*\ [a-z0-9]+\ \[.*\]\ on\  ]] || { echo "list_inputs: unexpected first line '$first'"; exit 1; }
