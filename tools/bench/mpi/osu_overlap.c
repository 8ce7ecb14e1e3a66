/* deputy-bench-mpi: the OSU method on an unmodified MPI program.
 *
 * Measures an MPI collective, or a halo-style exchange (each rank sends
 * to the next rank and receives from the previous one: MPI_Irecv + MPI_Isend,
 * blocking: MPI_Sendrecv), the way OSU's micro-benchmarks do (pure
 * communication time; then post, compute as long, wait: Overall, Compute,
 * Overlap %), on ordinary malloc'ed buffers, through two entry points in
 * the same processes, alternating per size (blocking forms: in alternating
 * rounds within each size, measure_blocking):
 *   mpi   MPI_Ixxx    whatever the program is linked or preloaded with
 *                     (libdeputy-mpi offloads it; without it, plain MPI)
 *   pmpi  PMPI_Ixxx   always the MPI library itself: the baseline
 * The benchmark's own bookkeeping (barriers, averages) uses PMPI_ so that
 * only the measured calls go through an interposed library.
 *
 *   mpirun -np 2 -x LD_PRELOAD=libdeputy-mpi-openmpi.so -x DEPUTY_AGENT=... \
 *       deputy-bench-mpi-openmpi --op iallreduce -m 64k:16m --json out.json
 *
 * Only <mpi.h>: this is the code the library must serve unchanged. */
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "bench/common/sleep_cost.h"

/* The nonblocking forms first, then the blocking ones in the same order
 * (timed alone: no compute, no overlap). Rooted ones at root 0; the vector
 * forms with equal counts (the plain forms' layouts). */
enum op {
    IALLREDUCE, IREDUCE_SCATTER, IALLGATHER, IALLTOALL, IBCAST, IREDUCE, IGATHER, ISCATTER,
    ISCAN, IEXSCAN, IALLGATHERV, IGATHERV, ISCATTERV, IEXCHANGE,
    ALLREDUCE, REDUCE_SCATTER, ALLGATHER, ALLTOALL, BCAST, REDUCE, GATHER, SCATTER,
    SCAN, EXSCAN, ALLGATHERV, GATHERV, SCATTERV, EXCHANGE, OP_COUNT
};
#define FIRST_BLOCKING ALLREDUCE
static const char *const op_names[OP_COUNT] = {
    "iallreduce", "ireduce_scatter", "iallgather", "ialltoall", "ibcast", "ireduce", "igather",
    "iscatter", "iscan", "iexscan", "iallgatherv", "igatherv", "iscatterv", "iexchange",
    "allreduce",  "reduce_scatter",  "allgather",  "alltoall",  "bcast", "reduce", "gather",
    "scatter", "scan", "exscan", "allgatherv", "gatherv", "scatterv", "exchange"};
_Static_assert(OP_COUNT == 2 * FIRST_BLOCKING, "each nonblocking form and its blocking one");
/* The nonblocking form of an operation (the shapes below go by it). */
static enum op nonblocking_form(enum op op) {
    return op >= FIRST_BLOCKING ? (enum op)(op - FIRST_BLOCKING) : op;
}
/* Reductions (floats summed), operations whose send buffer holds a block
 * per rank, and those whose receive buffer does. */
static int op_reduces(enum op op) {
    const enum op n = nonblocking_form(op);
    return n == IALLREDUCE || n == IREDUCE_SCATTER || n == IREDUCE || n == ISCAN || n == IEXSCAN;
}
static int op_sends_blocks(enum op op) {
    const enum op n = nonblocking_form(op);
    return n == IREDUCE_SCATTER || n == IALLTOALL || n == ISCATTER || n == ISCATTERV;
}
static int op_receives_blocks(enum op op) {
    const enum op n = nonblocking_form(op);
    return n == IALLGATHER || n == IALLTOALL || n == IGATHER || n == IALLGATHERV || n == IGATHERV;
}

/* MPI_Wait, or MPI_Waitany / MPI_Waitsome on the one request (as a
 * program that waits for the first of several would): the library treats
 * them differently (docs/mpi.md, "Requests"). */
enum wait_call { WAIT, WAITANY, WAITSOME, WAIT_CALL_COUNT };
static const char *const wait_names[WAIT_CALL_COUNT] = {"wait", "waitany", "waitsome"};

