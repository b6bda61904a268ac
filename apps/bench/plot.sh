#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# plot.sh - draw a benchmark CSV as a PNG with gnuplot. See --help.
set -euo pipefail

prog=plot.sh

usage() {
	cat <<'EOF_USAGE'
NAME
    plot.sh - draw a CSV written by the urpc benchmarks as a PNG

SYNOPSIS
    apps/bench/plot.sh [-o OUT.png] [--title TEXT] CSV
    apps/bench/plot.sh --help

DESCRIPTION
    Reads CSV, recognises which benchmark wrote it from its header line, and
    draws it with gnuplot:

      urpc-latency --cdf    latency CDF: fraction of RPCs against round-trip
                            time (log scale), one curve per size and series
                            (urpc, and the raw UDP ping-pong on udp)
      urpc-latency --csv    p50 and p99 round trip against message size,
                            urpc next to its baseline
      urpc-small-tput --csv RPCs per second against the window, urpc next to
                            its baseline
      urpc-sessions --csv   RPCs per second and bytes per session against the
                            number of sessions
      urpc-large-tput --csv bandwidth (MB/s) against message size (log),
                            urpc next to the memcpy bound
      urpc-sim --experiment incast|victim --csv
                            goodput (% of the port) and the victim's p99
                            over its idle RTT against message size, CC on/off
      urpc-sim --experiment fairness --csv
                            Jain's index over time, per session count and CC

    gnuplot comes from Debian's gnuplot-nox package. When it is missing and
    this runs as root (or with sudo), it is installed with apt-get; otherwise
    the script says what to install and exits 2. It is not a CI dependency.

OPTIONS
    -o, --output OUT.png  where the plot goes (default: CSV with .png)
    --title TEXT          the plot's title (default: the benchmark and CSV name)
    -h, --help            show this help

EXIT STATUS
    0 when the PNG was written; 1 when the CSV is not recognised or empty or
    gnuplot failed; 2 on bad usage or when gnuplot is missing.

EXAMPLES
    urpc-latency --transport udp --cdf lat-cdf.csv && apps/bench/plot.sh lat-cdf.csv
    apps/bench/plot.sh -o tput.png build/h-suite/suite-udp/small_tput.csv
EOF_USAGE
}

die() {
	echo "$prog: error: $*" >&2
	exit 2
}

out=""
title=""
csv=""
while [ $# -gt 0 ]; do
	case "$1" in
	-o | --output | --title)
		[ $# -ge 2 ] || die "$1 needs a value (see --help)"
		if [ "$1" = --title ]; then title=$2; else out=$2; fi
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*) die "unknown option '$1' (see --help)" ;;
	*)
		[ -z "$csv" ] || die "one CSV at a time (got '$csv' and '$1')"
		csv=$1
		shift
		;;
	esac
done
[ -n "$csv" ] || die "no CSV given (see --help)"
[ -r "$csv" ] || die "cannot read '$csv'"
[ -n "$out" ] || out=${csv%.csv}.png

if ! command -v gnuplot >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
		die "gnuplot is missing: apt-get install gnuplot-nox (as root)"
	fi
	echo "$prog: installing gnuplot-nox" >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null ||
		{ $sudo apt-get update -q >/dev/null &&
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null; } ||
		die "could not install gnuplot-nox; install it and run again"
fi

header=$(head -n 1 "$csv")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split rows into one data file per key (columns named by awk field numbers):
# split KEYCOLS... -- X Y writes "$tmp/s.N" (X Y per line) and "$tmp/s.N.name".
split_series() {
	local keys=$1 x=$2 y=$3
	awk -F, -v keys="$keys" -v x="$x" -v y="$y" -v dir="$tmp" '
	NR == 1 { next }
	{
		n = split(keys, k, " ")
		name = ""
		for (i = 1; i <= n; i++) {
			v = $k[i]
			if (k[i] ~ /^[0-9]+$/ && v ~ /^[0-9]+$/ && i < n) v = v " B"
			name = name (i > 1 ? ", " : "") v
		}
		if (!(name in id)) {
			id[name] = ++count
			print name > (dir "/s." count ".name")
		}
		print $x, $y > (dir "/s." id[name])
	}' "$csv"
}

# A gnuplot "plot" clause over every split series, with @style.
plot_clause() {
	local style=$1 axes=${2:-x1y1} f first=1 clause=""
	for f in "$tmp"/s.*.name; do
		[ -e "$f" ] || continue
		local data=${f%.name}
		clause+="$([ $first = 1 ] || echo ', ')'$data' using 1:2 axes $axes with $style title '$(sed "s/'/''/g" "$f")'"
		first=0
	done
	echo "$clause"
}

term="pngcairo size 1000,640 font ',11'"
gnuplot -e "set terminal pngcairo" >/dev/null 2>&1 || term="png size 1000,640"

case "$header" in
transport,size,series,latency_us,fraction)
	kind="latency CDF"
	split_series "2 3" 4 5
	xlabel="round trip (us, log scale)"
	ylabel="fraction of RPCs"
	extra="set logscale x; set yrange [0:1]; set key bottom right"
	style="lines lw 2"
	;;
