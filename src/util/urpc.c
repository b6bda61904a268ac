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

/*
 * One meaning per status, in urpc's terms; docs/API.md, "Status codes",
 * has the same table with the caller's action for each.
 */
URPC_API const char *urpc_strerror(int status)
{
	switch (status) {
	case 0:
		return "success";
	case -EAGAIN:
		return "back-pressure: no free slot, credit, queue entry, ring space or "
		       "registration (max_registrations) now; run the event loop and retry";
	case -EINVAL:
		return "invalid argument or option (the log names it)";
	case -ENOMEM:
		return "out of memory (an allocation, or the Rpc's 1 GiB message-buffer pool)";
	case -EMSGSIZE:
		return "message too large (above URPC_MAX_MSG_SIZE, or the response above its "
		       "buffer)";
	case -EACCES:
		return "remote memory access refused (wrong or revoked key, outside the exposed "
		       "bytes, or access not granted)";
	case -ETIMEDOUT:
		return "timed out (the request's deadline, the connect time-out or the "
		       "one-sided time-out passed)";
	case -ECONNRESET:
		return "session ended (reset by the peer, its Rpc gone, or disconnected here)";
	case -EHOSTDOWN:
		return "peer process failed: no heartbeat between the two processes within "
		       "peer_timeout_ms";
	case -ESTALE:
		return "peer process restarted: sessions with the old process are gone";
	case -ECONNREFUSED:
		return "connect refused: no urpc Nexus answers at that address";
	case -EHOSTUNREACH:
		return "peer unreachable";
	case -ENOENT:
		return "no such Rpc: the peer's Nexus has no Rpc with that id";
	case -ENOSYS:
		return "no handler for this request type on the server";
	case -ENOSPC:
		return "too many sessions (max_sessions, or max_sessions_per_source on the "
		       "server)";
	case -EADDRNOTAVAIL:
		return "address mismatch: the client's endpoint is not on the address its "
		       "connect came from";
	case -ENOTCONN:
		return "session not connected yet";
	case -EPERM:
		return "called from a thread that does not own the Rpc";
	case -EBUSY:
		return "still in use: live children, lent buffers or work in flight";
	case -ENODEV:
		return "no usable RDMA device or port";
	case -ENOTSUP:
		return "not supported by this transport or build";
	case -EEXIST:
		return "already exists (an Rpc id or a handler's request type)";
	case -EADDRINUSE:
		return "address in use: another process holds that port";
	case -EIO:
		return "transport or device I/O error (a payload could not be moved)";
	case -EPROTO:
		return "protocol mismatch (another transport, or a malformed packet)";
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
