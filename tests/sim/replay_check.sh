#!/bin/sh
# SPDX-License-Identifier: MIT
# A seed replays exactly whatever ran before it in the process: the trace
# hash of seeds run alone equals their hash inside a range, and the options
# line a run prints to reproduce it gives the same hash again.
# Usage: replay_check.sh URPC_SIM
set -eu
sim=$1
range=$("$sim" --seeds 1-40 --list --quiet | grep '^seed')
for s in 3 17 29 40; do
	alone=$("$sim" --seed "$s" --list)
	inrange=$(printf '%s\n' "$range" | grep "^seed $s ")
	if [ "$alone" != "$inrange" ]; then
		echo "replay_check: seed $s alone: '$alone', in a range: '$inrange'" >&2
		exit 1
	fi
	# shellcheck disable=SC2046 # the printed line is the options, word by word
	line=$("$sim" --seed "$s" 2>&1 | sed -n 's/^  (\(--seed .*\))$/\1/p' | tail -n 1)
	again=$("$sim" $line --list)
	if [ -z "$line" ] || [ "$alone" != "$again" ]; then
		echo "replay_check: seed $s alone: '$alone', from its printed line '$line': '$again'" >&2
		exit 1
	fi
done
echo "replay_check: 4 seeds replay identically alone, in a range of 40 and from their printed lines"
