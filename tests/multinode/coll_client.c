/* A team member for the multi-node tests: attaches to its node's agent
 * (default socket, or $DEPUTY_AGENT), joins team KEY as RANK of SIZE, and
 * runs ITERATIONS allreduces of COUNT int32 (every rank contributes
 * rank + 1 + i % 7 at element i, so the sum is known), checking every
 * result. One line per outcome on stdout:
 *   joined <seconds>
 *   ok <iterations> <seconds>
 *   error <status name> at <iteration> after <seconds since the last success>
 * Exit 0 when every iteration succeeded, 1 on an error, 2 on bad usage.
 * ITERATIONS 0: run until an error. */
#include <deputy/deputy.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s KEY RANK SIZE COUNT ITERATIONS\n", argv[0]);
        return 2;
    }
    const char *key = argv[1];
    const int rank = atoi(argv[2]), size = atoi(argv[3]);
    const size_t count = strtoull(argv[4], NULL, 10);
    const long iterations = atol(argv[5]);
    dp_context_t *ctx = NULL;
    dp_team_t *team = NULL;
    const double start = now();
    dp_status_t s = dp_init(NULL, &ctx);
    if (s == DP_OK) s = dp_team_create_timeout(ctx, key, rank, size, 20000, &team);
    if (s != DP_OK) {
        printf("error %s at join after %.3f\n", dp_status_name(s), now() - start);
        return 1;
    }
    printf("joined %.3f\n", now() - start);
    fflush(stdout);
    int32_t *buf = dp_malloc(ctx, count * sizeof(int32_t));
    if (!buf) {
        printf("error DP_ERR_NOMEM at setup after 0\n");
        return 1;
    }
    double last_ok = now();
    int rc = 0;
    for (long it = 0; iterations == 0 || it < iterations; ++it) {
        for (size_t i = 0; i < count; ++i) buf[i] = (int32_t)(rank + 1 + i % 7);
        s = dp_allreduce(buf, buf, count, DP_INT32, DP_SUM, team);
        if (s != DP_OK) {
            printf("error %s at %ld after %.3f\n", dp_status_name(s), it, now() - last_ok);
            fflush(stdout);  /* the test times the error's arrival, not our exit */
            rc = 1;
            break;
        }
        for (size_t i = 0; i < count; ++i) {
            const int32_t want = (int32_t)(size * (size + 1) / 2 + size * (int)(i % 7));
            if (buf[i] != want) {
                printf("error WRONG at %ld element %zu: %d, want %d\n", it, i, buf[i], want);
                rc = 1;
                break;
            }
        }
        if (rc) break;
        last_ok = now();
        if (it % 20 == 0) {
            printf("progress %ld\n", it);
            fflush(stdout);
        }
    }
    if (rc == 0) printf("ok %ld %.3f\n", iterations, now() - start);
    dp_free(ctx, buf);
    dp_team_destroy(team);
    dp_finalize(ctx);
    return rc;
}
