// Does an offloaded iallreduce progress while its ranks sleep, iteration by
// iteration, with no MPI in the processes? Not part of deputy's tests: a
// stand-alone probe for the overlap dips of `deputy bench coll --compute
// idle` (docs/PERFORMANCE.md), which shows only averages per size.
//
// Each rank measures the operation's pure time (post + wait, median of 50),
// then for each iteration: dp_barrier, post, sleep for the pure time, a
// dp_test (done yet?), the wait. It prints how many operations were not done
// when the rank woke, and the wait after the sleep (p50, p90, max). An
// iteration that made no progress while the rank slept waits a whole pure
// time after it.
//
// Build and run (2 ranks under a private agent):
//   cc -O2 -Iinclude -Ibuild/generated -o /tmp/overlap_probe
//       scripts/probes/overlap_probe.c -Lbuild -ldeputy -Wl,-rpath,$PWD/build  (one line)
//   build/tools/deputy launch -n 2 -- /tmp/overlap_probe [bytes] [iterations]
#define _GNU_SOURCE
#include <deputy/deputy.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kCalibration = 50, kMaxIterations = 4000 };

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void check(const char *what, dp_status_t s) {
    if (s == DP_OK) return;
    fprintf(stderr, "overlap_probe: %s: %s\n", what, dp_status_name(s));
    exit(1);
}

// Posts one iallreduce; exits on an error.
static dp_request_t *post(float *src, float *dst, size_t count, dp_team_t *team) {
    dp_request_t *req;
    check("dp_iallreduce", dp_iallreduce(src, dst, count, DP_FLOAT32, DP_SUM, team, &req));
    return req;
}

int main(int argc, char **argv) {
    const size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 262144;
    int iterations = argc > 2 ? atoi(argv[2]) : 200;
    if (iterations < 1 || iterations > kMaxIterations) iterations = kMaxIterations;
    const char *rank_env = getenv("DEPUTY_RANK"), *size_env = getenv("DEPUTY_SIZE");
    const char *job = getenv("DEPUTY_JOB");
    if (!rank_env || !size_env || bytes < 4) {
        fprintf(stderr, "overlap_probe: run under `deputy launch -n 2`, bytes >= 4\n");
        return 2;
    }
    const int rank = atoi(rank_env), size = atoi(size_env);
    // Sleep for the pure time, not 50 us more (the default timer slack):
    // what `deputy bench coll --compute idle` does too.
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    dp_context_t *ctx;
    dp_team_t *team;
    dp_config_t config = DP_CONFIG_INITIALIZER;
    config.pool_bytes = 2 * bytes + (16u << 20);
    check("dp_init", dp_init(&config, &ctx));
    char key[128];
    snprintf(key, sizeof key, "overlap-probe-%s", job ? job : "0");
    check("dp_team_create", dp_team_create(ctx, key, rank, size, &team));
    float *src = dp_malloc(ctx, bytes), *dst = dp_malloc(ctx, bytes);
    if (!src || !dst) {
        fprintf(stderr, "overlap_probe: dp_malloc of %zu bytes failed\n", bytes);
        return 1;
    }
    memset(src, 0, bytes);
    memset(dst, 0, bytes);
    const size_t count = bytes / sizeof(float);

    static double pure[kCalibration], waits[kMaxIterations], slept[kMaxIterations];
    for (int i = -10; i < kCalibration; ++i) {  // ten warm-up rounds
        check("dp_barrier", dp_barrier(team));
        const uint64_t t0 = now_ns();
        dp_request_t *req = post(src, dst, count, team);
        check("dp_wait", dp_wait(req));
        dp_request_free(req);
        if (i >= 0) pure[i] = (double)(now_ns() - t0) / 1e3;
    }
    qsort(pure, kCalibration, sizeof(double), by_value);
    const double pure_us = pure[kCalibration / 2];

    int not_done = 0;
    for (int i = 0; i < iterations; ++i) {
        check("dp_barrier", dp_barrier(team));
        const uint64_t t0 = now_ns();
        dp_request_t *req = post(src, dst, count, team);
        const struct timespec nap = {0, (long)(pure_us * 1000)};
        nanosleep(&nap, NULL);
        const uint64_t t1 = now_ns();
        int done = 0;
        check("dp_test", dp_test(req, &done));
        not_done += !done;
        check("dp_wait", dp_wait(req));
        waits[i] = (double)(now_ns() - t1) / 1e3;
        slept[i] = (double)(t1 - t0) / 1e3;
        dp_request_free(req);
    }
    qsort(waits, (size_t)iterations, sizeof(double), by_value);
    qsort(slept, (size_t)iterations, sizeof(double), by_value);
    printf("rank %d, %zu B, pure %.0f us: not done on waking %d of %d; wait after the sleep "
           "p50 %.0f p90 %.0f max %.0f us; post + sleep p50 %.0f p90 %.0f us\n",
           rank, bytes, pure_us, not_done, iterations, waits[iterations / 2],
           waits[iterations * 9 / 10], waits[iterations - 1], slept[iterations / 2],
           slept[iterations * 9 / 10]);
    dp_free(ctx, src);
    dp_free(ctx, dst);
    dp_team_destroy(team);
    dp_finalize(ctx);
    return 0;
}
