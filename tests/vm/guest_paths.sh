# shellcheck shell=bash
# Sourced by the scripts that run a command in the Soft-RoCE guest
# (tests/vm/rxe-vm.sh): verbs-stage.sh and apps/bench/*_vm.sh.
#
# The guest sees this machine's root read-only and the repository
# read-write, but mounts fresh file systems on /tmp, /run, /dev, /proc and
# /sys: a folder there that is not inside the repository is missing in the
# guest, and a run that writes to it fails there with "No such file or
# directory" or "Directory nonexistent", far from the cause; one elsewhere
# outside the repository is there but read-only ("Read-only file system").
#
# vm_guest_sees ROOT DIR...: return when the guest can see every DIR
# (absolute, or relative to ROOT); else say which one it cannot, and why,
# and exit 2.
#
# vm_guest_writes ROOT DIR...: the same for folders the guest writes to
# (logs, results): each must be inside ROOT, the repository.
vm_guest_sees() {
	local root=$1 d
	shift
	for d in "$@"; do
		case "$d" in /*) ;; *) d=$root/$d ;; esac
		case "$d/" in
		"$root"/*) ;;
		/tmp/* | /run/* | /dev/* | /proc/* | /sys/*)
			echo "${0##*/}: error: $d is under ${d%"${d#/*/}"} on this machine, which the" \
				"VM's guest mounts afresh: it cannot see it. Use a folder inside the" \
				"repository (for example build/vm-gcc) or elsewhere on disk outside /tmp," \
				"/run, /dev, /proc and /sys" >&2
			exit 2
			;;
		esac
	done
}

vm_guest_writes() {
	local root=$1 d r
	shift
	vm_guest_sees "$root" "$@"
	r=$(realpath -m "$root")
	for d in "$@"; do
		case "$d" in /*) ;; *) d=$root/$d ;; esac
		case "$(realpath -m "$d")/" in
		"$r"/*) ;;
		*)
			echo "${0##*/}: error: $d is outside the repository ($r), which is all the VM's" \
				"guest may write to (it sees the rest of this machine read-only). Use a" \
				"folder inside the repository (for example build/vm-gcc/out)" >&2
			exit 2
			;;
		esac
	done
}
