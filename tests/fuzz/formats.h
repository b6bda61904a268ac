/* SPDX-License-Identifier: MIT */
/*
 * The input formats of the fuzz targets that read more than raw bytes:
 * command and patch codes, shared by the targets and by gen_corpus.c, which
 * writes the seed corpus in them. Owns nothing; header-only; no calls.
 *
 * fuzz_datapath: a program of commands, each an opcode byte (taken modulo
 * DP_NCMD) and its arguments, little-endian; see fuzz_datapath.c.
 *   DP_SRV_PKT, DP_CLI_PKT  patch u8 (DP_P_*), sel u8, len u16, len bytes:
 *                           a datagram handed to the server's (client's)
 *                           urpc__evloop_rx
 *   DP_ENQUEUE              type u8, size u16, resp_size u16, timeout_ms u8:
 *                           the client enqueues a real request
 *   DP_PUMP                 n u8: both event loops run n % 8 + 1 passes
 *   DP_ADVANCE              ms u8: the virtual clock moves on
 *   DP_ANSWER               size u16: every deferred request is answered
 *   DP_SM                   patch u8 (DP_S_*), sel u8, len u8, len bytes:
 *                           a session-management datagram for the Nexus
 *   DP_DISCONNECT           (none): the client disconnects its session
 *
 * fuzz_udp_os: three setup bytes and operation descriptions, then records
 * (patch u8 (UDP_P_*), sel u8, len u16, len bytes); see fuzz_udp_os.c.
 */
#ifndef URPC_TESTS_FUZZ_FORMATS_H
#define URPC_TESTS_FUZZ_FORMATS_H

#ifdef __cplusplus
extern "C" {
#endif

enum dp_cmd {
	DP_SRV_PKT = 0,
	DP_CLI_PKT = 1,
	DP_ENQUEUE = 2,
	DP_PUMP = 3,
	DP_ADVANCE = 4,
	DP_ANSWER = 5,
	DP_SM = 6,
	DP_DISCONNECT = 7,
	DP_NCMD = 8,
};

/* Request types the fuzz server handles (0 and others have no handler). */
enum dp_req_type {
	DP_T_ECHO = 1,	/* answers with the request's bytes */
	DP_T_DEFER = 2, /* answers later: DP_ANSWER, or at the end of the input */
	DP_T_LARGE = 3, /* answers with a large response from a buffer of its own */
	DP_T_COPY = 4,	/* answers from a small buffer of its own (copied by the library) */
	DP_NTYPES = 5,
};

/* Patches of a datagram header (struct urpc_pkthdr), applied in this order. */
enum dp_pkt_patch {
	DP_P_HDR = 0x01,  /* magic, version, and the type the receiver expects */
	DP_P_SESS = 0x02, /* the receiver's session number and the session token */
	DP_P_SIZE = 0x04, /* msg_size agrees with the datagram's length */
	/*
	 * req_num relative to the receiver's slot sel & 7: the same number
	 * ((sel >> 3) & 3 == 0), the next (1), the previous (2), or
	 * 1 + (sel >> 5) numbers ahead (3).
	 */
	DP_P_REQ = 0x08,
	DP_P_TYPE = 0x10, /* req_type taken modulo DP_NTYPES */
	/*
	 * A large message: F_LARGE, and a descriptor of a piece of the other
	 * side's exposed buffer (its address, a length that fits, the key of a
	 * grant of those bytes to the session's peer);
	 * the datagram becomes header + descriptor.
	 */
	DP_P_DESC = 0x20,
	DP_P_CLEAR_FLAGS = 0x40, /* flags 0: a plain message */
};

/* Patches of an SM datagram (the wire layout of src/nexus/sm.c). */
enum dp_sm_patch {
	DP_S_FROM_NEXUS = 0x01, /* sent from the Nexus's own address (else a stranger's) */
	DP_S_HDR = 0x02,	/* magic, version, reserved byte, a small status code */
	DP_S_TYPE = 0x04,	/* type 1 + sel % URPC_SM_PKT_WIRE_MAX */
	DP_S_IDS = 0x08,	/* Rpc ids, session numbers and token of the live session */
	DP_S_EP = 0x10,		/* transport, and the endpoint of the side that would send it */
	DP_S_LEN = 0x20,	/* the length that ep_len implies */
	DP_S_COOKIE = 0x40,	/* the connect cookie the Nexus gives the sender's address */
};

/* fuzz_udp_os record patches. */
enum udp_patch {
	UDP_P_FROM_PEER = 0x01, /* sent by the resolved peer (else by a stranger) */
	UDP_P_HDR = 0x02,	/* valid magic and version */
	UDP_P_OP_ID = 0x04,	/* op_id names a posted operation (index | generation 1) */
	UDP_P_RKEY = 0x08,	/* ext.key of (open) registration sel % 3 */
	UDP_P_RADDR = 0x10,	/* ext.raddr inside that registration */
	UDP_P_RANGE = 0x20,	/* ext.len and chunk_size in range; chunk inside the range */
	UDP_P_FIT = 0x40,	/* the datagram's length is what its type and fields say */
};

/* udp.c's datagram types (its wire layout). */
enum udp_wire_type {
	UDP_W_DATA = 1,
	UDP_W_RD_REQ = 2,
	UDP_W_RD_DATA = 3,
	UDP_W_WR_DATA = 4,
	UDP_W_WR_ACK = 5,
	UDP_W_NAK = 6,
};

#ifdef __cplusplus
}
#endif

#endif /* URPC_TESTS_FUZZ_FORMATS_H */
