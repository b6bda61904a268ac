#!/bin/busybox sh
# SPDX-License-Identifier: MIT
#
# The guest's /init for rxe-vm.sh: load modules, mount the shares, wire two
# rxe devices over a veth pair, run the command chrooted into the host's
# root filesystem, record its exit status, power off.
bb=/bin/busybox
$bb --install -s /bin
export PATH=/bin:/sbin

# Milestones go to the console log (with the guest's uptime; the host shows
# its tail on failure or with --keep-log); say also to the host's stderr once
# the output ports are open (the host passes "rxe-vm: ..." lines through).
note() {
	read -r up _ </proc/uptime
	echo "rxe-vm-guest: [$up] $*" >/dev/console
}
say() {
	note "$@"
	[ -n "$ports" ] && echo "rxe-vm: $*" >&2
}
# QEMU runs with -no-reboot: a reboot ends it even where poweroff cannot.
off() {
	poweroff -f
	reboot -f
}
# Setup failed before COMMAND could start: the host reports SKIPPED.
fail() {
	note "SKIP $*"
	[ -d /share/ok ] && echo "$*" >/share/skip
	off
}
ports=""

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
note "init started"

while read -r m; do
	insmod "/mods/$m" 2>/dev/null || say "insmod $m failed"
done </mods/list

note "modules loaded"
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /host || fail "cannot mount the host root"
mount -t 9p -o trans=virtio,version=9p2000.L share /share || fail "cannot mount the share"
mkdir -p /share/ok

# COMMAND's stdout and stderr go to the virtio-serial ports "out" and "err",
# which the host streams to its own; without them, to files in the share.
# Sets pout/perr to the device nodes of the ports named out and err.
find_ports() {
	pout="" perr=""
	for d in /sys/class/virtio-ports/*; do
		n=""
		read -r n <"$d/name" 2>/dev/null
		case "$n" in
		out) pout=/dev/${d##*/} ;;
		err) perr=/dev/${d##*/} ;;
		esac
	done
}
i=0
find_ports
while [ $i -lt 100 ] && { [ -z "$pout" ] || [ -z "$perr" ]; }; do
	i=$((i + 1))
	sleep 0.02
	find_ports
done
if [ -n "$pout" ] && [ -n "$perr" ] && [ -c "$pout" ] && [ -c "$perr" ]; then
	exec >"$pout" 2>"$perr"
	ports=1
else
	say "no virtio-serial ports, output goes to the share"
	exec >/share/out 2>/share/err
	ports=1
fi

note "ports open"
read -r mtu </share/mtu
read -r netem </share/netem

# The command runs chrooted into the host's root, with its own pseudo
# filesystems, and the host's tools (iproute2, rdma) set things up.
root=/host
mount -t tmpfs tmp "$root/tmp"
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount -t devtmpfs dev "$root/dev"
mount -t tmpfs run "$root/run"
mkdir -p "$root/dev/pts" "$root/dev/shm" "$root/dev/hugepages"
mount -t devpts devpts "$root/dev/pts"
mount -t tmpfs shm "$root/dev/shm"
mount -t hugetlbfs hugetlbfs "$root/dev/hugepages"
# The host's iproute2 does the setup, one batch per tool (a process start
# costs ~0.1 s under TCG). Absolute paths: busybox chroot prefers its applets.
tool() {
	for d in /usr/sbin /usr/bin /sbin /bin; do
		[ -x "$root$d/$1" ] && echo "$d/$1" && return
	done
	fail "no $1 in the host's root (iproute2)"
}
ip=$(tool ip) rdma=$(tool rdma) tc=$(tool tc)
hroot() { chroot "$root" "$@"; }

# Interfaces created from here on inherit "default": no reverse-path filter,
# accept packets from a local source address (both ends are local).
for c in all default lo; do
	echo 0 >/proc/sys/net/ipv4/conf/$c/rp_filter
	echo 1 >/proc/sys/net/ipv4/conf/$c/accept_local
done
# Two endpoints on one host: force 10.0.0.1 <-> 10.0.0.2 over the veth pair
# instead of the local shortcut through lo, which rxe drops: the local table
# moves behind two rules that route each direction out of its veth, and
# fixed MAC addresses allow permanent neighbour entries in the same batch.
m0=02:00:0a:00:00:01
m1=02:00:0a:00:00:02
hroot "$ip" -batch - <<EOF_IP || fail "network setup failed"
link set lo up
link add veth0 address $m0 mtu $mtu type veth peer name veth1 address $m1 mtu $mtu
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
neigh replace 10.0.0.2 lladdr $m1 dev veth0 nud permanent
neigh replace 10.0.0.1 lladdr $m0 dev veth1 nud permanent
EOF_IP
if [ -n "$netem" ]; then
	# Both directions of the "wire": each veth's egress.
	printf 'qdisc add dev %s root netem %s\n' veth0 "$netem" veth1 "$netem" |
		hroot "$tc" -batch - || fail "tc netem $netem failed"
	say "netem $netem on veth0 and veth1"
fi
note "network set up"
printf 'link add rxe%s type rxe netdev veth%s\n' 0 0 1 1 | hroot "$rdma" -b - ||
	fail "rdma link add rxe0/rxe1 failed"

# Wait for both ports to be ACTIVE and for the IPv4 RoCE v2 GIDs (the table
# fills in asynchronously): the index where rxe0 shows 10.0.0.1 and rxe1
# 10.0.0.2. Builtins only (read), a process start costs ~0.1 s under TCG.
rd() { v=""; read -r v <"$1" 2>/dev/null; }
ib=/sys/class/infiniband
gid_index=""
i=0
while [ $i -lt 400 ]; do
	rd $ib/rxe0/ports/1/state; s0=$v
	rd $ib/rxe1/ports/1/state; s1=$v
	if [ "$s0" = "4: ACTIVE" ] && [ "$s1" = "4: ACTIVE" ]; then
		for n in 0 1 2 3 4 5 6 7; do
			rd $ib/rxe0/ports/1/gids/$n; g0=$v
			rd $ib/rxe1/ports/1/gids/$n; g1=$v
			rd $ib/rxe1/ports/1/gid_attrs/types/$n; t=$v
			case "$g0/$g1/$t" in
			*:ffff:0a00:0001/*:ffff:0a00:0002/"RoCE v2") gid_index=$n && break ;;
			esac
		done
		[ -n "$gid_index" ] && break
	fi
	i=$((i + 1))
	sleep 0.05
done
[ -n "$gid_index" ] || fail "rxe0/rxe1 not ACTIVE with an IPv4 RoCE v2 GID after 20 s ($s0, $s1)"
say "rxe0/rxe1 active, GID index $gid_index"

# The host's current directory, read-write, at the same path.
read -r cwd </share/cwd
# Under /tmp or /run (fresh tmpfs in the guest) its mount point is created.
[ -n "$cwd" ] && [ "$cwd" != / ] && mkdir -p "$root$cwd" 2>/dev/null
if [ -n "$cwd" ] && [ "$cwd" != / ] && [ -d "$root$cwd" ]; then
	mkdir -p /tmp/cwd
	mount -t 9p -o trans=virtio,version=9p2000.L cwd /tmp/cwd && mount --bind /tmp/cwd "$root$cwd"
fi

mkdir /share/started
chroot "$root" /usr/bin/env URPC_RXE_VM=1 URPC_RXE_SERVER_IP=10.0.0.1 URPC_RXE_CLIENT_IP=10.0.0.2 \
	URPC_RXE_GID_INDEX="$gid_index" HOME=/root \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/bin/sh -c "$(cat /share/cmd)"
echo $? >/share/status
note "COMMAND done"
off
