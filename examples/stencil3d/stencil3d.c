/* stencil3d: a 7-point Jacobi solver on a 3-D grid decomposed over the
 * ranks in 3-D, the halo exchange the field's stencil codes make: each
 * iteration posts MPI_Irecv / MPI_Isend of the six faces, computes the
 * interior (which needs no halo) while they travel, waits, and computes the
 * boundary layer. --persistent makes the same exchange with persistent
 * requests (MPI_Send_init / MPI_Recv_init once, MPI_Startall per
 * iteration); --no-overlap waits for the halos before computing anything
 * (the baseline structure). A plain MPI program: <mpi.h> and libc only.
 *
 * The grid's points outside the domain are 0 (Dirichlet): a rank on the
 * domain's edge has MPI_PROC_NULL there (MPI_Cart_shift), and its halo
 * stays 0. Each new value is (c + x- + x+ + y- + y+ + z- + z+) / 7, summed
 * in that order, so any decomposition gives the same bits as one rank;
 * --check compares with a serial run on rank 0 (default for grids up to
 * 2^21 points). The checksum (the sum of the values' bit patterns, an
 * integer) is the same bytes whatever MPI or offload runs it. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n[3];         /* global grid */
    int p[3];         /* process grid, 0: MPI_Dims_create */
    int iterations, warmup;
    int check;        /* -1: by size */
    int mode;         /* 0 overlapped, 1 --no-overlap, 2 --persistent */
} options;

static int rank, size;

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s [-n N | --grid NX,NY,NZ] [--pgrid PXxPYxPZ] [-i ITERATIONS] [-x WARMUP]\n"
            "          [--persistent | --no-overlap] [--check | --no-check]\n"
            "  -n N              a cubic grid of N^3 points (default 128)\n"
            "  --grid NX,NY,NZ   the grid (each >= 1)\n"
            "  --pgrid PXxPYxPZ  the process grid, PX x PY x PZ = ranks (default: MPI_Dims_create)\n"
            "  -i ITERATIONS     timed iterations (default 20)\n"
            "  -x WARMUP         untimed iterations first (default 3)\n"
            "  --persistent      the halo exchange with persistent requests (MPI_Startall)\n"
            "  --no-overlap      wait for the halos, then compute (the baseline)\n"
            "  --check           compare with a serial run on rank 0 (default up to 2^21 points)\n",
            prog);
}

#define BAD(...)                                                        \
    do {                                                                \
        if (rank == 0) {                                                \
            fprintf(stderr, "stencil3d: " __VA_ARGS__);                 \
            fputc('\n', stderr);                                        \
        }                                                               \
        return 2;                                                       \
    } while (0)

static int positive(const char *s, int *out) {
    char *end;
    const long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > 1 << 20) return 0;
    *out = (int)v;
    return 1;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){{128, 128, 128}, {0, 0, 0}, 20, 3, -1, 0};
    for (int a = 1; a < argc; ++a) {
        const char *s = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            if (rank == 0) usage(stdout, argv[0]);
            return 1;
        } else if (!strcmp(s, "-n") && v) {
            if (!positive(v, &o->n[0])) BAD("-n %s: a grid side of at least 1", v);
            o->n[1] = o->n[2] = o->n[0];
            ++a;
        } else if (!strcmp(s, "--grid") && v) {
            char copy[64];
            snprintf(copy, sizeof copy, "%s", v);
            char *x = strtok(copy, ","), *y = strtok(NULL, ","), *z = strtok(NULL, ",");
            if (!x || !y || !z || strtok(NULL, ",") || !positive(x, &o->n[0]) ||
                !positive(y, &o->n[1]) || !positive(z, &o->n[2]))
                BAD("--grid %s: NX,NY,NZ, each at least 1", v);
            ++a;
        } else if (!strcmp(s, "--pgrid") && v) {
            if (sscanf(v, "%dx%dx%d", &o->p[0], &o->p[1], &o->p[2]) != 3 || o->p[0] < 1 ||
                o->p[1] < 1 || o->p[2] < 1)
                BAD("--pgrid %s: PXxPYxPZ, each at least 1", v);
            ++a;
        } else if (!strcmp(s, "-i") && v) {
            if (!positive(v, &o->iterations)) BAD("-i %s: at least 1 iteration", v);
            ++a;
        } else if (!strcmp(s, "-x") && v) {
            char *end;
            const long w = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || w < 0 || w > 1 << 20) BAD("-x %s: 0 or more", v);
            o->warmup = (int)w;
            ++a;
        } else if (!strcmp(s, "--persistent")) {
            o->mode = 2;
        } else if (!strcmp(s, "--no-overlap")) {
            o->mode = 1;
        } else if (!strcmp(s, "--check")) {
            o->check = 1;
        } else if (!strcmp(s, "--no-check")) {
            o->check = 0;
        } else {
            if (rank == 0) usage(stderr, argv[0]);
            BAD("unknown or incomplete argument '%s'", s);
        }
    }
    return 0;
}

