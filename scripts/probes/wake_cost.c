// What a futex sleep and wake-up costs the sleeper in CPU time on this
// machine: the platform cost a blocking dp_wait pays when the result is not
// there yet (docs/PERFORMANCE.md). Not part of deputy: a stand-alone probe.
//
// The sleeper, pinned to CPU 1, announces itself in a shared word and sleeps
// on it (FUTEX_WAIT); a waker process, after 200 us of busy waiting, flips
// the word and calls FUTEX_WAKE. The sleeper reads CLOCK_THREAD_CPUTIME_ID
// before and after. Three placements:
//   other-idle:  waker on CPU 0, nothing else on CPU 1 (the sleeper's vCPU
//                goes idle and must be woken by an IPI);
//   other-busy:  waker on CPU 0, a busy-looping process on CPU 1 (the woken
//                sleeper preempts it);
//   same:        waker on CPU 1 too (no cross-CPU wake-up).
// Usage: cc -O2 -o /tmp/wake_cost scripts/probes/wake_cost.c && /tmp/wake_cost [rounds]
// (default 2000 rounds); prints median and p90 per case. Needs 2 CPUs.
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity (needs 2 CPUs)");
        exit(1);
    }
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

enum { kSleeping = 1, kWoken = 2 };

static void run_case(const char *name, int waker_cpu, int busy_on_sleeper_cpu, int rounds) {
    uint32_t *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint64_t *cpu = malloc(sizeof(uint64_t) * (size_t)rounds);
    if (word == MAP_FAILED || cpu == NULL) {
        perror("memory");
        exit(1);
    }
    pid_t busy = 0;
    if (busy_on_sleeper_cpu) {
        busy = fork();
        if (busy == 0) {
            pin(1);
            for (;;) __asm__ volatile("" ::: "memory");
        }
    }
    pid_t waker = fork();
    if (waker == 0) {
        pin(waker_cpu);
        for (int i = 0; i < rounds; ++i) {
            const uint64_t start = clock_ns(CLOCK_MONOTONIC);
            while (clock_ns(CLOCK_MONOTONIC) - start < 200000) {
            }
            while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != kSleeping) sched_yield();
            __atomic_store_n(word, kWoken, __ATOMIC_RELEASE);
            syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
        }
        _exit(0);
    }
    pin(1);
    for (int i = 0; i < rounds; ++i) {
        const uint64_t before = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        __atomic_store_n(word, kSleeping, __ATOMIC_RELEASE);
        while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == kSleeping)
            syscall(SYS_futex, word, FUTEX_WAIT, kSleeping, NULL, NULL, 0);
        cpu[i] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - before;
    }
    waitpid(waker, NULL, 0);
    if (busy) {
        kill(busy, SIGKILL);
        waitpid(busy, NULL, 0);
    }
    qsort(cpu, (size_t)rounds, sizeof *cpu, by_value);
    printf("%-11s sleeper's CPU per sleep + wake-up: median %6.2f us, p90 %6.2f us (%d rounds)\n",
           name, (double)cpu[rounds / 2] / 1e3, (double)cpu[rounds * 9 / 10] / 1e3, rounds);
    free(cpu);
    munmap(word, 4096);
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    if (rounds < 10) {
        fprintf(stderr, "wake_cost: rounds must be at least 10\n");
        return 2;
    }
    run_case("other-idle", 0, 0, rounds);
    run_case("other-busy", 0, 1, rounds);
    run_case("same", 1, 0, rounds);
    return 0;
}
