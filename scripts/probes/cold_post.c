// Where the host CPU of a large offloaded iallreduce goes: is it deputy's
// post and test, or the caches and TLB the agent's stream emptied? Not part
// of deputy's tests: a stand-alone probe for docs/PERFORMANCE.md.
//
// Each of two ranks times, in TSC nanoseconds (median over the rounds) and
// in CPU time (CLOCK_THREAD_CPUTIME_ID, its own cost subtracted), the post
// of an iallreduce, the dp_test that first sees it done, and dp_request_free,
// in four cases:
//   big:     64 MiB, the host sleeps while the agent streams 192 MiB;
//   evicted: 16 B, after the host itself swept 192 MiB of its own memory
//            (caches and TLB as cold as in "big", without any agent work);
//   slept:   16 B, after a 20 ms sleep (whatever else ran on the vCPU);
//   warm:    16 B, back to back.
// If "evicted" costs what "big" does, the price is the lines and pages the
// calls touch, not the operation's size.
//
// Build and run (an agent that never sleeps, as on a core of its own):
//   cc -O2 -Iinclude -Ibuild/generated -o /tmp/cold_post scripts/probes/cold_post.c -Lbuild -ldeputy
//   echo '{"agent": {"idle_spin_us": 1000000, "max_pool_bytes": 1073741824}}' > /tmp/poll.json
//   LD_LIBRARY_PATH=build build/tools/deputy launch -n 2 --agent-config /tmp/poll.json
//       -- /tmp/cold_post [rounds]   (one line with the above)
#define _GNU_SOURCE
#include <deputy/deputy.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

static double g_tsc_per_ns;
static uint64_t g_cpu_clock_cost;

static uint64_t clock_ns(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void calibrate(void) {
    uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = __rdtsc();
    while (clock_ns(CLOCK_MONOTONIC) - t0 < 50000000ull) {
    }
    g_tsc_per_ns = (double)(__rdtsc() - c0) / (double)(clock_ns(CLOCK_MONOTONIC) - t0);
    uint64_t total = 0;
    for (int i = 0; i < 2000; ++i) {
        uint64_t a = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        total += clock_ns(CLOCK_THREAD_CPUTIME_ID) - a;
    }
    g_cpu_clock_cost = total / 2000;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), by_value);
    return v[n / 2];
}

static void die(const char *what, dp_status_t s) {
    fprintf(stderr, "cold_post: %s: %s\n", what, dp_status_name(s));
    exit(1);
}

static void sleep_ns(uint64_t ns) {
    struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&t, NULL);
}

enum { kPost, kTest, kFree, kParts };

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 30;
    const char *rank_env = getenv("DEPUTY_RANK"), *size_env = getenv("DEPUTY_SIZE");
    const char *job = getenv("DEPUTY_JOB");
    if (!rank_env || !size_env) {
        fprintf(stderr, "cold_post: run under `deputy launch -n 2`\n");
        return 2;
    }
    const int rank = atoi(rank_env), size = atoi(size_env);
    calibrate();
    dp_context_t *ctx;
    dp_team_t *team;
    dp_config_t config = DP_CONFIG_INITIALIZER;
    config.pool_bytes = 160u << 20;  // the two 64 MiB operands, mapped
    dp_status_t s = dp_init(&config, &ctx);
    if (s != DP_OK) die("dp_init", s);
    char key[128];
    snprintf(key, sizeof key, "cold-post-%s", job ? job : "0");
    if ((s = dp_team_create(ctx, key, rank, size, &team)) != DP_OK) die("dp_team_create", s);

    const size_t big = 64u << 20, sweep_bytes = 192u << 20;
    float *src = dp_malloc(ctx, big), *dst = dp_malloc(ctx, big);
    unsigned char *sweep = malloc(sweep_bytes);
    if (!src || !dst || !sweep) {
        fprintf(stderr, "cold_post: no memory (the agent's pool needs 2 x 64 MiB per rank)\n");
        return 1;
    }
    memset(src, 0, big);
    memset(dst, 0, big);
    memset(sweep, 1, sweep_bytes);

    static const char *names[] = {"big 64 MiB", "evicted 16 B", "slept 16 B", "warm 16 B"};
    double tsc_ns[4][kParts][1000], cpu_ns[4][kParts][1000];
    const int n = rounds > 1000 ? 1000 : rounds;
    for (int c = 0; c < 4; ++c) {
        const size_t count = c == 0 ? big / sizeof(float) : 4;
        for (int i = -3; i < n; ++i) {  // three warm-up rounds
            if ((s = dp_barrier(team)) != DP_OK) die("dp_barrier", s);
            if (c == 1) memset(sweep, i & 0xff, sweep_bytes);
            if (c == 2) sleep_ns(20000000);
            dp_request_t *req;
            uint64_t t0 = __rdtsc(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            s = dp_iallreduce(src, dst, count, DP_FLOAT32, DP_SUM, team, &req);
            uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t1 = __rdtsc();
            if (s != DP_OK) die("dp_iallreduce", s);
            if (c == 0) sleep_ns(15000000);  // about the operation's time here
            int done = 0;
            uint64_t t2 = 0, t3 = 0, c2 = 0, c3 = 0;
            while (!done) {
                t2 = __rdtsc();
                c2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
                s = dp_test(req, &done);
                c3 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
                t3 = __rdtsc();
                if (s != DP_OK) die("dp_test", s);
                if (!done) sleep_ns(100000);
            }
            uint64_t t4 = __rdtsc(), c4 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            dp_request_free(req);
            uint64_t c5 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t5 = __rdtsc();
            if (i < 0) continue;
            tsc_ns[c][kPost][i] = (double)(t1 - t0) / g_tsc_per_ns;
            tsc_ns[c][kTest][i] = (double)(t3 - t2) / g_tsc_per_ns;
            tsc_ns[c][kFree][i] = (double)(t5 - t4) / g_tsc_per_ns;
            cpu_ns[c][kPost][i] = (double)(c1 - c0) - (double)g_cpu_clock_cost;
            cpu_ns[c][kTest][i] = (double)(c3 - c2) - (double)g_cpu_clock_cost;
            cpu_ns[c][kFree][i] = (double)(c5 - c4) - (double)g_cpu_clock_cost;
        }
    }
    for (int r = 0; r < size; ++r) {
        dp_barrier(team);
        if (r != rank) continue;
        printf("rank %d, medians of %d rounds, us (TSC | CPU time, clock cost %.2f us "
               "subtracted)\n",
               rank, n, (double)g_cpu_clock_cost / 1e3);
        printf("%-14s %16s %16s %16s %16s\n", "case", "post", "completed test", "free",
               "sum");
        for (int c = 0; c < 4; ++c) {
            double t[kParts], u[kParts];
            for (int p = 0; p < kParts; ++p) {
                t[p] = median(tsc_ns[c][p], n) / 1e3;
                u[p] = median(cpu_ns[c][p], n) / 1e3;
            }
            printf("%-14s %7.2f | %6.2f %7.2f | %6.2f %7.2f | %6.2f %7.2f | %6.2f\n", names[c],
                   t[kPost], u[kPost], t[kTest], u[kTest], t[kFree], u[kFree],
                   t[kPost] + t[kTest] + t[kFree], u[kPost] + u[kTest] + u[kFree]);
        }
        fflush(stdout);
    }
    dp_free(ctx, src);
    dp_free(ctx, dst);
    free(sweep);
    dp_team_destroy(team);
    dp_finalize(ctx);
    return 0;
}