/* Rank r's share of n points over p: the first n % p shares one longer. */
static void share(int n, int p, int r, int *first, int *count) {
    const int base = n / p, extra = n % p;
    *count = base + (r < extra);
    *first = r * base + (r < extra ? r : extra);
}

/* The initial value of global point (x, y, z). */
static double initial(int x, int y, int z) {
    return (double)((x * 7 + y * 13 + z * 17) % 101) / 100.0 + 0.5;
}

/* A block with a halo of one: point (i, j, k), 0..n+1 each. */
typedef struct {
    int nx, ny, nz;
    double *u, *v;  /* this iteration's values and the next's */
} block;

static size_t at(const block *b, int i, int j, int k) {
    return ((size_t)k * (size_t)(b->ny + 2) + (size_t)j) * (size_t)(b->nx + 2) + (size_t)i;
}

/* One point's new value: the sum in one fixed order. */
static double point(const block *b, const double *u, int i, int j, int k) {
    const size_t c = at(b, i, j, k), sx = 1, sy = (size_t)(b->nx + 2),
                 sz = (size_t)(b->nx + 2) * (size_t)(b->ny + 2);
    return (u[c] + u[c - sx] + u[c + sx] + u[c - sy] + u[c + sy] + u[c - sz] + u[c + sz]) *
           (1.0 / 7.0);
}

/* Points [i0, i1] x [j0, j1] x [k0, k1] (1-based, inclusive). */
static void sweep(block *b, int i0, int i1, int j0, int j1, int k0, int k1) {
    for (int k = k0; k <= k1; ++k)
        for (int j = j0; j <= j1; ++j)
            for (int i = i0; i <= i1; ++i) b->v[at(b, i, j, k)] = point(b, b->u, i, j, k);
}

/* The boundary layer: every point with a face neighbour in the halo
 * (whole rows on the y and z faces, the two ends of the others' rows). */
static void shell(block *b) {
    const int nx = b->nx, ny = b->ny, nz = b->nz;
    for (int k = 1; k <= nz; ++k)
        for (int j = 1; j <= ny; ++j) {
            if (k == 1 || k == nz || j == 1 || j == ny) {
                for (int i = 1; i <= nx; ++i) b->v[at(b, i, j, k)] = point(b, b->u, i, j, k);
            } else {
                b->v[at(b, 1, j, k)] = point(b, b->u, 1, j, k);
                if (nx > 1) b->v[at(b, nx, j, k)] = point(b, b->u, nx, j, k);
            }
        }
}

/* Face f (0: x-, 1: x+, 2: y-, 3: y+, 4: z-, 5: z+): its points at layer
 * `layer` (1..n: the block's own, 0 or n+1: the halo) copied to or from a
 * contiguous buffer. */
static size_t face_points(const block *b, int f) {
    return f < 2 ? (size_t)b->ny * (size_t)b->nz
                 : f < 4 ? (size_t)b->nx * (size_t)b->nz : (size_t)b->nx * (size_t)b->ny;
}
static void face_copy(block *b, double *u, int f, int layer, double *buf, int pack) {
    size_t n = 0;
    const int d = f / 2;
    const int ni = d == 0 ? 1 : b->nx, nj = d == 1 ? 1 : b->ny, nk = d == 2 ? 1 : b->nz;
    for (int k = 1; k <= nk; ++k)
        for (int j = 1; j <= nj; ++j)
            for (int i = 1; i <= ni; ++i) {
                const size_t p = at(b, d == 0 ? layer : i, d == 1 ? layer : j, d == 2 ? layer : k);
                if (pack) buf[n++] = u[p];
                else u[p] = buf[n++];
            }
}

