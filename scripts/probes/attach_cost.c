// What attaching to an agent and forming a team cost a client: one
// dp_init + dp_finalize, and one dp_team_create + dp_team_destroy of a
// one-member team (board, views and their private window included), on an
// agent already running. Not part of deputy's tests: a stand-alone probe
// for docs/PERFORMANCE.md. Prints, per round of 200, the median and 90th
// percentile of each, in microseconds.
//
// Build and run against a build's library and agent:
//   cc -O2 -Iinclude -Ibuild/generated -o /tmp/attach_cost scripts/probes/attach_cost.c \
//      -Lbuild -ldeputy -Wl,-rpath,$PWD/build
//   build/tools/deputy agent --daemon --socket /tmp/ac/agent.sock
//   DEPUTY_AGENT=/tmp/ac/agent.sock /tmp/attach_cost
#include <deputy/deputy.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 5, PER_ROUND = 200 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, int round, double *us) {
    qsort(us, PER_ROUND, sizeof *us, compare);
    printf("round %d %-28s median %8.1f us  p90 %8.1f us\n", round, what, us[PER_ROUND / 2],
           us[PER_ROUND * 9 / 10]);
}

int main(void) {
    dp_config_t config = DP_CONFIG_INITIALIZER;
    config.pool_bytes = 1 << 20;
    config.job_secret = "attach-cost-probe";
    double us[PER_ROUND];
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER_ROUND; i++) {
            dp_context_t *ctx;
            const double t0 = now_us();
            if (dp_init(&config, &ctx) != DP_OK) return 1;
            dp_finalize(ctx);
            us[i] = now_us() - t0;
        }
        report("dp_init + dp_finalize", round, us);
        dp_context_t *ctx;
        if (dp_init(&config, &ctx) != DP_OK) return 1;
        for (int i = 0; i < PER_ROUND; i++) {
            char key[64];
            snprintf(key, sizeof key, "attach-cost-%d-%d", round, i);
            dp_team_t *team;
            const double t0 = now_us();
            if (dp_team_create(ctx, key, 0, 1, &team) != DP_OK) return 1;
            dp_team_destroy(team);
            us[i] = now_us() - t0;
        }
        report("team create + destroy", round, us);
        dp_finalize(ctx);
    }
    return 0;
}
