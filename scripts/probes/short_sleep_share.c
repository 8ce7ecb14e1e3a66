// Do two processes sharing one CPU get it from each other while one of them
// "sleeps" for a few microseconds? Not part of deputy's tests: a stand-alone
// probe for the own-core 64 KiB overlap dip of deputy-bench-mpi
// (docs/PERFORMANCE.md, "Short idle phases are not idle"), with no MPI and
// no deputy in the processes.
//
// Two processes pinned to CPU 0 (as `deputy mpirun --agent-cores last` puts
// both ranks of a 2-CPU machine) loop: a barrier on a shared counter,
// waiting with sched_yield as Open MPI's progress does when a core is
// oversubscribed, then a sleep of SLEEP_US (timer slack 1 ns, as the
// benchmarks' idle phases). If the sleeper gave the CPU away, the other
// process would reach the barrier meanwhile and both would spend about one
// sleep per iteration; it prints the barrier's average time, the sleep's
// average length and the CPU time each sleep cost the sleeper.
//
//   cc -O2 -o /tmp/short_sleep_share scripts/probes/short_sleep_share.c
//   /tmp/short_sleep_share 8; /tmp/short_sleep_share 30
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kIterations = 5000, kWarmup = 200 };

static double clock_us(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    const double sleep_us = argc > 1 ? atof(argv[1]) : 8.0;
    atomic_long *arrived = mmap(NULL, sizeof *arrived, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (arrived == MAP_FAILED) return perror("mmap"), 1;
    cpu_set_t cpu0;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    if (sched_setaffinity(0, sizeof cpu0, &cpu0) != 0) return perror("sched_setaffinity"), 1;
    const pid_t child = fork();
    if (child < 0) return perror("fork"), 1;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    const long ns = (long)(sleep_us * 1e3);
    double barrier = 0, slept = 0, cpu = 0;
    for (long i = 1; i <= kIterations + kWarmup; ++i) {
        const double t0 = clock_us(CLOCK_MONOTONIC);
        atomic_fetch_add(arrived, 1);
        while (atomic_load(arrived) < 2 * i) sched_yield();
        const double t1 = clock_us(CLOCK_MONOTONIC), c1 = clock_us(CLOCK_THREAD_CPUTIME_ID);
        struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
        const double t2 = clock_us(CLOCK_MONOTONIC), c2 = clock_us(CLOCK_THREAD_CPUTIME_ID);
        if (i > kWarmup) barrier += t1 - t0, slept += t2 - t1, cpu += c2 - c1;
    }
    printf("%s: sleep %.0f us asked: barrier %.1f us, sleep lasted %.1f us and cost %.1f us of "
           "CPU (averages of %d)\n",
           child ? "parent" : "child ", sleep_us, barrier / kIterations, slept / kIterations,
           cpu / kIterations, kIterations);
    if (child) waitpid(child, NULL, 0);
    return 0;
}
