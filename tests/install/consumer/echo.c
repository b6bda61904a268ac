/* echo.c: one urpc server and one client in one thread. Prints "echo: hello". */
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#define ECHO 1 /* request type */

/* Server side: runs inside the event loop, once per request. */
static void echo(struct urpc_req_handle *h, void *arg)
{
	size_t len;
	const void *data = urpc_req_data(h, &len);
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);

	memcpy(resp->buf, data, len);
	urpc_msgbuf_resize(resp, len);
	urpc_resp_enqueue(h, resp);
}

/* Client side: runs once per request, with the response or an error. */
static void done(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	if (status)
		printf("failed: %s\n", urpc_strerror(status));
	else
		printf("echo: %.*s\n", (int)resp->data_size, (char *)resp->buf);
	*(int *)tag = status ? status : 1;
}

int main(void)
{
	struct urpc_nexus_opts no;
	struct urpc_nexus *nx;
	struct urpc_rpc *server, *client;
	struct urpc_msgbuf req, resp;
	char addr[32];
	int sess, result = 0, i;

	urpc_nexus_opts_init(&no); /* 127.0.0.1, a free port */
	if (urpc_nexus_create(&no, &nx) || urpc_nexus_register_handler(nx, ECHO, echo, NULL) ||
	    urpc_rpc_create(nx, 0, NULL, &server) || urpc_rpc_create(nx, 1, NULL, &client))
		return 1;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", urpc_nexus_port(nx));
	if (urpc_session_connect(client, addr, 0, &sess) || urpc_msgbuf_alloc(client, 5, &req) ||
	    urpc_msgbuf_alloc(client, 64, &resp))
		return 1;
	memcpy(req.buf, "hello", 5);
	/* Sent once the session connects; 1000 ms to answer. */
	if (urpc_req_enqueue(client, sess, ECHO, &req, &resp, done, &result, 1000))
		return 1;
	for (i = 0; i < 500 && !result; i++) { /* both Rpcs belong to this thread */
		urpc_rpc_run_event_loop(server, 1);
		urpc_rpc_run_event_loop(client, 1);
	}
	urpc_msgbuf_free(client, &req);
	urpc_msgbuf_free(client, &resp);
	urpc_session_disconnect(client, sess);
	for (i = 0; i < 50; i++) {
		urpc_rpc_run_event_loop(server, 1);
		urpc_rpc_run_event_loop(client, 1);
	}
	if (urpc_rpc_destroy(client) || urpc_rpc_destroy(server) || urpc_nexus_destroy(nx))
		return 1;
	return result == 1 ? 0 : 1;
}
