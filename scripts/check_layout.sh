#!/usr/bin/env bash
# check_layout.sh: the layout rules of src/ (issue 14), checked from the source text.
#
# Usage: scripts/check_layout.sh [--max-lines N] [TREE]
#        scripts/check_layout.sh --graph DIR [TREE]
#        scripts/check_layout.sh --help
# Run from any folder; see --help for the rules, the output and the exit status.
set -euo pipefail

prog=check_layout.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
	cat <<EOF
NAME
    check_layout.sh - check src/ for include cycles and oversized files

SYNOPSIS
    scripts/check_layout.sh [--max-lines N] [TREE]
    scripts/check_layout.sh --graph DIR [TREE]
    scripts/check_layout.sh --help

DESCRIPTION
    Reads the C files (*.c, *.h) below TREE (default: the repository's src/)
    as text and checks two rules of the style guide (issue 14):

    1. No include cycle. A .c file and the .h file of the same name in the
       same folder form one node (rpc/session.c and rpc/session.h are the node
       "rpc/session"); there is an edge A -> B when A's .c or .h has
       #include "..." naming B's .h. The name is looked up next to the file
       that includes it, then from TREE (as the build's -I does); <...>
       includes and headers outside TREE (include/urpc/urpc.h, libc) are not
       nodes. A file that includes its own node's header is no edge. Every
       cycle is printed as a path with, for each step, the file that makes it.

    2. No file over N lines (default 650: "about 600" in issue 14).

    3. Folders are floors, and includes point down or across only. From the
       ground: util, mem, transport, nexus, rpc (a file of rpc/ may include
       nexus/, transport/, mem/ and util/; nexus/ may include transport/,
       mem/ and util/ but never rpc/; and so on). A folder of TREE that is
       not on that list is on no floor and is not checked by this rule.

    Includes are read from the text, conditionals and all: a file that
    includes a header only under #if still makes the edge.

OPTIONS
    --max-lines N
        The line limit, a whole number from 1 (default 650).
    --graph DIR
        Print the include graph of the nodes in folder DIR (a folder in TREE,
        for example src/rpc) instead of checking: one "A -> B" line per edge,
        sorted, node names relative to TREE, edges that leave DIR included; a
        node with no edges prints as "A" alone. DIR is taken from the current
        folder, else from the repository's root.
    -h, --help
        Show this help.

    TREE is taken from the current folder, else from the repository's root.

OUTPUT
    Checking: one line per problem on stderr, each naming its files, then a
    summary line; "check_layout.sh: TREE: N files, no include cycle, none
    over N lines" on stdout when all is well.

EXIT STATUS
    0 when both rules hold (or the graph was printed); 1 when a rule is broken;
    2 on bad usage.

EXAMPLES
    scripts/check_layout.sh
    scripts/check_layout.sh --max-lines 600
    scripts/check_layout.sh --graph src/rpc
EOF
}

bad_usage() {
	echo "$prog: $* (see --help)" >&2
	exit 2
}

# A folder named on the command line: from the current folder, else from the repository's root.
resolve_dir() {
	if [ -d "$1" ]; then
		(cd "$1" && pwd -P)
	elif [[ $1 != /* ]] && [ -d "$repo/$1" ]; then
		(cd "$repo/$1" && pwd -P)
	else
		bad_usage "no folder '$1'"
	fi
}

max_lines=650
graph=""
tree_arg=""
while [ $# -gt 0 ]; do
	case "$1" in
	--max-lines | --max-lines=*)
		if [[ $1 == *=* ]]; then v=${1#*=}; shift; else
			[ $# -ge 2 ] || bad_usage "option '--max-lines' needs a value"
			v=$2; shift 2
		fi
		[[ $v =~ ^[0-9]+$ ]] && [ "$v" -ge 1 ] ||
			bad_usage "--max-lines must be a whole number from 1, got '$v'"
		max_lines=$v ;;
	--graph | --graph=*)
		if [[ $1 == *=* ]]; then graph=${1#*=}; shift; else
			[ $# -ge 2 ] || bad_usage "option '--graph' needs a value"
			graph=$2; shift 2
		fi
		[ -n "$graph" ] || bad_usage "--graph needs a folder" ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	-*) bad_usage "unknown option '$1'" ;;
	*)
		[ -z "$tree_arg" ] || bad_usage "unexpected argument '$1'"
		tree_arg=$1; shift ;;
	esac
done
if [ $# -gt 0 ]; then
	[ -z "$tree_arg" ] && [ $# -eq 1 ] || bad_usage "unexpected argument '${2:-$1}'"
	tree_arg=$1
fi

tree=$(resolve_dir "${tree_arg:-$repo/src}")
# How files are named in messages: from the repository's root when TREE is in it.
if [[ $tree == "$repo"/* ]]; then show=${tree#"$repo"/}; else show=$tree; fi

files=()
while IFS= read -r f; do
	files+=("${f#"$tree"/}")
done < <(find "$tree" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)

# ---- the include graph ----------------------------------------------------------
# Plain shell below, one awk for every file's includes and one sort for the
# edges: a process per include made a check of src/ take 40 s of a loaded
# 2-core machine.

# The path $1 with "." and ".." steps and repeated slashes taken out, in $norm
# (as realpath -m does, symbolic links aside: a source tree has none).
normalize() {
	local part out=() IFS=/
	for part in $1; do
		case $part in
		"" | .) ;;
		..) [ ${#out[@]} -eq 0 ] || unset 'out[${#out[@]}-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	norm="/${out[*]}"
}

declare -A why    # "A B" -> the first file whose include makes the edge A -> B
declare -A adj    # A -> its successors, space-separated, sorted
declare -A nodes  # every node
for f in "${files[@]}"; do
	nodes[${f%.*}]=1
done
# Each line: FILE (relative to the tree), a tab, the name in its #include "...".
while IFS=$'\t' read -r f inc; do
	node=${f%.*}
	if [[ $f == */* ]]; then dir=${f%/*}; else dir=.; fi
	target=""
	for cand in "$tree/$dir/$inc" "$tree/$inc"; do
		if [ -f "$cand" ]; then
			normalize "$cand"
			target=$norm
			break
		fi
	done
	[[ $target == "$tree"/*.h ]] || continue
	to=${target#"$tree"/}
	to=${to%.h}
	[ "$to" != "$node" ] || continue
	[ -n "${why["$node $to"]:-}" ] || why["$node $to"]="$f includes \"$inc\""
done < <(if [ ${#files[@]} -gt 0 ]; then
	cd "$tree" && awk '{
		if (match($0, /^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"/)) {
			s = substr($0, 1, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s)
			print FILENAME "\t" s
		}
	}' "${files[@]}"
fi)
if [ ${#why[@]} -gt 0 ]; then
	while read -r a b; do
		adj[$a]+="$b "
	done < <(printf '%s\n' "${!why[@]}" | LC_ALL=C sort)
fi

if [ -n "$graph" ]; then
	gdir=$(resolve_dir "$graph")
	if [ "$gdir" = "$tree" ]; then
		prefix=""
	elif [[ $gdir == "$tree"/* ]]; then
		prefix=${gdir#"$tree"/}/
	else
		bad_usage "--graph folder '$graph' is not inside $show"
	fi
	for n in $(printf '%s\n' "${!nodes[@]}" | LC_ALL=C sort); do
		[[ $n == "$prefix"* ]] || continue
		if [ -z "${adj[$n]:-}" ]; then
			echo "$n"
			continue
		fi
		for m in ${adj[$n]}; do
			echo "$n -> $m"
		done
	done
	exit 0
fi

# ---- rule 1: no cycle (depth-first search; a grey successor closes one) ----------
declare -A colour # unset: not seen; 1: on the current path; 2: done
path=()
cycles=0
report_cycle() { # the cycle from $1 (on the path) to the end of the path and back
	local i start=-1 text="" steps="" a b
	for i in "${!path[@]}"; do
		[ "${path[$i]}" = "$1" ] && start=$i
	done
	for ((i = start; i < ${#path[@]}; i++)); do
		a=${path[$i]}
		if ((i + 1 < ${#path[@]})); then b=${path[$((i + 1))]}; else b=$1; fi
		text+="$a -> "
		steps+="; $show/${why["$a $b"]}"
	done
	echo "$prog: include cycle: $text$1 (${steps#; })" >&2
	cycles=$((cycles + 1))
}
visit() {
	local u=$1 v
	colour[$u]=1
	path+=("$u")
	for v in ${adj[$u]:-}; do
		case ${colour[$v]:-0} in
		0) visit "$v" ;;
		1) report_cycle "$v" ;;
		esac
	done
	unset 'path[${#path[@]}-1]'
	colour[$u]=2
}
for n in $(printf '%s\n' "${!nodes[@]}" | LC_ALL=C sort); do
	[ -n "${colour[$n]:-}" ] || visit "$n"
done

# ---- rule 3: folders are floors; an include never points up -------------------
declare -A floor=([util]=1 [mem]=2 [transport]=3 [nexus]=4 [rpc]=5)
upward=0
for e in $(printf '%s\n' "${!why[@]}" | tr ' ' '|' | LC_ALL=C sort); do
	a=${e%%|*}
	b=${e#*|}
	fa=${floor[${a%%/*}]:-}
	fb=${floor[${b%%/*}]:-}
	[[ $a == */* && $b == */* && -n $fa && -n $fb ]] || continue
	if [ "$fb" -gt "$fa" ]; then
		echo "$prog: include up a floor: ${a%%/*}/ (floor $fa) -> ${b%%/*}/ (floor $fb):" \
			"$show/${why["$a $b"]}" >&2
		upward=$((upward + 1))
	fi
done

# ---- rule 2: no file over the limit ------------------------------------------
long=0
declare -A nlines # FILE -> its lines (a last line without a newline counts too)
if [ ${#files[@]} -gt 0 ]; then
	while IFS=$'\t' read -r f n; do
		nlines[$f]=$n
	done < <(cd "$tree" && awk 'FNR == 1 { f = FILENAME; n[f] = 0 } { n[f] = FNR }
		END { for (f in n) print f "\t" n[f] }' "${files[@]}")
fi
for f in "${files[@]}"; do
	n=${nlines[$f]:-0}
	if [ "$n" -gt "$max_lines" ]; then
		echo "$prog: $show/$f: $n lines, over the limit of $max_lines" >&2
		long=$((long + 1))
	fi
done

if [ "$cycles" -gt 0 ] || [ "$long" -gt 0 ] || [ "$upward" -gt 0 ]; then
	echo "$prog: $show: $cycles include cycle(s), $long file(s) over $max_lines lines," \
		"$upward include(s) up a floor" \
		"(rules: scripts/check_layout.sh --help)" >&2
	exit 1
fi
echo "$prog: $show: ${#files[@]} files, no include cycle, none over $max_lines lines, no include up a floor"