struct options {
    enum op op;
    size_t min_bytes, max_bytes;
    int iterations, warmup;
    int idle; /* compute by sleeping (a spare core for whoever wants it) */
    enum wait_call wait; /* how a nonblocking operation is completed */
    const char *json;
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* OSU's compute: a busy loop (every core stays busy), or a sleep. */
static volatile double sink;
static void compute_for(double us, int idle) {
    const double end = now_us() + us;
    if (idle) {
        struct timespec ts;
        const double left = us * 1e3;
        ts.tv_sec = (time_t)(left / 1e9);
        ts.tv_nsec = (long)(left - (double)ts.tv_sec * 1e9);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        return;
    }
    double x = 1.0;
    while (now_us() < end)
        for (int i = 0; i < 200; ++i) x = x * 1.0000001 + 1e-9;
    sink = x;
}

static size_t parse_size(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end && (*end == 'k' || *end == 'K')) v *= 1024;
    if (end && (*end == 'm' || *end == 'M')) v *= 1024 * 1024;
    return (size_t)v;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--op OP] [-m MIN:MAX bytes, k/m suffixes] [-i iterations]\n"
                    "          [-x warm-up] [--compute cpu|idle] [--wait wait|waitany|waitsome]\n"
                    "          [--json FILE]\n"
                    "       %s --list-ops   (the operations, one per line; no MPI needed)\n"
                    "OP:", argv0, argv0);
    for (int i = 0; i < OP_COUNT; ++i) fprintf(stderr, " %s", op_names[i]);
    fprintf(stderr, "\n");
}

static int parse(int argc, char **argv, struct options *o) {
    o->op = IALLREDUCE;
    o->min_bytes = 64 * 1024;
    o->max_bytes = 4 * 1024 * 1024;
    o->iterations = 20;
    o->warmup = 5;
    o->idle = 0;
    o->wait = WAIT;
    o->json = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--op") && v) {
            int found = 0;
            for (int k = 0; k < OP_COUNT; ++k)
                if (!strcmp(v, op_names[k])) o->op = (enum op)k, found = 1;
            if (!found) return fprintf(stderr, "--op %s: unknown operation\n", v), 0;
            ++i;
        } else if (!strcmp(a, "-m") && v) {
            const char *colon = strchr(v, ':');
            o->min_bytes = parse_size(v);
            o->max_bytes = colon ? parse_size(colon + 1) : o->min_bytes;
            ++i;
        } else if (!strcmp(a, "-i") && v) {
            o->iterations = atoi(v), ++i;
        } else if (!strcmp(a, "-x") && v) {
            o->warmup = atoi(v), ++i;
        } else if (!strcmp(a, "--compute") && v) {
            if (strcmp(v, "cpu") && strcmp(v, "idle"))
                return fprintf(stderr, "--compute %s: cpu or idle\n", v), 0;
            o->idle = !strcmp(v, "idle"), ++i;
        } else if (!strcmp(a, "--wait") && v) {
            int found = 0;
            for (int k = 0; k < WAIT_CALL_COUNT; ++k)
                if (!strcmp(v, wait_names[k])) o->wait = (enum wait_call)k, found = 1;
            if (!found) return fprintf(stderr, "--wait %s: wait, waitany or waitsome\n", v), 0;
            ++i;
        } else if (!strcmp(a, "--json") && v) {
            o->json = v, ++i;
        } else {
            return 0;
        }
    }
    if (o->iterations < 1 || o->warmup < 0 || o->min_bytes < 4 || o->max_bytes < o->min_bytes)
        return fprintf(stderr, "need -i >= 1, -x >= 0 and 4 <= MIN <= MAX bytes\n"), 0;
    return 1;
}

struct buffers {
    void *send, *recv;
    int count; /* elements per block */
    int *counts, *displs; /* the vector forms': count each, blocks back to back */
    int next, previous;   /* the exchange's partners */
};

/* The operations added with reduce, gather, scatter, scan and the vector
 * forms, as post() below. */
