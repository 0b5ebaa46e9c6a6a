#!/bin/sh
# in-chroot.sh ROOT DIR COMMAND [ARG...]: run COMMAND inside the chroot ROOT
# (one of scripts/debian.sh's Debian trees) with a proc filesystem on its /proc
# and the host directory DIR bind-mounted at the same path inside ("-": no
# directory), all in a mount namespace of the command's own.
#
# The mounts exist only in that namespace: nobody outside sees them, nothing
# has to unmount them, and they vanish with the last process inside (a node
# and the epmd it starts). A tree that a later `rm -rf` deletes, a CI
# runner's clean-up among them, never has a proc filesystem or a bind of the
# state dir mounted in it. Needs root (unshare, mount, chroot).
set -eu
if [ "$#" -lt 3 ]; then
	echo "usage: in-chroot.sh ROOT DIR|- COMMAND [ARG...]" >&2
	exit 2
fi
if [ "${ACEMQ_IN_CHROOT_NS:-}" != 1 ]; then
	# Once more, in a new mount namespace whose mounts propagate nowhere.
	ACEMQ_IN_CHROOT_NS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi
unset ACEMQ_IN_CHROOT_NS
root="$1"
dir="$2"
shift 2
mount -t proc proc "$root/proc"
if [ "$dir" != - ]; then
	mkdir -p "$root$dir"
	mount --bind "$dir" "$root$dir"
fi
exec chroot "$root" "$@"
