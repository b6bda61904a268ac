/* Uses only the installed public header and library. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

int main(void)
{
	enum urpc_transport_kind k;

	if (urpc_transport_parse("udp", &k) || k != URPC_TRANSPORT_UDP)
		return 1;
	if (strncmp(urpc_strerror(-ECONNRESET), "session ended", 13))
		return 2;
	printf("urpc %s\n", urpc_version());
	return 0;
}