static int post_more(int via, enum op op, struct buffers *b, MPI_Request *req) {
    const int n = b->count;
    const MPI_Comm w = MPI_COMM_WORLD;
    void *s = b->send, *r = b->recv;
    const int *c = b->counts, *d = b->displs;
    if (op >= FIRST_BLOCKING) *req = MPI_REQUEST_NULL;
    switch (op) {
        case IREDUCE:
            return via ? PMPI_Ireduce(s, r, n, MPI_FLOAT, MPI_SUM, 0, w, req)
                       : MPI_Ireduce(s, r, n, MPI_FLOAT, MPI_SUM, 0, w, req);
        case IGATHER:
            return via ? PMPI_Igather(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w, req)
                       : MPI_Igather(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w, req);
        case ISCATTER:
            return via ? PMPI_Iscatter(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w, req)
                       : MPI_Iscatter(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w, req);
        case ISCAN:
            return via ? PMPI_Iscan(s, r, n, MPI_FLOAT, MPI_SUM, w, req)
                       : MPI_Iscan(s, r, n, MPI_FLOAT, MPI_SUM, w, req);
        case IEXSCAN:
            return via ? PMPI_Iexscan(s, r, n, MPI_FLOAT, MPI_SUM, w, req)
                       : MPI_Iexscan(s, r, n, MPI_FLOAT, MPI_SUM, w, req);
        case IALLGATHERV:
            return via ? PMPI_Iallgatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, w, req)
                       : MPI_Iallgatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, w, req);
        case IGATHERV:
            return via ? PMPI_Igatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, 0, w, req)
                       : MPI_Igatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, 0, w, req);
        case ISCATTERV:
            return via ? PMPI_Iscatterv(s, c, d, MPI_CHAR, r, n, MPI_CHAR, 0, w, req)
                       : MPI_Iscatterv(s, c, d, MPI_CHAR, r, n, MPI_CHAR, 0, w, req);
        case REDUCE:
            return via ? PMPI_Reduce(s, r, n, MPI_FLOAT, MPI_SUM, 0, w)
                       : MPI_Reduce(s, r, n, MPI_FLOAT, MPI_SUM, 0, w);
        case GATHER:
            return via ? PMPI_Gather(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w)
                       : MPI_Gather(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w);
        case SCATTER:
            return via ? PMPI_Scatter(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w)
                       : MPI_Scatter(s, n, MPI_CHAR, r, n, MPI_CHAR, 0, w);
        case SCAN:
            return via ? PMPI_Scan(s, r, n, MPI_FLOAT, MPI_SUM, w)
                       : MPI_Scan(s, r, n, MPI_FLOAT, MPI_SUM, w);
        case EXSCAN:
            return via ? PMPI_Exscan(s, r, n, MPI_FLOAT, MPI_SUM, w)
                       : MPI_Exscan(s, r, n, MPI_FLOAT, MPI_SUM, w);
        case ALLGATHERV:
            return via ? PMPI_Allgatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, w)
                       : MPI_Allgatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, w);
        case GATHERV:
            return via ? PMPI_Gatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, 0, w)
                       : MPI_Gatherv(s, n, MPI_CHAR, r, c, d, MPI_CHAR, 0, w);
        case SCATTERV:
            return via ? PMPI_Scatterv(s, c, d, MPI_CHAR, r, n, MPI_CHAR, 0, w)
                       : MPI_Scatterv(s, c, d, MPI_CHAR, r, n, MPI_CHAR, 0, w);
        case IEXCHANGE: {
            /* The receive first, as halo codes post them. */
            const int rc = via ? PMPI_Irecv(r, n, MPI_CHAR, b->previous, 0, w, &req[0])
                               : MPI_Irecv(r, n, MPI_CHAR, b->previous, 0, w, &req[0]);
            if (rc != MPI_SUCCESS) return rc;
            return via ? PMPI_Isend(s, n, MPI_CHAR, b->next, 0, w, &req[1])
                       : MPI_Isend(s, n, MPI_CHAR, b->next, 0, w, &req[1]);
        }
        case EXCHANGE:
            return via ? PMPI_Sendrecv(s, n, MPI_CHAR, b->next, 0, r, n, MPI_CHAR, b->previous, 0,
                                       w, MPI_STATUS_IGNORE)
                       : MPI_Sendrecv(s, n, MPI_CHAR, b->next, 0, r, n, MPI_CHAR, b->previous, 0,
                                      w, MPI_STATUS_IGNORE);
        default:
            return MPI_ERR_ARG;
    }
}

