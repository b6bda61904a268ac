#!/usr/bin/env bash
# CTest smoke test of urpc-rdma-example as two processes, on udp:
#   1. --serve --port 0 --count 2 (it prints the port it got);
#   2. two clients in turn with --connect: each must end "client: OK", and
#      the second one's exposure has a new generation;
#   3. the server exits 0 after the second DONE;
#   4. a client against a port where no server listens exits 1 with a message.
# Usage: rdma_example_smoke.sh BINARY
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
server=
fail() {
	echo "rdma_example_smoke: FAIL: $*" >&2
	for f in "$tmp"/*; do
		echo "---- $f" >&2
		cat "$f" >&2
	done
	exit 1
}
cleanup() {
	if [ -n "$server" ]; then
		kill "$server" 2>/dev/null
		wait "$server" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" --serve --port 0 --count 2 --transport udp --size 300001 >"$tmp/server.out" \
	2>"$tmp/server.err" &
server=$!
port=
for _ in $(seq 200); do # until it prints its port, or dies
	port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\),.*/\1/p' "$tmp/server.out")
	[ -n "$port" ] && break
	kill -0 "$server" 2>/dev/null || fail "the server did not start"
	sleep 0.05
done
[ -n "$port" ] || fail "the server printed no port"

for i in 1 2; do
	"$bin" --connect "127.0.0.1:$port" --transport udp >"$tmp/client$i.out" \
		2>"$tmp/client$i.err" || fail "client $i exited with $?"
	grep -q "^client: read 300001 bytes back .*all as written" "$tmp/client$i.out" ||
		fail "client $i did not read its bytes back"
	grep -q "^client: OK" "$tmp/client$i.out" || fail "client $i did not say OK"
done
wait "$server"
rc=$?
server=
[ "$rc" = 0 ] || fail "the server exited with $rc after two clients"
[ "$(grep -c '^server: 300001 of 300001 bytes' "$tmp/server.out")" = 2 ] ||
	fail "the server did not check two clients' bytes"
grep -q "generation 1)" "$tmp/server.out" && grep -q "generation 2)" "$tmp/server.out" ||
	fail "the second exposure did not get a new generation"

# Nobody listens on the port the server had: a clear error, status 1.
"$bin" --connect "127.0.0.1:$port" --transport udp --timeout 500 >"$tmp/none.out" \
	2>"$tmp/none.err"
rc=$?
[ "$rc" = 1 ] || fail "a client without a server exited with $rc, not 1"
grep -q "no session with rpc 0 at 127.0.0.1:$port" "$tmp/none.err" ||
	fail "a client without a server did not say why"
echo "rdma_example_smoke: passed"
