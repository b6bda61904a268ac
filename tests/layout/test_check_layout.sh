#!/usr/bin/env bash
# Self-test of scripts/check_layout.sh on small trees built in a temporary
# folder: an include cycle through a header, a file over the line limit, a
# clean tree, --graph, bad usage, and a run from another folder. Prints
# "N passed, N failed"; exit status 0 when every check passed.
set -uo pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/check_layout.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layout.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect NAME STATUS PATTERN CMD...: CMD exits with STATUS and its output matches PATTERN (grep -E).
expect() {
	local name=$1 want=$2 pattern=$3 out rc
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		ko "$name: exit status $rc, want $want; output:"$'\n'"$out"
	elif ! grep -Eq -- "$pattern" <<<"$out"; then
		ko "$name: output does not match /$pattern/:"$'\n'"$out"
	else
		ok
	fi
}

# A clean tree: a/x.c with its own header (no edge) and <...> and unknown
# headers (no nodes); a/y.h; b/z.c naming c/w.h by a path from the root.
clean=$tmp/clean
mkdir -p "$clean/a" "$clean/b" "$clean/c"
printf '#include "x.h"\n#include "y.h"\n#include <stdio.h>\n#include "urpc/urpc.h"\n' >"$clean/a/x.c"
printf '#ifndef X_H\n#define X_H\n#endif\n' >"$clean/a/x.h"
printf '#include "../b/z.h" /* a comment */\n' >"$clean/a/y.h"
printf '#include "z.h"\n  #  include "c/w.h"\n' >"$clean/b/z.c"
printf '\n' >"$clean/b/z.h"
printf '\n' >"$clean/c/w.h"
expect "clean tree passes" 0 'clean: 6 files, no include cycle, none over 650 lines' \
	"$script" "$clean"

# The same tree where c/w.h includes a/x.h back: a cycle through headers.
cyc=$tmp/cycle
cp -r "$clean" "$cyc"
printf '#include "../a/x.h"\n' >"$cyc/c/w.h"
expect "cycle through headers is caught" 1 \
	'include cycle: a/x -> a/y -> b/z -> c/w -> a/x \(.*a/x.c includes "y.h"; .*a/y.h includes "../b/z.h"; .*b/z.c includes "c/w.h"; .*c/w.h includes "../a/x.h"\)' \
	"$script" "$cyc"
expect "cycle is counted in the summary" 1 '1 include cycle\(s\), 0 file\(s\) over 650 lines' \
	"$script" "$cyc"

# A file over the limit, and --max-lines.
long=$tmp/long
cp -r "$clean" "$long"
seq 700 | sed 's/^/int v/; s/$/;/' >"$long/a/big.c"
expect "long file is caught" 1 'long/a/big.c: 700 lines, over the limit of 650' "$script" "$long"
expect "--max-lines raises the limit" 0 'none over 700 lines' "$script" --max-lines 700 "$long"
expect "--max-lines=N lowers it" 1 'x.c: 4 lines, over the limit of 3' "$script" --max-lines=3 "$long"

# Both at once, from another folder, with the tree given relative to it.
both=$tmp/both
cp -r "$cyc" "$both"
cp "$long/a/big.c" "$both/a/big.c"
expect "both problems, relative path" 1 '1 include cycle\(s\), 1 file\(s\) over 650 lines' \
	bash -c 'cd "$1" && "$2" both' sh "$tmp" "$script"

# The graph of one folder, edges leaving it included.
graph=$("$script" --graph "$cyc/c" "$cyc" 2>&1)
if [ "$graph" = "c/w -> a/x" ]; then ok; else ko "--graph of c: got '$graph'"; fi
graph=$("$script" --graph "$clean" "$clean" 2>&1 | tr '\n' '|')
if [ "$graph" = "a/x -> a/y|a/y -> b/z|b/z -> c/w|c/w|" ]; then ok; else ko "--graph: got '$graph'"; fi

# Usage.
expect "--help" 0 '^NAME' "$script" --help
expect "unknown option" 2 "unknown option '--nope' \(see --help\)" "$script" --nope
expect "bad --max-lines" 2 "--max-lines must be a whole number from 1, got 'x'" \
	"$script" --max-lines x
expect "missing folder" 2 "no folder '$tmp/none'" "$script" "$tmp/none"
expect "graph outside the tree" 2 "is not inside" "$script" --graph "$long" "$clean"

# The repository's own src/ from another folder: the graph of src/rpc prints.
expect "graph of src/rpc from /" 0 '^rpc/' bash -c 'cd / && "$1" --graph src/rpc' sh "$script"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