/* One call of the operation, through MPI_ (via = 0) or PMPI_ (via = 1).
 * Nonblocking operations return their requests (req[0..1]: the exchange's
 * receive and send; a collective's, then MPI_REQUEST_NULL); blocking ones
 * complete. */
static int post(int via, enum op op, struct buffers *b, MPI_Request *req) {
    const int n = b->count;
    req[1] = MPI_REQUEST_NULL;
    switch (op) {
        case IALLREDUCE:
            return via ? PMPI_Iallreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req)
                       : MPI_Iallreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
        case IREDUCE_SCATTER:
            return via ? PMPI_Ireduce_scatter_block(b->send, b->recv, n, MPI_FLOAT, MPI_SUM,
                                                    MPI_COMM_WORLD, req)
                       : MPI_Ireduce_scatter_block(b->send, b->recv, n, MPI_FLOAT, MPI_SUM,
                                                   MPI_COMM_WORLD, req);
        case IALLGATHER:
            return via ? PMPI_Iallgather(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD, req)
                       : MPI_Iallgather(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD, req);
        case IALLTOALL:
            return via ? PMPI_Ialltoall(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD, req)
                       : MPI_Ialltoall(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD, req);
        case IBCAST:
            return via ? PMPI_Ibcast(b->recv, n, MPI_CHAR, 0, MPI_COMM_WORLD, req)
                       : MPI_Ibcast(b->recv, n, MPI_CHAR, 0, MPI_COMM_WORLD, req);
        case ALLREDUCE:
            *req = MPI_REQUEST_NULL;
            return via ? PMPI_Allreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
                       : MPI_Allreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        case REDUCE_SCATTER:
            *req = MPI_REQUEST_NULL;
            return via ? PMPI_Reduce_scatter_block(b->send, b->recv, n, MPI_FLOAT, MPI_SUM,
                                                   MPI_COMM_WORLD)
                       : MPI_Reduce_scatter_block(b->send, b->recv, n, MPI_FLOAT, MPI_SUM,
                                                  MPI_COMM_WORLD);
        case ALLGATHER:
            *req = MPI_REQUEST_NULL;
            return via ? PMPI_Allgather(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD)
                       : MPI_Allgather(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD);
        case ALLTOALL:
            *req = MPI_REQUEST_NULL;
            return via ? PMPI_Alltoall(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD)
                       : MPI_Alltoall(b->send, n, MPI_CHAR, b->recv, n, MPI_CHAR, MPI_COMM_WORLD);
        case BCAST:
            *req = MPI_REQUEST_NULL;
            return via ? PMPI_Bcast(b->recv, n, MPI_CHAR, 0, MPI_COMM_WORLD)
                       : MPI_Bcast(b->recv, n, MPI_CHAR, 0, MPI_COMM_WORLD);
        default:
            break;
    }
    return post_more(via, op, b, req);
}

/* Completes req[0..1] (each one that is not MPI_REQUEST_NULL). */
static void complete(int via, enum wait_call wait, MPI_Request *req) {
    for (int k = 0; k < 2; ++k) {
        if (req[k] == MPI_REQUEST_NULL) continue;
        int index, outcount;
        MPI_Status status[1]; /* not MPI_STATUSES_IGNORE: MPICH's header declares 1 status written */
        switch (wait) {
            case WAITANY:
                if (via) PMPI_Waitany(1, &req[k], &index, MPI_STATUS_IGNORE);
                else MPI_Waitany(1, &req[k], &index, MPI_STATUS_IGNORE);
                break;
            case WAITSOME:
                if (via) PMPI_Waitsome(1, &req[k], &outcount, &index, status);
                else MPI_Waitsome(1, &req[k], &outcount, &index, status);
                break;
            case WAIT:
            case WAIT_CALL_COUNT:
                if (via) PMPI_Wait(&req[k], MPI_STATUS_IGNORE);
                else MPI_Wait(&req[k], MPI_STATUS_IGNORE);
        }
    }
}

