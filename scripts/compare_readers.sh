#!/usr/bin/env bash
# Do two builds' readers agree byte for byte? For a change that must not
# alter what any reader accepts, prints or refuses (a faster decoder, say):
#
#   scripts/compare_readers.sh OLD_CLI NEW_CLI [STRUCT_BATCH] [N]
#
# Inputs: every JSON and legacy v0 fixture, each JSON fixture saved as an
# artifact (both CLIs must save the same bytes; with ALLOW_WRITER_CHANGE=1
# a difference is allowed and both artifacts are read), every file of the fuzz
# corpora (hostile, crash and seed inputs), and - with STRUCT_BATCH, the
# fuzz/struct_batch binary of either build - its N (default 1200)
# structure-aware mutants of the fixtures' artifacts. For each input, each
# CLI runs `dump`, `inspect` and `load` (the library loader's report); the
# exit status, stdout and stderr must be identical. Run from the repository
# root. Exits 1 on the first difference, printing it.
set -euo pipefail
old=$1 new=$2 batch=${3:-} n=${4:-1200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/in"

shopt -s nullglob
inputs=(fixtures/*/*.json fixtures/v0/* fuzz/corpus/*/*)
for j in fixtures/*/*.json; do
    b=$(basename "$j" .json)
    "$old" save "$j" -o "$work/in/$b.old.magi" >/dev/null
    "$new" save "$j" -o "$work/in/$b.magi" >/dev/null
    if cmp -s "$work/in/$b.old.magi" "$work/in/$b.magi"; then
        rm "$work/in/$b.old.magi"
    elif [ -n "${ALLOW_WRITER_CHANGE:-}" ]; then
        inputs+=("$work/in/$b.old.magi") # both readers read both writers' bytes
    else
        echo "save differs: $j (a writer change? ALLOW_WRITER_CHANGE=1 compares the readers on both)"; exit 1
    fi
    inputs+=("$work/in/$b.magi")
done
if [ -n "$batch" ]; then
    mkdir -p "$work/mut"
    "$batch" fixtures/real "$n" 20261201 --write-dir "$work/mut" >/dev/null
    inputs+=("$work/mut"/*)
fi

run() { # CLI CMD FILE -> OUT
    local rc=0
    "$1" "$2" "$3" >"$4.out" 2>"$4.err" || rc=$?
    echo "$rc" >"$4.rc"
}

total=0 accepted=0
for f in "${inputs[@]}"; do
    [ -f "$f" ] || continue
    total=$((total + 1))
    for cmd in dump inspect load; do
        run "$old" "$cmd" "$f" "$work/o"
        run "$new" "$cmd" "$f" "$work/n"
        for k in rc out err; do
            if ! cmp -s "$work/o.$k" "$work/n.$k"; then
                echo "DIFFERENT: $cmd $f ($k)"
                diff "$work/o.$k" "$work/n.$k" | head -20
                exit 1
            fi
        done
        [ "$cmd" = load ] && [ "$(cat "$work/n.rc")" = 0 ] && accepted=$((accepted + 1))
    done
done
echo "compare_readers: $total inputs x dump/inspect/load identical ($accepted loaded, $((total - accepted)) refused by load)"
