/* What posting a small allreduce costs in C, the baseline of the Python
 * package's per-call cost (python/deputy/README.md): a team of one on the
 * agent at argv[1], 16 floats in the shared heap, posts timed alone (the
 * wait is not), the median of 5 rounds of 20000.
 *   cc -O2 -Iinclude -o /tmp/post_cost scripts/probes/post_cost.c -Lbuild -ldeputy \
 *      -Wl,-rpath,$PWD/build && DEPUTY_JOB_SECRET=s /tmp/post_cost SOCKET */
#include <deputy/deputy.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    dp_config_t cfg = DP_CONFIG_INITIALIZER;
    cfg.agent = argc > 1 ? argv[1] : NULL;
    dp_context_t *ctx;
    dp_team_t *team;
    if (dp_init(&cfg, &ctx) != DP_OK || dp_team_create(ctx, "post-cost", 0, 1, &team) != DP_OK) {
        fprintf(stderr, "post_cost: no agent or no team\n");
        return 1;
    }
    float *x = dp_heap_alloc(64, 64, 1), *y = dp_heap_alloc(64, 64, 1);
    double rounds[5];
    for (int r = 0; r < 5; ++r) {
        double posting = 0;
        for (int i = 0; i < 20000; ++i) {
            dp_request_t *req;
            const double t = now_us();
            dp_iallreduce(x, y, 16, DP_FLOAT32, DP_SUM, team, &req);
            posting += now_us() - t;
            dp_wait(req);
            dp_request_free(req);
        }
        rounds[r] = posting / 20000;
    }
    qsort(rounds, 5, sizeof(double), cmp);
    printf("C post: %.3f us (median of 5 rounds of 20000)\n", rounds[2]);
    dp_heap_free(x);
    dp_heap_free(y);
    dp_team_destroy(team);
    dp_finalize(ctx);
    return 0;
}
