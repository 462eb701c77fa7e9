#!/usr/bin/env bash
# Install the Debian 12 packages magi-aot needs to build and test (as root).
# Skips apt-get entirely when everything is present already.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libmsgpack-dev libzstd-dev libssl-dev libjansson-dev python3 python3-dev)
case "${1:-}" in
  --test) pkgs+=(valgrind) ;;                      # scripts/memcheck.sh
  --fuzz) pkgs+=(clang libclang-rt-14-dev) ;;      # -DMAGI_FUZZ=ON (fuzz/README.md)
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
