#!/bin/busybox sh
# SPDX-License-Identifier: MIT
#
# The guest's /init for rxe-vm.sh: load modules, mount the shares, wire two
# rxe devices over a veth pair, run the command chrooted into the host's
# root filesystem, record its exit status, power off.
bb=/bin/busybox
$bb --install -s /bin
export PATH=/bin:/sbin

say() { echo "rxe-vm-guest: $*" >/dev/console; }
# QEMU runs with -no-reboot: a reboot ends it even where poweroff cannot.
off() {
	sync
	poweroff -f
	reboot -f
}
fail() {
	say "SKIP $*"
	off
}

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp

while read -r m; do
	insmod "/mods/$m" 2>/dev/null || say "insmod $m failed"
done </mods/list

mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /host || fail "cannot mount the host root"
mount -t 9p -o trans=virtio,version=9p2000.L share /share || fail "cannot mount the share"
exec >/share/out 2>&1

mtu=$(cat /share/mtu)
netem=$(cat /share/netem)

# The command runs chrooted into the host's root, with its own pseudo
# filesystems, and the host's tools (iproute2, rdma) set things up.
root=/host
mount -t tmpfs tmp "$root/tmp"
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount -t devtmpfs dev "$root/dev"
mount -t tmpfs run "$root/run"
mount -t hugetlbfs none "$root/dev/hugepages" 2>/dev/null
# busybox chroot prefers its own applets: exec the host's tools through env.
hroot() { chroot "$root" /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
hip() { hroot ip "$@"; }

# Two endpoints on one host: force 10.0.0.1 <-> 10.0.0.2 over the veth pair
# instead of the local shortcut through lo, which rxe drops. One ip process.
hip -batch - <<EOF_IP || fail "network setup failed"
link set lo up
link add veth0 mtu $mtu type veth peer name veth1 mtu $mtu
addr add 10.0.0.1/24 dev veth0
addr add 10.0.0.2/24 dev veth1
link set veth0 up
link set veth1 up
rule add pref 100 lookup local
rule del pref 0
route add 10.0.0.2/32 dev veth0 src 10.0.0.1 table 10
route add 10.0.0.1/32 dev veth1 src 10.0.0.2 table 10
rule add pref 10 iif lo from 10.0.0.1 to 10.0.0.2 lookup 10
rule add pref 11 iif lo from 10.0.0.2 to 10.0.0.1 lookup 10
EOF_IP
for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 >"$f"; done
for f in /proc/sys/net/ipv4/conf/*/accept_local; do echo 1 >"$f"; done
mac0=$(cat /sys/class/net/veth0/address)
mac1=$(cat /sys/class/net/veth1/address)
hip neigh replace 10.0.0.2 lladdr "$mac1" dev veth0 nud permanent
hip neigh replace 10.0.0.1 lladdr "$mac0" dev veth1 nud permanent
if [ -n "$netem" ]; then
	# shellcheck disable=SC2086
	hroot tc qdisc add dev veth1 root netem $netem || fail "tc netem $netem failed"
fi

hroot rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0 failed"
hroot rdma link add rxe1 type rxe netdev veth1 || fail "rdma link add rxe1 failed"

# Wait for both ports and for the IPv4 RoCE v2 GID (filled in asynchronously).
gid_index=""
i=0
while [ $i -lt 200 ]; do
	s0=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
	s1=$(cat /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null)
	gid_index=""
	for n in 0 1 2 3 4 5 6 7; do
		g=$(cat "/sys/class/infiniband/rxe1/ports/1/gids/$n" 2>/dev/null)
		t=$(cat "/sys/class/infiniband/rxe1/ports/1/gid_attrs/types/$n" 2>/dev/null)
		case "$g" in
		*ffff:0a00:0002) [ "$t" = "RoCE v2" ] && gid_index=$n ;;
		esac
		[ -n "$gid_index" ] && break
	done
	if [ -n "$gid_index" ] && [ "$s0" = "4: ACTIVE" ] && [ "$s1" = "4: ACTIVE" ]; then
		break
	fi
	i=$((i + 1))
	sleep 0.05
done
[ -n "$gid_index" ] || fail "the rxe GID table never showed 10.0.0.2 as RoCE v2"
say "rxe0/rxe1 active, GID index $gid_index"

# The host's current directory, read-write, at the same path.
cwd=$(cat /share/cwd)
if [ -n "$cwd" ] && [ -d "$root$cwd" ]; then
	mkdir -p /tmp/cwd
	mount -t 9p -o trans=virtio,version=9p2000.L cwd /tmp/cwd && mount --bind /tmp/cwd "$root$cwd"
fi

chroot "$root" /usr/bin/env URPC_RXE_VM=1 URPC_RXE_SERVER_IP=10.0.0.1 URPC_RXE_CLIENT_IP=10.0.0.2 \
	URPC_RXE_GID_INDEX="$gid_index" HOME=/root \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/bin/sh -c "$(cat /share/cmd)"
echo $? >/share/status
off
