#!/usr/bin/env bash
# Install the Debian 12 packages urpc needs to build, test and run its demo.
# Idempotent: does nothing when everything is already installed.
# Usage: scripts/deps.sh            (as root, or with sudo available)
set -euo pipefail

pkgs=(
	build-essential cmake ninja-build pkg-config git
	clang libclang-rt-14-dev clang-format
	libcriterion-dev libhugetlbfs-dev
	libibverbs-dev rdma-core ibverbs-providers ibverbs-utils
	valgrind
	libxdp-dev libbpf-dev xdp-tools bpftool iproute2 nftables
)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
	sudo=sudo
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
