/* fft3d: a distributed 3-D complex FFT on a pencil decomposition, the
 * structure P3DFFT's authors reworked for offload: each transpose is an
 * MPI_Ialltoall (MPI_Ialltoallv where the grid does not divide evenly)
 * per slab, posted as soon as the slab's 1-D FFTs are done, so the next
 * slab's FFTs run while the previous slab travels. --blocking gives the
 * usual structure (all FFTs, then one MPI_Alltoall(v) per transpose) as
 * the baseline. A plain MPI program: <mpi.h>, FFTW and libc only.
 *
 * Layout (P1 x P2 process grid; rank = r1 + P1 * r2):
 *   X pencils [z in Z2(r2)][y in Y1(r1)][x 0..NX)   x contiguous
 *   Y pencils [z in Z2(r2)][x in X1(r1)][y 0..NY)   after transpose 1 (row: same r2)
 *   Z pencils [y in Y2(r2)][x in X1(r1)][z 0..NZ)   after transpose 2 (column: same r1)
 * where A1(r) / A2(r) is rank r's share of dimension A over P1 / P2 (the
 * first n % p shares one longer). Forward: FFT x, T1, FFT y, T2, FFT z;
 * inverse: the reverse, scaled by 1/(NX NY NZ). Transpose 1 is sliced
 * along z (untouched by it), transpose 2 along x.
 *
 * Checked against a serial FFTW transform of the same data on every rank
 * (--check, default for grids up to 2^21 points): the largest error of the
 * forward transform relative to the largest magnitude, and of the round
 * trip. Both use only exact MPI operations (moves, MAX), so the result
 * lines are the same bytes whatever MPI library or offload runs them. */
#define _POSIX_C_SOURCE 200809L
#include <fftw3.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef fftw_complex cplx;

/* --- options --- */

typedef struct {
    int n[3];      /* NX, NY, NZ */
    int p1, p2;    /* process grid, 0: MPI_Dims_create */
    int slabs;     /* slabs per transpose */
    int blocking;  /* 1: the baseline structure */
    int iterations, warmup;
    int check;     /* -1: by size */
    int measure;   /* FFTW_MEASURE plans instead of FFTW_ESTIMATE */
} options;

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s [-n N | --grid NX,NY,NZ] [--pgrid P1xP2] [--slabs S] [--blocking]\n"
            "          [-i ITERATIONS] [-x WARMUP] [--check | --no-check] [--measure]\n"
            "  -n N             a cubic grid of N^3 points (default 64)\n"
            "  --grid NX,NY,NZ  the grid (each >= 1)\n"
            "  --pgrid P1xP2    the process grid, P1 x P2 = ranks (default: MPI_Dims_create)\n"
            "  --slabs S        slabs per transpose, pipelined (default 4; 1: no pipeline)\n"
            "  --blocking       the baseline: all FFTs, then one MPI_Alltoall(v) per transpose\n"
            "  -i ITERATIONS    timed forward+inverse pairs (default 10)\n"
            "  -x WARMUP        untimed pairs first (default 2)\n"
            "  --check          compare with a serial FFTW transform on every rank\n"
            "                   (default when NX*NY*NZ <= 2^21)\n"
            "  --measure        FFTW_MEASURE plans (default FFTW_ESTIMATE)\n",
            prog);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || (*end && *end != ',' && *end != 'x') || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* 0 ok, 1 help, 2 bad (message printed by rank 0). */
