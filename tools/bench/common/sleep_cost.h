/* What an idle compute phase really costs on this machine.
 *
 * The OSU method's idle mode sleeps through the compute phase so that
 * whoever else needs the core (the agent, a rank sharing it) gets it. A
 * sleep is not free: the kernel arms a timer and takes its interrupt, and
 * in a virtual machine both can cost more than a short phase lasts. On the
 * machine these benchmarks were first run on (a Firecracker VM, Linux
 * 6.18, lapic-deadline timer) every sleep cost 13-26 us of CPU time in the
 * kernel, charged to the sleeper, whatever its length: a phase of 8 us
 * kept its core busy for ~22 us, and a rank sharing that core could not
 * run meanwhile (docs/PERFORMANCE.md, "Short idle phases are not idle").
 * The benchmarks measure it at start and print it, so a reader knows below
 * which compute time "idle" rows are not idle. */
#pragma once

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bench_sleep_cost {
    double asked_us; /* the sleep asked for */
    double wall_us;  /* how long one lasted, on average */
    double cpu_us;   /* CPU time (user + kernel) the sleeping thread spent per sleep */
};

/* Sleeps `count` times for `asked_us` (with the caller's timer slack) on
 * the calling thread and returns the averages. */
struct bench_sleep_cost bench_measure_sleep_cost(double asked_us, int count);

/* The banner's "# " lines about it: the figures, and a note when sleeping
 * costs more than a couple of microseconds of CPU. */
void bench_print_sleep_cost(FILE *out, const struct bench_sleep_cost *cost);

#ifdef __cplusplus
}
#endif
