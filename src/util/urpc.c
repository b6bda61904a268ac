/* SPDX-License-Identifier: MIT */
/* Library-wide public helpers: version, status strings, transport names. */
#include <urpc/urpc.h>

#include <errno.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

URPC_API const char *urpc_version(void)
{
	return STR(URPC_VERSION_MAJOR) "." STR(URPC_VERSION_MINOR) "." STR(URPC_VERSION_PATCH);
}

URPC_API const char *urpc_strerror(int status)
{
	switch (status) {
	case 0:
		return "success";
	case -EAGAIN:
		return "resource temporarily exhausted (no slot, credit or ring space); poll and retry";
	case -EINVAL:
		return "invalid argument";
	case -ENOMEM:
		return "out of memory";
	case -EMSGSIZE:
		return "message too large for this path";
	case -EACCES:
		return "remote access denied (wrong key or out of the registered bounds)";
	case -ETIMEDOUT:
		return "timed out";
	case -ECONNRESET:
		return "session reset";
	case -ECONNREFUSED:
		return "connection refused by the peer";
	case -EHOSTUNREACH:
		return "peer unreachable";
	case -EPERM:
		return "called from a thread that does not own the object";
	case -EBUSY:
		return "object still has live children or work in flight";
	case -ENODEV:
		return "no such device";
	case -ENOTSUP:
		return "operation not supported by this transport";
	case -EEXIST:
		return "already exists";
	case -ENOENT:
		return "not found";
	case -EIO:
		return "I/O error";
	case -EPROTO:
		return "protocol error";
	case -ECANCELED:
		return "canceled";
	}
	if (status < 0 && status > -4096)
		return strerror(-status); /* glibc's table is static and thread-safe */
	return "unknown status";
}

URPC_API const char *urpc_transport_str(enum urpc_transport_kind kind)
{
	switch (kind) {
	case URPC_TRANSPORT_DEFAULT:
		return "default";
	case URPC_TRANSPORT_LOOP:
		return "loop";
	case URPC_TRANSPORT_UDP:
		return "udp";
	case URPC_TRANSPORT_VERBS:
		return "verbs";
	case URPC_TRANSPORT_XDP:
		return "xdp";
	}
	return "?";
}

URPC_API int urpc_transport_parse(const char *name, enum urpc_transport_kind *out)
{
	static const enum urpc_transport_kind all[] = {URPC_TRANSPORT_DEFAULT, URPC_TRANSPORT_LOOP,
						       URPC_TRANSPORT_UDP, URPC_TRANSPORT_VERBS,
						       URPC_TRANSPORT_XDP};
	unsigned i;

	if (!name || !out)
		return -EINVAL;
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (!strcmp(name, urpc_transport_str(all[i]))) {
			*out = all[i];
			return 0;
		}
	}
	return -EINVAL;
}
