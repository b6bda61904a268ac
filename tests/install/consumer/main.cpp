// The public header from C++.
#include <cstdio>

#include <urpc/urpc.h>

int main()
{
	std::printf("urpc %s via C++: %s\n", urpc_version(),
		    urpc_transport_str(URPC_TRANSPORT_LOOP));
	return 0;
}