static int parse(int argc, char **argv, int rank, options *o) {
    *o = (options){{64, 64, 64}, 0, 0, 4, 0, 10, 2, -1, 0};
#define BAD(...) do { if (rank == 0) { fprintf(stderr, "fft3d: " __VA_ARGS__); fputc('\n', stderr); } return 2; } while (0)
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (rank == 0) usage(stdout, argv[0]);
            return 1;
        } else if (!strcmp(a, "--blocking")) {
            o->blocking = 1;
        } else if (!strcmp(a, "--check")) {
            o->check = 1;
        } else if (!strcmp(a, "--no-check")) {
            o->check = 0;
        } else if (!strcmp(a, "--measure")) {
            o->measure = 1;
        } else if (!v) {
            BAD("%s needs a value (--help)", a);
        } else if (!strcmp(a, "-n")) {
            int n;
            if (!parse_int(v, 1, 4096, &n) || strchr(v, ',')) BAD("-n %s: a size from 1 to 4096", v);
            o->n[0] = o->n[1] = o->n[2] = n;
            ++i;
        } else if (!strcmp(a, "--grid")) {
            const char *s = v;
            for (int d = 0; d < 3; ++d) {
                if (!parse_int(s, 1, 4096, &o->n[d]))
                    BAD("--grid %s: three sizes NX,NY,NZ, each from 1 to 4096", v);
                s = strchr(s, ',');
                if ((d < 2 && !s) || (d == 2 && s)) BAD("--grid %s: three sizes NX,NY,NZ", v);
                if (s) ++s;
            }
            ++i;
        } else if (!strcmp(a, "--pgrid")) {
            const char *x = strchr(v, 'x');
            if (!x || !parse_int(v, 1, 1 << 20, &o->p1) || !parse_int(x + 1, 1, 1 << 20, &o->p2))
                BAD("--pgrid %s: P1xP2, e.g. 2x2", v);
            ++i;
        } else if (!strcmp(a, "--slabs")) {
            if (!parse_int(v, 1, 4096, &o->slabs) || strchr(v, ',')) BAD("--slabs %s: 1 to 4096", v);
            ++i;
        } else if (!strcmp(a, "-i") || !strcmp(a, "--iterations")) {
            if (!parse_int(v, 1, 1000000, &o->iterations)) BAD("%s %s: 1 to 1000000", a, v);
            ++i;
        } else if (!strcmp(a, "-x") || !strcmp(a, "--warmup")) {
            if (!parse_int(v, 0, 1000000, &o->warmup)) BAD("%s %s: 0 to 1000000", a, v);
            ++i;
        } else {
            BAD("unknown option %s (--help)", a);
        }
    }
    if (o->check < 0) o->check = (double)o->n[0] * o->n[1] * o->n[2] <= (double)(1 << 21);
    return 0;
#undef BAD
}

/* --- the decomposition --- */

/* Part r of n over p: its length and its first index. */
static int part_len(int n, int p, int r) { return n / p + (r < n % p); }
static int part_start(int n, int p, int r) { return r * (n / p) + (r < n % p ? r : n % p); }

typedef struct {
    int nx, ny, nz;
    int p1, p2, r1, r2;
    MPI_Comm row, col;  /* row: same r2, P1 ranks (transpose 1); col: same r1 (transpose 2) */
    int y1, y1s;        /* this rank's Y1 share (X pencils) */
    int z2, z2s;        /* Z2 share (X and Y pencils) */
    int x1, x1s;        /* X1 share (Y and Z pencils) */
    int y2, y2s;        /* Y2 share (Z pencils) */
    size_t xp, yp, zp;  /* elements of each pencil layout */
} grid;

/* --- 1-D FFT plans: one per (length, lines, direction), lines contiguous --- */

typedef struct {
    int n, lines, sign;
    fftw_plan plan;
} plan_entry;

static plan_entry plans[64];
static int nplans;
static unsigned plan_flags = FFTW_ESTIMATE;