struct result {
    double pure_us, overall_us, compute_us, overlap_pct;
    /* Inside the post and the wait of the Overall loop (OSU's Coll. Init
     * and Wait): with the ranks idle, overlap is 100 - 100 (post + wait) /
     * pure, so these say what keeps a small operation from overlapping. */
    double post_us, wait_us;
};

static double world_average(double v) {
    int size;
    double sum = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / size;
}

/* Blocking forms: rounds per size (measure_blocking). */
enum { ROUNDS = 10 };

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double sorted[ROUNDS];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_doubles);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/* A blocking operation, MPI_ against PMPI_: in rounds that run a share of
 * the iterations through each, back to back, the order swapped every
 * round, so that a drift of the machine (an agent still busy from the
 * other loop, a neighbour's burst) falls on both sides; the ratio is the
 * median of the rounds' ratios. (One loop after the other gave 1.00-1.13x
 * for a call the library passes to MPI at 9 ns of cost: the order of the
 * loops, not the library.) Each half starts after a 1 ms pause: an agent
 * sharing the ranks' cores polls them for up to 200 us after its last
 * operation, which slowed whatever MPI loop came next. */
#define HALF_US 2000.0
struct blocking_result {
    double mpi_us, pmpi_us;           /* medians over the rounds, per call */
    double ratio, ratio_min, ratio_max; /* of mpi_us / pmpi_us within each round */
    int rounds, calls;                /* calls: per round and side */
};

static struct blocking_result measure_blocking(const struct options *o, struct buffers *b) {
    MPI_Request req[2];
    for (int via = 0; via < 2; ++via)
        for (int i = 0; i < o->warmup; ++i)
            if (post(via, o->op, b, req) != MPI_SUCCESS) PMPI_Abort(MPI_COMM_WORLD, 2);
    const int rounds = o->iterations < ROUNDS ? o->iterations : ROUNDS;
    int calls = o->iterations / rounds;
    /* Each half lasts at least HALF_US where a call is short, so that its
     * first call, which follows the pause, weighs little (-i is then a
     * minimum): timed on PMPI_ after the warm-up, the slowest rank's
     * figure, since every rank must make as many calls. */
    if (o->warmup > 0) {
        PMPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_us();
        for (int i = 0; i < o->warmup; ++i) post(1, o->op, b, req);
        double per_call = (now_us() - t0) / o->warmup, slowest;
        PMPI_Allreduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        const double wanted = HALF_US / (slowest > 0.01 ? slowest : 0.01);
        if (wanted > calls) calls = wanted > 100000 ? 100000 : (int)wanted;
    }
    double us[2][ROUNDS], ratio[ROUNDS];
    for (int r = 0; r < rounds; ++r) {
        for (int k = 0; k < 2; ++k) {
            const int via = (r + k) % 2;
            const struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
            PMPI_Barrier(MPI_COMM_WORLD);
            const double t0 = now_us();
            for (int i = 0; i < calls; ++i) post(via, o->op, b, req);
            us[via][r] = world_average((now_us() - t0) / calls);
        }
        ratio[r] = us[0][r] / us[1][r];
    }
    struct blocking_result res = {median(us[0], rounds), median(us[1], rounds),
                                  median(ratio, rounds), ratio[0], ratio[0], rounds, calls};
    for (int r = 1; r < rounds; ++r) {
        if (ratio[r] < res.ratio_min) res.ratio_min = ratio[r];
        if (ratio[r] > res.ratio_max) res.ratio_max = ratio[r];
    }
    return res;
}

