/* SPDX-License-Identifier: MIT */
/* Compiler helpers shared by every layer. Header-only, libc only. */
#ifndef URPC_UTIL_COMPILER_H
#define URPC_UTIL_COMPILER_H

#include <assert.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define URPC_CACHELINE 64
#define URPC_CACHE_ALIGNED __attribute__((aligned(URPC_CACHELINE)))
#define URPC_FALLTHROUGH __attribute__((fallthrough))
/* A rare path kept out of line, so that its caller stays small enough to inline. */
#define URPC_COLD __attribute__((cold, noinline))
/* For a small hot function with few callers, where the call itself costs. */
#define URPC_ALWAYS_INLINE __attribute__((always_inline))
/*
 * Keep the value of @x in a register from here on: GCC otherwise computes
 * the address of a slot in a session again at each use inside the large,
 * fully inlined event-loop pass (callgrind on urpc-cpu-cost: 28
 * instructions per RPC). Emits nothing.
 */
#define URPC_KEEP(x) __asm__("" : "+r"(x))
#define URPC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#endif

#define URPC_IS_POW2(x) ((x) != 0 && (((x) & ((x)-1)) == 0))
#define URPC_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))

#define URPC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define URPC_MAX(a, b) ((a) > (b) ? (a) : (b))

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_COMPILER_H */