typedef struct {
    int neighbour[6];
    double *send[6], *recv[6];
    MPI_Request req[12];
    MPI_Status status[12];  /* (GCC 12 warns of MPICH's MPI_STATUSES_IGNORE) */
    int persistent;
    MPI_Comm comm;
} halo;

/* Face f goes to neighbour[f] with tag f; it comes back from there with
 * the opposite face's tag (what that neighbour sent towards us). */
static void post(halo *h, block *b) {
    for (int f = 0; f < 6; ++f) {
        const int outer = f % 2 ? (f / 2 == 0 ? b->nx : f / 2 == 1 ? b->ny : b->nz) : 1;
        face_copy(b, b->u, f, outer, h->send[f], 1);
    }
    if (h->persistent) {
        MPI_Startall(12, h->req);
        return;
    }
    for (int f = 0; f < 6; ++f)
        MPI_Irecv(h->recv[f], (int)face_points(b, f), MPI_DOUBLE, h->neighbour[f], f ^ 1, h->comm,
                  &h->req[f]);
    for (int f = 0; f < 6; ++f)
        MPI_Isend(h->send[f], (int)face_points(b, f), MPI_DOUBLE, h->neighbour[f], f, h->comm,
                  &h->req[6 + f]);
}

static void finish(halo *h, block *b) {
    MPI_Waitall(12, h->req, h->status);
    for (int f = 0; f < 6; ++f) {
        if (h->neighbour[f] == MPI_PROC_NULL) continue;
        const int layer = f % 2 ? (f / 2 == 0 ? b->nx : f / 2 == 1 ? b->ny : b->nz) + 1 : 0;
        face_copy(b, b->u, f, layer, h->recv[f], 0);
    }
}

static void iterate(const options *o, halo *h, block *b, double *waited) {
    post(h, b);
    double t0 = MPI_Wtime();
    if (o->mode == 1) {
        finish(h, b);
        *waited += MPI_Wtime() - t0;
        sweep(b, 1, b->nx, 1, b->ny, 1, b->nz);
    } else {
        if (b->nx > 2 && b->ny > 2 && b->nz > 2) sweep(b, 2, b->nx - 1, 2, b->ny - 1, 2, b->nz - 1);
        t0 = MPI_Wtime();
        finish(h, b);
        *waited += MPI_Wtime() - t0;
        shell(b);
    }
    double *t = b->u;
    b->u = b->v;
    b->v = t;
}

