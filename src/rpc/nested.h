/* SPDX-License-Identifier: MIT */
/*
 * Deadlines that follow nested calls (nested.c): the public
 * urpc_req_deadline_ms() and urpc_req_enqueue_nested(), declared in
 * urpc.h. Nothing internal is offered to the files above.
 */
#ifndef URPC_RPC_NESTED_H
#define URPC_RPC_NESTED_H

#include "engine.h"

#endif /* URPC_RPC_NESTED_H */
