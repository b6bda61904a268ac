#!/usr/bin/env bash
# Build urpc and run its demos on the default transport, on a fresh Debian 12
# machine (installs the packages it needs first):
#   1. urpc-hello-server and urpc-hello-client: one RPC through the engine
#      (Nexus, session, request, response) between two processes;
#   2. urpc-demo: 100,000 datagram round trips and an 8 MiB one-sided
#      READ/WRITE on the transport layer, verified byte by byte.
#   3. urpc-rdma-example: a server exposes 1 MiB, the client WRITEs it
#      one-sided, the server checks it, the client READs it back.
#   4. urpc-kv-server and urpc-kv-client: the key-value demo, a 3-second
#      YCSB-A load run in --verify mode: every GET checked against the
#      acknowledged writes, then the throughput and p50/p99/p99.9 latency.
#      Server and client get half the cores each (at least one thread):
#      1 + 1 threads on a 2-core machine. KV_SERVER_THREADS and
#      KV_CLIENT_THREADS override that.
# Extra arguments go to urpc-demo (see `build/release/apps/demo/urpc-demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DURPC_BUILD_TESTS=OFF >/dev/null
cmake --build build/release -j "$(nproc)"

bin=build/release/apps
port=$((32000 + $$ % 20000))
echo "==== urpc-hello: one RPC between two processes ===="
out=$(mktemp)
"$bin/hello/urpc-hello-server" --port "$port" --count 1 >"$out" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$out"' EXIT
# The client starts once the server says it listens (up to 10 s).
for _ in $(seq 200); do
	grep -q listening "$out" && break
	kill -0 "$server" 2>/dev/null || break
	sleep 0.05
done
cat "$out"
"$bin/hello/urpc-hello-client" --server "127.0.0.1:$port" --timeout 5000 urpc
wait $server
tail -n +2 "$out"
rm -f "$out"
trap - EXIT

echo "==== urpc-demo: the transport layer ===="
"$bin/demo/urpc-demo" "$@"

echo "==== urpc-rdma-example: remote memory, one-sided WRITE and READ ===="
"$bin/rdma/urpc-rdma-example"

half=$(($(nproc) / 2))
[ "$half" -ge 1 ] || half=1
kv_srv=${KV_SERVER_THREADS:-$half}
kv_cli=${KV_CLIENT_THREADS:-$half}
echo "==== urpc-kv: a key-value store, a short verified load run ($kv_srv server, $kv_cli client threads) ===="
kvport=$((port + 1))
"$bin/kv/urpc-kv-server" --port "$kvport" --threads "$kv_srv" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do # until the server answers
	"$bin/kv/urpc-kv-client" --server "127.0.0.1:$kvport" --timeout 200 stats \
		>/dev/null 2>&1 && break
	sleep 0.1
done
"$bin/kv/urpc-kv-client" --server "127.0.0.1:$kvport" --verify --workload A --threads "$kv_cli" \
	--keys 10000 --value-size 256 --duration 3
kill -TERM $server
wait $server
trap - EXIT