static int by_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The same iterations on the whole grid, on one rank. */
static double *serial(const options *o) {
    block g = {o->n[0], o->n[1], o->n[2], NULL, NULL};
    const size_t n = at(&g, g.nx + 1, g.ny + 1, g.nz + 1) + 1;
    g.u = calloc(n, sizeof(double));
    g.v = calloc(n, sizeof(double));
    if (!g.u || !g.v) return NULL;
    for (int k = 1; k <= g.nz; ++k)
        for (int j = 1; j <= g.ny; ++j)
            for (int i = 1; i <= g.nx; ++i) g.u[at(&g, i, j, k)] = initial(i - 1, j - 1, k - 1);
    for (int it = 0; it < o->warmup + o->iterations; ++it) {
        sweep(&g, 1, g.nx, 1, g.ny, 1, g.nz);
        double *t = g.u;
        g.u = g.v;
        g.v = t;
    }
    free(g.v);
    return g.u;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : rc;
    }
    int dims[3] = {o.p[0], o.p[1], o.p[2]};
    if (dims[0] && dims[0] * dims[1] * dims[2] != size) {
        if (rank == 0)
            fprintf(stderr, "stencil3d: --pgrid %dx%dx%d is %d ranks; the job has %d\n", dims[0],
                    dims[1], dims[2], dims[0] * dims[1] * dims[2], size);
        MPI_Finalize();
        return 2;
    }
    MPI_Dims_create(size, 3, dims);
    for (int d = 0; d < 3; ++d)
        if (dims[d] > o.n[d]) {
            if (rank == 0)
                fprintf(stderr, "stencil3d: %d ranks along dimension %d of %d points\n", dims[d],
                        d, o.n[d]);
            MPI_Finalize();
            return 2;
        }
    const int periods[3] = {0, 0, 0};
    halo h = {.persistent = o.mode == 2};
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &h.comm);
    int me, coords[3];
    MPI_Comm_rank(h.comm, &me);
    MPI_Cart_coords(h.comm, me, 3, coords);
    for (int d = 0; d < 3; ++d) MPI_Cart_shift(h.comm, d, 1, &h.neighbour[2 * d], &h.neighbour[2 * d + 1]);
    int first[3], count[3];
    for (int d = 0; d < 3; ++d) share(o.n[d], dims[d], coords[d], &first[d], &count[d]);
    block b = {count[0], count[1], count[2], NULL, NULL};
    const size_t points = at(&b, b.nx + 1, b.ny + 1, b.nz + 1) + 1;
    b.u = calloc(points, sizeof(double));
    b.v = calloc(points, sizeof(double));
    int bad = !b.u || !b.v;
    for (int f = 0; f < 6 && !bad; ++f) {
        h.send[f] = malloc(face_points(&b, f) * sizeof(double));
        h.recv[f] = malloc(face_points(&b, f) * sizeof(double));
        bad = !h.send[f] || !h.recv[f];
    }
    if (bad) {
        fprintf(stderr, "stencil3d: rank %d: out of memory for a block of %zu points\n", rank, points);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int k = 1; k <= b.nz; ++k)
        for (int j = 1; j <= b.ny; ++j)
            for (int i = 1; i <= b.nx; ++i)
                b.u[at(&b, i, j, k)] = initial(first[0] + i - 1, first[1] + j - 1, first[2] + k - 1);
    if (h.persistent) {
        for (int f = 0; f < 6; ++f)
            MPI_Recv_init(h.recv[f], (int)face_points(&b, f), MPI_DOUBLE, h.neighbour[f], f ^ 1,
                          h.comm, &h.req[f]);
        for (int f = 0; f < 6; ++f)
            MPI_Send_init(h.send[f], (int)face_points(&b, f), MPI_DOUBLE, h.neighbour[f], f,
                          h.comm, &h.req[6 + f]);
    }
    const double total = (double)o.n[0] * o.n[1] * o.n[2];
    if (o.check < 0) o.check = total <= (double)(1 << 21);
    static const char *modes[] = {"halos overlapped with the interior (MPI_Isend/MPI_Irecv)",
                                  "halos, then compute (no overlap)",
                                  "halos overlapped, persistent requests (MPI_Startall)"};
    if (rank == 0)
        printf("stencil3d: grid %dx%dx%d, process grid %dx%dx%d, %d ranks, %s\n", o.n[0], o.n[1],
               o.n[2], dims[0], dims[1], dims[2], size, modes[o.mode]);

    double waited = 0;
    for (int it = 0; it < o.warmup; ++it) iterate(&o, &h, &b, &waited);
    double *times = malloc((size_t)o.iterations * sizeof(double));
    waited = 0;
    for (int it = 0; it < o.iterations; ++it) {
        MPI_Barrier(h.comm);
        const double t0 = MPI_Wtime();
        iterate(&o, &h, &b, &waited);
        times[it] = MPI_Wtime() - t0;
    }
    /* The slowest rank's time of each iteration, and its wait. */
    double *slowest = malloc((size_t)o.iterations * sizeof(double)), wait_max = 0;
    MPI_Reduce(times, slowest, o.iterations, MPI_DOUBLE, MPI_MAX, 0, h.comm);
    MPI_Reduce(&waited, &wait_max, 1, MPI_DOUBLE, MPI_MAX, 0, h.comm);

    /* The checksum: the values' bit patterns summed as integers. */
    uint64_t sum = 0;
    for (int k = 1; k <= b.nz; ++k)
        for (int j = 1; j <= b.ny; ++j)
            for (int i = 1; i <= b.nx; ++i) {
                uint64_t bits;
                memcpy(&bits, &b.u[at(&b, i, j, k)], sizeof bits);
                sum += bits;
            }
    uint64_t checksum = 0;
    MPI_Reduce(&sum, &checksum, 1, MPI_UINT64_T, MPI_SUM, 0, h.comm);

    int wrong = 0;
    if (o.check) {
        /* Every block to rank 0 (its origin, its size, its values), then
         * compared with the serial run point by point. */
        const int meta[6] = {first[0], first[1], first[2], b.nx, b.ny, b.nz};
        int *metas = rank == 0 ? malloc((size_t)size * 6 * sizeof(int)) : NULL;
        MPI_Gather(meta, 6, MPI_INT, metas, 6, MPI_INT, 0, h.comm);
        const int mine = b.nx * b.ny * b.nz;
        double *flat = malloc((size_t)(mine ? mine : 1) * sizeof(double));
        size_t n = 0;
        for (int k = 1; k <= b.nz; ++k)
            for (int j = 1; j <= b.ny; ++j)
                for (int i = 1; i <= b.nx; ++i) flat[n++] = b.u[at(&b, i, j, k)];
        int *counts = NULL, *displs = NULL;
        double *all = NULL, *ref = NULL;
        if (rank == 0) {
            counts = malloc((size_t)size * sizeof(int));
            displs = malloc((size_t)size * sizeof(int));
            int off = 0;
            for (int r = 0; r < size; ++r) {
                counts[r] = metas[6 * r + 3] * metas[6 * r + 4] * metas[6 * r + 5];
                displs[r] = off;
                off += counts[r];
            }
            all = malloc((size_t)off * sizeof(double));
            ref = serial(&o);
        }
        MPI_Gatherv(flat, mine, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, h.comm);
        if (rank == 0) {
            block g = {o.n[0], o.n[1], o.n[2], NULL, NULL};
            size_t differ = 0;
            for (int r = 0; r < size && ref; ++r) {
                const int *m = &metas[6 * r];
                size_t q = (size_t)displs[r];
                for (int k = 0; k < m[5]; ++k)
                    for (int j = 0; j < m[4]; ++j)
                        for (int i = 0; i < m[3]; ++i, ++q)
                            differ += memcmp(&all[q], &ref[at(&g, m[0] + i + 1, m[1] + j + 1, m[2] + k + 1)],
                                             sizeof(double)) != 0;
            }
            wrong = !ref || differ != 0;
            printf("result: against a serial run of %d iterations: %s (%zu points differ)\n",
                   o.warmup + o.iterations, wrong ? "WRONG" : "bit-exact", ref ? differ : (size_t)0);
            free(counts);
            free(displs);
            free(all);
            free(ref);
            free(metas);
        }
        free(flat);
    }
    if (rank == 0) {
        qsort(slowest, (size_t)o.iterations, sizeof(double), by_double);
        const double med = slowest[o.iterations / 2];
        printf("result: checksum %016llx after %d iterations\n", (unsigned long long)checksum,
               o.warmup + o.iterations);
        printf("stencil3d: time per iteration %.6f s (median of %d; min %.6f, max %.6f), %.2f "
               "GFLOP/s\n",
               med, o.iterations, slowest[0], slowest[o.iterations - 1], 7.0 * total / med / 1e9);
        printf("stencil3d: waiting for halos %.6f s per iteration (slowest rank), %.0f %% of "
               "the time\n",
               wait_max / o.iterations, 100.0 * wait_max / o.iterations / med);
    }
    if (h.persistent)
        for (int r = 0; r < 12; ++r) MPI_Request_free(&h.req[r]);
    for (int f = 0; f < 6; ++f) {
        free(h.send[f]);
        free(h.recv[f]);
    }
    free(b.u);
    free(b.v);
    free(times);
    free(slowest);
    MPI_Comm_free(&h.comm);
    MPI_Bcast(&wrong, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return wrong;
}
