/* SPDX-License-Identifier: MIT */
/*
 * The SM socket's error queue (nexus_err.h). A UDP socket that is not
 * connected hears nothing of the ICMP errors its datagrams cause unless
 * IP_RECVERR is set; then each is queued with the address the datagram
 * went to (ip(7)), and poll() reports POLLERR. A CONNECT_REQ or heartbeat
 * to a host where nothing listens on the port comes back as ICMP port
 * unreachable within a round trip: the connect can fail then rather than
 * at its time-out. Owns nothing; calls only the socket API.
 */
#include "nexus_err.h"

#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/ip_icmp.h>
#include <string.h>
#include <sys/socket.h>

int urpc__sm_err_enable(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

int urpc__sm_err_pop(int fd, struct sockaddr_in *to)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in))];
	} ctl;
	struct sockaddr_in name;
	struct msghdr m;
	struct cmsghdr *c;
	struct iovec iov;
	char data[64];

	memset(&m, 0, sizeof(m));
	memset(&name, 0, sizeof(name));
	iov.iov_base = data;
	iov.iov_len = sizeof(data);
	m.msg_name = &name;
	m.msg_namelen = sizeof(name);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		struct sock_extended_err ee;

		if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR ||
		    c->cmsg_len < CMSG_LEN(sizeof(ee)))
			continue;
		memcpy(&ee, CMSG_DATA(c), sizeof(ee));
		if (ee.ee_origin != SO_EE_ORIGIN_ICMP || ee.ee_type != ICMP_DEST_UNREACH ||
		    ee.ee_code != ICMP_PORT_UNREACH || name.sin_family != AF_INET)
			return 0;
		*to = name;
		return 1;
	}
	return 0;
}