static struct result measure(int via, const struct options *o, struct buffers *b) {
    struct result r = {0, 0, 0, 0, 0, 0};
    MPI_Request req[2];
    for (int i = 0; i < o->warmup; ++i) {
        if (post(via, o->op, b, req) != MPI_SUCCESS) PMPI_Abort(MPI_COMM_WORLD, 2);
        complete(via, o->wait, req);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    double pure = 0;
    for (int i = 0; i < o->iterations; ++i) {
        const double t0 = now_us();
        post(via, o->op, b, req);
        complete(via, o->wait, req);
        pure += now_us() - t0;
    }
    pure /= o->iterations;
    r.pure_us = world_average(pure);
    PMPI_Barrier(MPI_COMM_WORLD);
    double overall = 0, comp = 0, posting = 0, waiting = 0;
    for (int i = 0; i < o->warmup + o->iterations; ++i) {
        const double t0 = now_us();
        post(via, o->op, b, req);
        const double t1 = now_us();
        compute_for(pure, o->idle);
        const double t2 = now_us();
        complete(via, o->wait, req);
        const double t3 = now_us();
        if (i >= o->warmup)
            overall += t3 - t0, comp += t2 - t1, posting += t1 - t0, waiting += t3 - t2;
        PMPI_Barrier(MPI_COMM_WORLD);
    }
    r.overall_us = world_average(overall / o->iterations);
    r.compute_us = world_average(comp / o->iterations);
    r.post_us = world_average(posting / o->iterations);
    r.wait_us = world_average(waiting / o->iterations);
    const double overlap = 100.0 - 100.0 * (r.overall_us - r.compute_us) / r.pure_us;
    r.overlap_pct = overlap < 0 ? 0 : overlap;
    return r;
}

int main(int argc, char **argv) {
    /* For scripts that sweep every operation (scripts/mpi-thresholds.sh):
     * before MPI_Init, so that no launcher is needed. */
    if (argc == 2 && strcmp(argv[1], "--list-ops") == 0) {
        for (int i = 0; i < OP_COUNT; ++i) printf("%s\n", op_names[i]);
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    struct options o;
    if (!parse(argc, argv, &o)) {
        if (rank == 0) usage(argv[0]);
        PMPI_Finalize();
        return 2;
    }
    /* An idle compute phase sleeps as long as the pure time, not the 50 us
     * more the kernel's default timer slack adds (as deputy bench coll):
     * with the slack, a 10 us operation had 60-80 us to finish in. */
    if (o.idle) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    /* What a sleep costs here (bench_common/sleep_cost.h): the slowest
     * rank's, every rank measuring at once as its compute phases will. */
    struct bench_sleep_cost sleep = {0, 0, 0};
    const int sleeps = o.idle && o.op < FIRST_BLOCKING;
    if (sleeps) {
        sleep = bench_measure_sleep_cost(5.0, 1000);
        double mine[2] = {sleep.wall_us, sleep.cpu_us}, worst[2];
        PMPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sleep.wall_us = worst[0], sleep.cpu_us = worst[1];
    }
    FILE *json = NULL;
    if (rank == 0 && o.json && !(json = fopen(o.json, "w"))) {
        fprintf(stderr, "--json %s: %s\n", o.json, strerror(errno));
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int nonblocking = o.op < FIRST_BLOCKING;
    if (rank == 0) {
        printf("# deputy-bench-mpi: %s, %d ranks, compute %s, %d iterations (+%d warm-up)%s%s\n",
               op_names[o.op], size, o.idle ? "idle" : "cpu", o.iterations, o.warmup,
               nonblocking ? ", completed by MPI_" : "",
               nonblocking ? (o.wait == WAITANY ? "Waitany" : o.wait == WAITSOME ? "Waitsome" : "Wait")
                           : "");
        printf("# mpi = MPI_%s (as linked or preloaded), pmpi = PMPI_ (the MPI library)\n",
               op_names[o.op]);
        if (sleeps) bench_print_sleep_cost(stdout, &sleep);
        if (nonblocking)
            printf("%-10s %12s %12s %10s %12s %12s %10s %9s %9s %9s\n", "#bytes",
                   "mpi_overall", "mpi_pure", "mpi_ovl%", "pmpi_overall", "pmpi_pure",
                   "pmpi_ovl%", "overall_x", "mpi_post", "mpi_wait");
        else
            printf("%-10s %12s %12s %9s %9s %9s\n", "#bytes", "mpi_us", "pmpi_us", "time_x",
                   "x_min", "x_max");
        if (json)
            fprintf(json, "{\"benchmark\":\"deputy-bench-mpi\",\"op\":\"%s\",\"ranks\":%d,"
                          "\"compute\":\"%s\",\"wait\":\"%s\",\"iterations\":%d,",
                    op_names[o.op], size, o.idle ? "idle" : "cpu", wait_names[o.wait],
                    o.iterations);
        if (json && sleeps)
            fprintf(json, "\"sleep\":{\"asked_us\":%.1f,\"wall_us\":%.2f,\"cpu_us\":%.2f},",
                    sleep.asked_us, sleep.wall_us, sleep.cpu_us);
        if (json) fprintf(json, "\"rows\":[");
    }
    int first_row = 1;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
        /* bytes per rank's block, as OSU counts them; floats for reductions */
        const int element = op_reduces(o.op) ? 4 : 1;
        struct buffers b;
        b.count = (int)(bytes / (size_t)element);
        const size_t blocks = op_sends_blocks(o.op) ? (size_t)size : 1;
        const size_t recv_blocks = op_receives_blocks(o.op) ? (size_t)size : 1;
        b.send = malloc(bytes * blocks);
        b.recv = malloc(bytes * recv_blocks);
        b.counts = malloc(2 * sizeof(int) * (size_t)size);
        if (!b.send || !b.recv || !b.counts) PMPI_Abort(MPI_COMM_WORLD, 2);
        b.displs = b.counts + size;
        for (int m = 0; m < size; m++) b.counts[m] = b.count, b.displs[m] = m * b.count;
        b.next = (rank + 1) % size;
        b.previous = (rank + size - 1) % size;
        /* first touch here, not in the timed loop */
        memset(b.send, 1, bytes * blocks);
        memset(b.recv, 0, bytes * recv_blocks);
        if (!nonblocking) {
            const struct blocking_result t = measure_blocking(&o, &b);
            if (rank == 0) {
                printf("%-10zu %12.2f %12.2f %9.2f %9.2f %9.2f\n", bytes, t.mpi_us, t.pmpi_us,
                       t.ratio, t.ratio_min, t.ratio_max);
                fflush(stdout);
                if (json)
                    fprintf(json,
                            "%s{\"bytes\":%zu,\"mpi\":{\"pure_us\":%.3f},\"pmpi\":{\"pure_us\":"
                            "%.3f},\"time_x\":%.4f,\"time_x_min\":%.4f,\"time_x_max\":%.4f,"
                            "\"rounds\":%d,\"calls_per_round\":%d}",
                            first_row ? "" : ",", bytes, t.mpi_us, t.pmpi_us, t.ratio,
                            t.ratio_min, t.ratio_max, t.rounds, t.calls);
            }
            first_row = 0;
            free(b.send);
            free(b.recv);
            free(b.counts);
            continue;
        }
        const struct result mine = measure(0, &o, &b);
        const struct result base = measure(1, &o, &b);
        if (rank == 0) {
            printf("%-10zu %12.2f %12.2f %10.1f %12.2f %12.2f %10.1f %9.2f %9.2f %9.2f\n",
                   bytes, mine.overall_us, mine.pure_us, mine.overlap_pct, base.overall_us,
                   base.pure_us, base.overlap_pct, mine.overall_us / base.overall_us,
                   mine.post_us, mine.wait_us);
            fflush(stdout);
            if (json)
                fprintf(json,
                        "%s{\"bytes\":%zu,\"mpi\":{\"pure_us\":%.3f,\"overall_us\":%.3f,"
                        "\"compute_us\":%.3f,\"overlap_pct\":%.2f,\"post_us\":%.3f,"
                        "\"wait_us\":%.3f},\"pmpi\":{\"pure_us\":%.3f,\"overall_us\":%.3f,"
                        "\"compute_us\":%.3f,\"overlap_pct\":%.2f,\"post_us\":%.3f,"
                        "\"wait_us\":%.3f}}",
                        first_row ? "" : ",", bytes, mine.pure_us, mine.overall_us,
                        mine.compute_us, mine.overlap_pct, mine.post_us, mine.wait_us,
                        base.pure_us, base.overall_us, base.compute_us, base.overlap_pct,
                        base.post_us, base.wait_us);
        }
        first_row = 0;
        free(b.send);
        free(b.recv);
        free(b.counts);
    }
    if (json) {
        fprintf(json, "]}\n");
        fclose(json);
    }
    MPI_Finalize();
    return 0;
}
