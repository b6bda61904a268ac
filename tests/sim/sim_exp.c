/* SPDX-License-Identifier: MIT */
/* The congestion experiments (issue 32): not written yet; --experiment says so. */
#include <stdio.h>

#include "sim.h"

int sim_exp_parse(const char *name, int *exp)
{
	*exp = 0;
	return 0;
}

int sim_exp_run(int exp, const char *cc, const char *csv)
{
	fprintf(stderr, "urpc-sim: --experiment is not built yet\n");
	return 2;
}
