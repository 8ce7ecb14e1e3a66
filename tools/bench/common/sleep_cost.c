#include "bench/common/sleep_cost.h"

#include <errno.h>
#include <time.h>

static double clock_us(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct bench_sleep_cost bench_measure_sleep_cost(double asked_us, int count) {
    struct bench_sleep_cost cost = {asked_us, 0, 0};
    if (count <= 0) return cost;
    const long ns = (long)(asked_us * 1e3);
    const double wall0 = clock_us(CLOCK_MONOTONIC), cpu0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < count; ++i) {
        struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    cost.wall_us = (clock_us(CLOCK_MONOTONIC) - wall0) / count;
    cost.cpu_us = (clock_us(CLOCK_THREAD_CPUTIME_ID) - cpu0) / count;
    return cost;
}

void bench_print_sleep_cost(FILE *out, const struct bench_sleep_cost *cost) {
    fprintf(out, "# idle phases sleep: a %.0f us sleep lasts %.1f us and costs %.1f us of CPU time "
                 "here (slowest rank)\n",
            cost->asked_us, cost->wall_us, cost->cpu_us);
    if (cost->cpu_us > 2.0)
        fprintf(out, "# note: sleeping is expensive here: a compute phase shorter than about "
                     "%.0f us keeps its core busy instead of idle (docs/PERFORMANCE.md, \"Short "
                     "idle phases are not idle\")\n",
                cost->wall_us);
}