transport,size,rpcs,urpc_p50_us,*)
	kind="latency against size"
	awk -F, 'NR > 1 && !seen[$2]++ { print $2, $4 > "'"$tmp"'/s.1"; print $2, $5 > "'"$tmp"'/s.2" }
		NR > 1 && $8 > 0 { print $2, $8 > "'"$tmp"'/s." (3 + 2 * (($7 in b) ? b[$7] : (b[$7] = nb++))); print $2, $9 > "'"$tmp"'/s." (4 + 2 * b[$7]); name[$7] = 1 }
		END { print "urpc p50" > "'"$tmp"'/s.1.name"; print "urpc p99" > "'"$tmp"'/s.2.name"
			for (n in b) { print n " p50" > "'"$tmp"'/s." (3 + 2 * b[n]) ".name"; print n " p99" > "'"$tmp"'/s." (4 + 2 * b[n]) ".name" } }' "$csv"
	xlabel="message size (bytes)"
	ylabel="round trip (us)"
	extra="set logscale x 2; set yrange [0:*]; set key top left"
	style="linespoints lw 2"
	;;
transport,size,window,batch,*)
	kind="small-RPC rate against window"
	awk -F, 'NR > 1 { print $3, $7 > "'"$tmp"'/s.1"; if ($10 > 0) { print $3, $10 > "'"$tmp"'/s.2"; base = $9 } }
		END { print "urpc RPCs/s" > "'"$tmp"'/s.1.name"; if (base != "") print base " /s" > "'"$tmp"'/s.2.name" }' "$csv"
	xlabel="window (requests outstanding)"
	ylabel="per second"
	extra="set logscale x 2; set yrange [0:*]; set key top left"
	style="linespoints lw 2"
	;;
transport,sessions,*)
	kind="sessions"
	awk -F, 'NR > 1 { print $2, $8 > "'"$tmp"'/s.1"; print $2, $6 > "'"$tmp"'/s.2" }
		END { print "RPCs/s (left)" > "'"$tmp"'/s.1.name"; print "bytes per session (right)" > "'"$tmp"'/s.2.name" }' "$csv"
	xlabel="sessions on one server Rpc (log scale)"
	ylabel="RPCs per second"
	extra="set logscale x; set yrange [0:*]; set y2range [0:*]; set y2tics; set y2label 'bytes per session'; set key top right"
	style="linespoints lw 2"
	;;
transport,direction,size,*)
	kind="bandwidth against size"
	awk -F, 'NR > 1 { print $3, $9 > "'"$tmp"'/s.1"; print $3, $10 > "'"$tmp"'/s.2" }
		END { print "urpc MB/s" > "'"$tmp"'/s.1.name"; print "memcpy MB/s" > "'"$tmp"'/s.2.name" }' "$csv"
	xlabel="message size (bytes, log scale)"
	ylabel="MB/s (10^6 bytes per second)"
	extra="set logscale x 2; set format x '%.0b %BB'; set yrange [0:*]; set key top left"
	style="linespoints lw 2"
	;;
cc,clients,msg_bytes,*)
	kind="incast goodput and victim p99"
	awk -F, 'NR > 1 { print $3, $5 > "'"$tmp"'/s." $1 ".g"; if ($15 > 0) print $3, 100 * $14 / $15 > "'"$tmp"'/s." $1 ".v" }
		END { }' "$csv"
	for f in "$tmp"/s.*.g; do [ -e "$f" ] || continue; c=${f#"$tmp"/s.}; c=${c%.g}
		mv "$f" "$tmp/s.1$c"; echo "goodput % of the port, CC $c" > "$tmp/s.1$c.name"; done
	for f in "$tmp"/s.*.v; do [ -e "$f" ] || continue; c=${f#"$tmp"/s.}; c=${c%.v}
		mv "$f" "$tmp/s.2$c"; echo "victim p99 / idle RTT x 100, CC $c" > "$tmp/s.2$c.name"; done
	xlabel="message size (bytes, log scale)"
	ylabel="percent (log scale)"
	extra="set logscale x 2; set format x '%.0b %BB'; set logscale y; set key top left"
	style="linespoints lw 2"
	;;
cc,sessions,t_us,*)
	kind="fairness: Jain index over time"
	split_series "1 2" 3 4
	xlabel="time (us)"
	ylabel="Jain index of 1 ms throughput"
	extra="set yrange [0:1.05]; set key bottom right"
	style="lines lw 1"
	;;
*)
	echo "$prog: '$csv' is not a CSV of urpc-latency, urpc-small-tput, urpc-sessions, urpc-large-tput or urpc-sim --experiment (header: $header)" >&2
	exit 1
	;;
esac

ls "$tmp"/s.*.name >/dev/null 2>&1 || {
	echo "$prog: '$csv' has no rows" >&2
	exit 1
}
[ -n "$title" ] || title="$kind ($(basename "$csv"))"
if [ "$kind" = sessions ]; then
	clause="'$tmp/s.1' using 1:2 axes x1y1 with $style title 'RPCs/s (left)', '$tmp/s.2' using 1:2 axes x1y2 with $style title 'bytes per session (right)'"
else
	clause=$(plot_clause "$style")
fi
gnuplot <<EOF_GP || { echo "$prog: gnuplot failed" >&2; exit 1; }
set terminal $term
set output '$(printf '%s' "$out" | sed "s/'/''/g")'
set title '$(printf '%s' "$title" | sed "s/'/''/g")' noenhanced
set xlabel '$xlabel' noenhanced
set ylabel '$ylabel' noenhanced
set grid
set key noenhanced
$extra
plot $clause
EOF_GP
echo "$prog: wrote $out" >&2