/* `lines` transforms of length n, back to back, in place at `data`. */
static void fft_lines(cplx *data, int n, int lines, int sign) {
    if (lines <= 0 || n <= 0) return;
    plan_entry *e = NULL;
    for (int i = 0; i < nplans; ++i)
        if (plans[i].n == n && plans[i].lines == lines && plans[i].sign == sign) e = &plans[i];
    if (!e) {
        if (nplans == (int)(sizeof plans / sizeof plans[0])) {
            fprintf(stderr, "fft3d: more than %d distinct FFT plans\n", nplans);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        /* Planned on a scratch array: FFTW_MEASURE overwrites it. */
        cplx *scratch = fftw_alloc_complex((size_t)n * (size_t)lines);
        e = &plans[nplans++];
        *e = (plan_entry){n, lines, sign,
                          fftw_plan_many_dft(1, &n, lines, scratch, NULL, 1, n, scratch, NULL, 1,
                                             n, sign, plan_flags | FFTW_UNALIGNED)};
        fftw_free(scratch);
    }
    fftw_execute_dft(e->plan, data, data);
}

/* --- the transposes, per slab --- */

/* One slab's exchange: counts and displacements (in complex elements,
 * converted to MPI_C_DOUBLE_COMPLEX counts), its buffers and request. */
typedef struct {
    int *scounts, *sdispls, *rcounts, *rdispls;
    cplx *send, *recv;
    int even; /* every count equal: MPI_Ialltoall */
    MPI_Request req;
} exchange;

/* `even`: every block of the exchange has the same length on every rank
 * of the communicator (decided from the grid, so all ranks agree: a rank
 * with nothing to send must still post the same collective). */
static void exchange_counts(exchange *e, int p, const int *scount, const int *rcount, int even) {
    int at_s = 0, at_r = 0;
    e->even = even;
    for (int j = 0; j < p; ++j) {
        e->scounts[j] = scount[j];
        e->rcounts[j] = rcount[j];
        e->sdispls[j] = at_s;
        e->rdispls[j] = at_r;
        at_s += scount[j];
        at_r += rcount[j];
    }
}

static void post(exchange *e, MPI_Comm comm, int blocking) {
    if (blocking) {
        if (e->even)
            MPI_Alltoall(e->send, e->scounts[0], MPI_C_DOUBLE_COMPLEX, e->recv, e->rcounts[0],
                         MPI_C_DOUBLE_COMPLEX, comm);
        else
            MPI_Alltoallv(e->send, e->scounts, e->sdispls, MPI_C_DOUBLE_COMPLEX, e->recv,
                          e->rcounts, e->rdispls, MPI_C_DOUBLE_COMPLEX, comm);
        e->req = MPI_REQUEST_NULL;
    } else if (e->even) {
        MPI_Ialltoall(e->send, e->scounts[0], MPI_C_DOUBLE_COMPLEX, e->recv, e->rcounts[0],
                      MPI_C_DOUBLE_COMPLEX, comm, &e->req);
    } else {
        MPI_Ialltoallv(e->send, e->scounts, e->sdispls, MPI_C_DOUBLE_COMPLEX, e->recv,
                       e->rcounts, e->rdispls, MPI_C_DOUBLE_COMPLEX, comm, &e->req);
    }
}

typedef struct {
    grid g;
    int slabs1, slabs2;     /* slabs of transpose 1 (over z) and 2 (over x) */
    exchange *t1, *t2;      /* per slab */
    cplx *send, *recv;      /* shared by every slab, each slab its own range */
    double wait_s;          /* time spent waiting for transposes */
    int blocking;
} fft;

static double now(void) { return MPI_Wtime(); }

/* Slab s of n over `slabs` (as part_len/part_start). */
#define SLAB_LEN(n, slabs, s) part_len((n), (slabs), (s))
#define SLAB_START(n, slabs, s) part_start((n), (slabs), (s))

static void setup_exchanges(fft *f) {
    grid *g = &f->g;
    int *sc = malloc(sizeof(int) * (size_t)(g->p1 > g->p2 ? g->p1 : g->p2));
    int *rc = malloc(sizeof(int) * (size_t)(g->p1 > g->p2 ? g->p1 : g->p2));
    f->t1 = calloc((size_t)f->slabs1, sizeof(exchange));
    f->t2 = calloc((size_t)f->slabs2, sizeof(exchange));
    size_t off = 0;
    for (int s = 0; s < f->slabs1; ++s) {
        exchange *e = &f->t1[s];
        const int nzs = SLAB_LEN(g->z2, f->slabs1, s);
        e->scounts = malloc(sizeof(int) * 4 * (size_t)g->p1);
        e->sdispls = e->scounts + g->p1;
        e->rcounts = e->scounts + 2 * g->p1;
        e->rdispls = e->scounts + 3 * g->p1;
        for (int j = 0; j < g->p1; ++j) {
            sc[j] = nzs * g->y1 * part_len(g->nx, g->p1, j);  /* my y rows, their x */
            rc[j] = nzs * part_len(g->ny, g->p1, j) * g->x1;  /* their y rows, my x */
        }
        exchange_counts(e, g->p1, sc, rc, g->nx % g->p1 == 0 && g->ny % g->p1 == 0);
        e->send = f->send + off;
        e->recv = f->recv + off;
        off += (size_t)nzs * (size_t)(g->y1 * g->nx > g->x1 * g->ny ? g->y1 * g->nx : g->x1 * g->ny);
    }
    off = 0;
    for (int s = 0; s < f->slabs2; ++s) {
        exchange *e = &f->t2[s];
        const int nxs = SLAB_LEN(g->x1, f->slabs2, s);
        e->scounts = malloc(sizeof(int) * 4 * (size_t)g->p2);
        e->sdispls = e->scounts + g->p2;
        e->rcounts = e->scounts + 2 * g->p2;
        e->rdispls = e->scounts + 3 * g->p2;
        for (int j = 0; j < g->p2; ++j) {
            sc[j] = g->z2 * nxs * part_len(g->ny, g->p2, j);  /* my z, their y */
            rc[j] = part_len(g->nz, g->p2, j) * nxs * g->y2;  /* their z, my y */
        }
        exchange_counts(e, g->p2, sc, rc, g->ny % g->p2 == 0 && g->nz % g->p2 == 0);
        e->send = f->send + off;
        e->recv = f->recv + off;
        off += (size_t)nxs * (size_t)(g->z2 * g->ny > g->y2 * g->nz ? g->z2 * g->ny : g->y2 * g->nz);
    }
    free(sc);
    free(rc);
}

/* Transpose 1, slab s (z in [z0, z0 + nzs) of Z2): X pencils -> send,
 * x split by destination. */
static void pack_t1(const fft *f, const cplx *xp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t1[s];
    const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
    for (int j = 0; j < g->p1; ++j) {
        const int xs = part_start(g->nx, g->p1, j), xl = part_len(g->nx, g->p1, j);
        cplx *out = e->send + e->sdispls[j];
        for (int z = z0; z < z0 + nzs; ++z)
            for (int y = 0; y < g->y1; ++y) {
                memcpy(out, xp + ((size_t)z * g->y1 + y) * g->nx + xs, sizeof(cplx) * (size_t)xl);
                out += xl;
            }
    }
}

/* Transpose 1 received, slab s: into Y pencils [z][x][y]. */
static void unpack_t1(const fft *f, cplx *yp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t1[s];
    const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
    for (int j = 0; j < g->p1; ++j) {
        const int ys = part_start(g->ny, g->p1, j), yl = part_len(g->ny, g->p1, j);
        const cplx *in = e->recv + e->rdispls[j];
        for (int z = z0; z < z0 + nzs; ++z)
            for (int y = 0; y < yl; ++y)
                for (int x = 0; x < g->x1; ++x)
                    memcpy(yp + ((size_t)z * g->x1 + x) * g->ny + ys + y, in++, sizeof(cplx));
    }
}

/* Inverse of transpose 1, slab s: Y pencils -> send (y split by
 * destination), then received into X pencils. */
static void pack_t1_inverse(const fft *f, const cplx *yp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t1[s];
    const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
    for (int j = 0; j < g->p1; ++j) {
        const int ys = part_start(g->ny, g->p1, j), yl = part_len(g->ny, g->p1, j);
        cplx *out = e->recv + e->rdispls[j];  /* the forward receive layout, now sent */
        for (int z = z0; z < z0 + nzs; ++z)
            for (int y = 0; y < yl; ++y)
                for (int x = 0; x < g->x1; ++x)
                    memcpy(out++, yp + ((size_t)z * g->x1 + x) * g->ny + ys + y, sizeof(cplx));
    }
}

static void unpack_t1_inverse(const fft *f, cplx *xp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t1[s];
    const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
    for (int j = 0; j < g->p1; ++j) {
        const int xs = part_start(g->nx, g->p1, j), xl = part_len(g->nx, g->p1, j);
        const cplx *in = e->send + e->sdispls[j];
        for (int z = z0; z < z0 + nzs; ++z)
            for (int y = 0; y < g->y1; ++y) {
                memcpy(xp + ((size_t)z * g->y1 + y) * g->nx + xs, in, sizeof(cplx) * (size_t)xl);
                in += xl;
            }
    }
}

/* Transpose 2, slab s (x in [x0, x0 + nxs) of X1): Y pencils -> send,
 * y split by destination. */
static void pack_t2(const fft *f, const cplx *yp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t2[s];
    const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
    for (int j = 0; j < g->p2; ++j) {
        const int ys = part_start(g->ny, g->p2, j), yl = part_len(g->ny, g->p2, j);
        cplx *out = e->send + e->sdispls[j];
        for (int z = 0; z < g->z2; ++z)
            for (int x = x0; x < x0 + nxs; ++x) {
                memcpy(out, yp + ((size_t)z * g->x1 + x) * g->ny + ys, sizeof(cplx) * (size_t)yl);
                out += yl;
            }
    }
}

/* Transpose 2 received, slab s: into Z pencils [y][x][z]. */
static void unpack_t2(const fft *f, cplx *zp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t2[s];
    const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
    for (int j = 0; j < g->p2; ++j) {
        const int zs = part_start(g->nz, g->p2, j), zl = part_len(g->nz, g->p2, j);
        const cplx *in = e->recv + e->rdispls[j];
        for (int z = 0; z < zl; ++z)
            for (int x = x0; x < x0 + nxs; ++x)
                for (int y = 0; y < g->y2; ++y)
                    memcpy(zp + ((size_t)y * g->x1 + x) * g->nz + zs + z, in++, sizeof(cplx));
    }
}

static void pack_t2_inverse(const fft *f, const cplx *zp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t2[s];
    const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
    for (int j = 0; j < g->p2; ++j) {
        const int zs = part_start(g->nz, g->p2, j), zl = part_len(g->nz, g->p2, j);
        cplx *out = e->recv + e->rdispls[j];
        for (int z = 0; z < zl; ++z)
            for (int x = x0; x < x0 + nxs; ++x)
                for (int y = 0; y < g->y2; ++y)
                    memcpy(out++, zp + ((size_t)y * g->x1 + x) * g->nz + zs + z, sizeof(cplx));
    }
}

static void unpack_t2_inverse(const fft *f, cplx *yp, int s) {
    const grid *g = &f->g;
    const exchange *e = &f->t2[s];
    const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
    for (int j = 0; j < g->p2; ++j) {
        const int ys = part_start(g->ny, g->p2, j), yl = part_len(g->ny, g->p2, j);
        const cplx *in = e->send + e->sdispls[j];
        for (int z = 0; z < g->z2; ++z)
            for (int x = x0; x < x0 + nxs; ++x) {
                memcpy(yp + ((size_t)z * g->x1 + x) * g->ny + ys, in, sizeof(cplx) * (size_t)yl);
                in += yl;
            }
    }
}

/* The inverse exchanges send what the forward ones received: the same
 * counts swapped, the buffers swapped. */
static void post_inverse(exchange *e, MPI_Comm comm, int blocking) {
    exchange r = *e;
    r.send = e->recv;
    r.recv = e->send;
    r.scounts = e->rcounts;
    r.sdispls = e->rdispls;
    r.rcounts = e->scounts;
    r.rdispls = e->sdispls;
    post(&r, comm, blocking);
    e->req = r.req;
}

/* Waits for one slab's exchange (a blocking one has MPI_REQUEST_NULL:
 * nothing to wait for). */
static void wait_slab(fft *f, exchange *e) {
    const double t = now();
    MPI_Wait(&e->req, MPI_STATUS_IGNORE);
    f->wait_s += now() - t;
}

/* Blocking exchanges are timed where they are posted. */
static void timed_post(fft *f, exchange *e, MPI_Comm comm, int inverse) {
    const double t = f->blocking ? now() : 0;
    if (inverse) post_inverse(e, comm, f->blocking);
    else post(e, comm, f->blocking);
    if (f->blocking) f->wait_s += now() - t;
}

/* X pencils in `xp` -> Z pencils in `zp`; `yp` is the Y-pencil buffer.
 * Each slab's exchange is posted when its FFTs are done and waited for
 * only when its bytes are needed, so the FFTs of other slabs run while it
 * travels: transpose 1 behind the x FFTs of later slabs and the y FFTs of
 * earlier ones, transpose 2 behind the z FFTs of earlier slabs. */
static void forward(fft *f, cplx *xp, cplx *yp, cplx *zp) {
    grid *g = &f->g;
    for (int s = 0; s < f->slabs1; ++s) {  /* x FFTs, slab by slab over z */
        const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
        fft_lines(xp + (size_t)z0 * g->y1 * g->nx, g->nx, nzs * g->y1, FFTW_FORWARD);
        pack_t1(f, xp, s);
        timed_post(f, &f->t1[s], g->row, 0);
    }
    for (int s = 0; s < f->slabs1; ++s) {  /* y FFTs of each z slab as it lands */
        const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
        wait_slab(f, &f->t1[s]);
        unpack_t1(f, yp, s);
        fft_lines(yp + (size_t)z0 * g->x1 * g->ny, g->ny, nzs * g->x1, FFTW_FORWARD);
    }
    for (int s = 0; s < f->slabs2; ++s) {  /* transpose 2 needs every z: x slabs now */
        pack_t2(f, yp, s);
        timed_post(f, &f->t2[s], g->col, 0);
    }
    for (int s = 0; s < f->slabs2; ++s) {  /* z FFTs of each x slab as it lands */
        const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
        wait_slab(f, &f->t2[s]);
        unpack_t2(f, zp, s);
        for (int y = 0; y < g->y2; ++y)
            fft_lines(zp + ((size_t)y * g->x1 + x0) * g->nz, g->nz, nxs, FFTW_FORWARD);
    }
}

/* Z pencils in `zp` -> X pencils in `xp`, scaled: the round trip is the
 * identity. The forward steps backwards, pipelined the same way. */
static void inverse(fft *f, cplx *zp, cplx *yp, cplx *xp) {
    grid *g = &f->g;
    for (int s = 0; s < f->slabs2; ++s) {  /* z FFTs, slab by slab over x */
        const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
        for (int y = 0; y < g->y2; ++y)
            fft_lines(zp + ((size_t)y * g->x1 + x0) * g->nz, g->nz, nxs, FFTW_BACKWARD);
        pack_t2_inverse(f, zp, s);
        timed_post(f, &f->t2[s], g->col, 1);
    }
    for (int s = 0; s < f->slabs2; ++s) {  /* y FFTs of each x slab as it lands */
        const int x0 = SLAB_START(g->x1, f->slabs2, s), nxs = SLAB_LEN(g->x1, f->slabs2, s);
        wait_slab(f, &f->t2[s]);
        unpack_t2_inverse(f, yp, s);
        for (int z = 0; z < g->z2; ++z)
            fft_lines(yp + ((size_t)z * g->x1 + x0) * g->ny, g->ny, nxs, FFTW_BACKWARD);
    }
    for (int s = 0; s < f->slabs1; ++s) {  /* transpose 1 back needs every x: z slabs */
        pack_t1_inverse(f, yp, s);
        timed_post(f, &f->t1[s], g->row, 1);
    }
    const double scale = 1.0 / ((double)g->nx * g->ny * g->nz);
    for (int s = 0; s < f->slabs1; ++s) {  /* x FFTs of each z slab as it lands */
        const int z0 = SLAB_START(g->z2, f->slabs1, s), nzs = SLAB_LEN(g->z2, f->slabs1, s);
        wait_slab(f, &f->t1[s]);
        unpack_t1_inverse(f, xp, s);
        cplx *slab = xp + (size_t)z0 * g->y1 * g->nx;
        const size_t n = (size_t)nzs * g->y1 * g->nx;
        fft_lines(slab, g->nx, nzs * g->y1, FFTW_BACKWARD);
        for (size_t i = 0; i < n; ++i) {
            slab[i][0] *= scale;
            slab[i][1] *= scale;
        }
    }
}

/* --- data and checks --- */

/* A value in [-0.5, 0.5) from the global index (splitmix64): every process
 * grid transforms the same data. */
static double value(uint64_t i) {
    uint64_t z = i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 - 0.5;
}

static void fill(const grid *g, cplx *xp) {
    for (int z = 0; z < g->z2; ++z)
        for (int y = 0; y < g->y1; ++y)
            for (int x = 0; x < g->nx; ++x) {
                const uint64_t i = ((uint64_t)(g->z2s + z) * (uint64_t)g->ny + (uint64_t)(g->y1s + y)) *
                                       (uint64_t)g->nx + (uint64_t)x;
                cplx *c = &xp[((size_t)z * g->y1 + y) * g->nx + x];
                (*c)[0] = value(2 * i);
                (*c)[1] = value(2 * i + 1);
            }
}

static double cabs2(const cplx c) { return sqrt(c[0] * c[0] + c[1] * c[1]); }

/* The largest |a - b| over this rank's Z pencil against the serial
 * transform of the whole grid, relative to the largest |b| (both MAX over
 * the ranks: exact). */
static double forward_error(const grid *g, const cplx *zp) {
    const size_t total = (size_t)g->nx * g->ny * g->nz;
    cplx *all = fftw_alloc_complex(total);
    for (int z = 0; z < g->nz; ++z)
        for (int y = 0; y < g->ny; ++y)
            for (int x = 0; x < g->nx; ++x) {
                const uint64_t i = ((uint64_t)z * (uint64_t)g->ny + (uint64_t)y) * (uint64_t)g->nx + (uint64_t)x;
                all[i][0] = value(2 * i);
                all[i][1] = value(2 * i + 1);
            }
    /* Row-major [z][y][x]: FFTW's n0 = NZ, n1 = NY, n2 = NX. */
    fftw_plan p = fftw_plan_dft_3d(g->nz, g->ny, g->nx, all, all, FFTW_FORWARD, FFTW_ESTIMATE);
    fftw_execute(p);
    fftw_destroy_plan(p);
    double err[2] = {0, 0}; /* largest difference, largest reference magnitude */
    for (int y = 0; y < g->y2; ++y)
        for (int x = 0; x < g->x1; ++x)
            for (int z = 0; z < g->nz; ++z) {
                const cplx *ref = &all[((size_t)z * g->ny + (size_t)(g->y2s + y)) * g->nx + (size_t)(g->x1s + x)];
                const cplx *got = &zp[((size_t)y * g->x1 + x) * g->nz + z];
                cplx d = {(*got)[0] - (*ref)[0], (*got)[1] - (*ref)[1]};
                if (cabs2(d) > err[0]) err[0] = cabs2(d);
                if (cabs2(*ref) > err[1]) err[1] = cabs2(*ref);
            }
    fftw_free(all);
    double max[2];
    MPI_Allreduce(err, max, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max[1] > 0 ? max[0] / max[1] : max[0];
}

/* The round trip against the data it started from. */
static double roundtrip_error(const grid *g, const cplx *xp) {
    cplx *start = fftw_alloc_complex(g->xp ? g->xp : 1);
    fill(g, start);
    double err = 0;
    for (size_t i = 0; i < g->xp; ++i) {
        cplx d = {xp[i][0] - start[i][0], xp[i][1] - start[i][1]};
        if (cabs2(d) > err) err = cabs2(d);
    }
    fftw_free(start);
    double max;
    MPI_Allreduce(&err, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

static int compare_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o;
    const int parsed = parse(argc, argv, rank, &o);
    if (parsed) {
        MPI_Finalize();
        return parsed == 1 ? 0 : 2;
    }
    int dims[2] = {o.p1, o.p2};
    if (!o.p1 && !o.p2) MPI_Dims_create(size, 2, dims);
    if (dims[0] * dims[1] != size) {
        if (rank == 0)
            fprintf(stderr, "fft3d: --pgrid %dx%d is %d ranks; the job has %d\n", dims[0], dims[1],
                    dims[0] * dims[1], size);
        MPI_Finalize();
        return 2;
    }
    plan_flags = o.measure ? FFTW_MEASURE : FFTW_ESTIMATE;

    fft f = {0};
    grid *g = &f.g;
    g->nx = o.n[0];
    g->ny = o.n[1];
    g->nz = o.n[2];
    g->p1 = dims[0];
    g->p2 = dims[1];
    g->r1 = rank % g->p1;
    g->r2 = rank / g->p1;
    MPI_Comm_split(MPI_COMM_WORLD, g->r2, g->r1, &g->row);
    MPI_Comm_split(MPI_COMM_WORLD, g->r1, g->r2, &g->col);
    g->y1 = part_len(g->ny, g->p1, g->r1);
    g->y1s = part_start(g->ny, g->p1, g->r1);
    g->x1 = part_len(g->nx, g->p1, g->r1);
    g->x1s = part_start(g->nx, g->p1, g->r1);
    g->z2 = part_len(g->nz, g->p2, g->r2);
    g->z2s = part_start(g->nz, g->p2, g->r2);
    g->y2 = part_len(g->ny, g->p2, g->r2);
    g->y2s = part_start(g->ny, g->p2, g->r2);
    g->xp = (size_t)g->z2 * g->y1 * g->nx;
    g->yp = (size_t)g->z2 * g->x1 * g->ny;
    g->zp = (size_t)g->y2 * g->x1 * g->nz;
    /* A slab is never empty on a rank that holds data; more slabs than
     * planes is the plane count. */
    const int slabs = o.blocking ? 1 : o.slabs; /* the baseline: one exchange per transpose */
    f.slabs1 = slabs < g->z2 ? slabs : (g->z2 ? g->z2 : 1);
    f.slabs2 = slabs < g->x1 ? slabs : (g->x1 ? g->x1 : 1);
    /* Every rank of a communicator must post the same number of exchanges. */
    MPI_Allreduce(MPI_IN_PLACE, &f.slabs1, 1, MPI_INT, MPI_MIN, g->row);
    MPI_Allreduce(MPI_IN_PLACE, &f.slabs2, 1, MPI_INT, MPI_MIN, g->col);
    f.blocking = o.blocking;

    size_t biggest = g->xp > g->yp ? g->xp : g->yp;
    if (g->zp > biggest) biggest = g->zp;
    if (!biggest) biggest = 1;
    cplx *xp = fftw_alloc_complex(biggest), *yp = fftw_alloc_complex(biggest),
         *zp = fftw_alloc_complex(biggest);
    f.send = fftw_alloc_complex(biggest);
    f.recv = fftw_alloc_complex(biggest);
    if (!xp || !yp || !zp || !f.send || !f.recv) {
        fprintf(stderr, "fft3d: rank %d: out of memory for 5 x %zu complex values\n", rank, biggest);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    /* Touched before any timing (first-touch page faults are not FFT time). */
    memset(xp, 0, sizeof(cplx) * biggest);
    memset(yp, 0, sizeof(cplx) * biggest);
    memset(zp, 0, sizeof(cplx) * biggest);
    memset(f.send, 0, sizeof(cplx) * biggest);
    memset(f.recv, 0, sizeof(cplx) * biggest);
    setup_exchanges(&f);

    int even1 = 1, even2 = 1;
    for (int s = 0; s < f.slabs1; ++s) even1 &= f.t1[s].even;
    for (int s = 0; s < f.slabs2; ++s) even2 &= f.t2[s].even;
    MPI_Allreduce(MPI_IN_PLACE, &even1, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &even2, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("fft3d: grid %dx%dx%d, process grid %dx%d, %d ranks, %s\n", g->nx, g->ny, g->nz,
               g->p1, g->p2, size,
               o.blocking ? "blocking (MPI_Alltoall(v) per transpose)"
                          : "pipelined (MPI_Ialltoall(v) per slab)");
        printf("fft3d: slabs %d (transpose 1) and %d (transpose 2); transposes %s and %s\n",
               f.slabs1, f.slabs2, even1 ? "even (alltoall)" : "uneven (alltoallv)",
               even2 ? "even (alltoall)" : "uneven (alltoallv)");
        fflush(stdout);
    }

    /* Checks first (also a warm-up): forward against the serial transform,
     * then the round trip. */
    if (o.check) {
        fill(g, xp);
        forward(&f, xp, yp, zp);
        const double ef = forward_error(g, zp);
        inverse(&f, zp, yp, xp);
        const double er = roundtrip_error(g, xp);
        const int ok = ef < 1e-10 && er < 1e-10;
        if (rank == 0) {
            printf("result: forward max error %.1e (relative to the largest magnitude), round trip %.1e: %s\n",
                   ef, er, ok ? "PASSED (< 1e-10)" : "FAILED (>= 1e-10)");
            fflush(stdout);
        }
        if (!ok) {
            MPI_Finalize();
            return 1;
        }
    }

    const int total = o.warmup + o.iterations;
    double *times = malloc(sizeof(double) * (size_t)o.iterations);
    double *waits = malloc(sizeof(double) * (size_t)o.iterations);
    fill(g, xp);
    for (int it = 0; it < total; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        f.wait_s = 0;
        const double t0 = now();
        forward(&f, xp, yp, zp);
        inverse(&f, zp, yp, xp);
        double t = now() - t0, w = f.wait_s;
        /* The slowest rank's time: a transform is done when every rank is. */
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it >= o.warmup) {
            times[it - o.warmup] = t;
            waits[it - o.warmup] = w;
        }
    }
    qsort(times, (size_t)o.iterations, sizeof(double), compare_double);
    qsort(waits, (size_t)o.iterations, sizeof(double), compare_double);
    const double t = times[o.iterations / 2], w = waits[o.iterations / 2];
    const double points = (double)g->nx * g->ny * g->nz;
    /* 5 N log2 N per complex transform of N points, forward and inverse. */
    const double flops = 2 * 5 * points * log2(points);
    if (rank == 0) {
        printf("fft3d: time per forward+inverse %.6f s (median of %d; min %.6f, max %.6f), %.2f GFLOP/s\n",
               t, o.iterations, times[0], times[o.iterations - 1], points > 1 ? flops / t * 1e-9 : 0.0);
        printf("fft3d: waiting for transposes %.6f s (median, slowest rank), %.0f %% of the time\n", w,
               t > 0 ? 100 * w / t : 0.0);
    }

    for (int i = 0; i < nplans; ++i) fftw_destroy_plan(plans[i].plan);
    for (int s = 0; s < f.slabs1; ++s) free(f.t1[s].scounts);
    for (int s = 0; s < f.slabs2; ++s) free(f.t2[s].scounts);
    free(f.t1);
    free(f.t2);
    free(times);
    free(waits);
    fftw_free(xp);
    fftw_free(yp);
    fftw_free(zp);
    fftw_free(f.send);
    fftw_free(f.recv);
    MPI_Comm_free(&g->row);
    MPI_Comm_free(&g->col);
    fftw_cleanup();
    MPI_Finalize();
    return 0;
}
