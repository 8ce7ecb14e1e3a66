/*
 * lu.c - blocked right-looking LU factorisation with partial pivoting on a
 * P x Q process grid (2-D block-cyclic, like HPL), solving A x = b.
 *
 * A plain MPI program: it includes nothing of deputy, so the same binary runs
 * under any MPI library and, unmodified, under `deputy mpirun`.  The
 * collectives it exercises are the ones an HPL-like code spends its
 * communication in:
 *
 *   - MPI_Allreduce(MPI_DOUBLE_INT, MPI_MAXLOC) over the process column for
 *     every pivot search (n of them per factorisation),
 *   - MPI_Ibcast of each factored panel along the process row, overlapped
 *     with the trailing update of the previous panel (depth-1 look-ahead),
 *     or a blocking MPI_Bcast with --no-lookahead,
 *   - MPI_Gatherv/MPI_Scatterv over the process column for the row
 *     interchanges and MPI_Bcast over the process column for the U block row.
 *
 * Everything here was written for this example; only published facts are
 * used (the block-cyclic layout, the splitmix64 finaliser constants, HPL's
 * scaled-residual formula and its 2/3 n^3 + 3/2 n^2 flop count).
 *
 * Layout.  The matrix is the augmented n x (n+1) matrix [A b]: b is global
 * column n and is distributed like any other column.  Row interchanges, the
 * U solve and the trailing updates therefore also transform b into
 * y = L^-1 P b as a side effect of the factorisation (as HPL does), and the
 * solve afterwards is only the back substitution U x = y.
 *
 * Reproducibility.  All floating-point arithmetic is done locally, in an
 * order fixed by the grid alone; MPI only moves bytes (broadcasts, gathers)
 * or takes maxima, which are exact.  So the `result:` lines do not depend on
 * the MPI library or on how its collectives are implemented, and the
 * look-ahead and --no-lookahead variants do bit-identical arithmetic (the
 * update is split into the same pieces in both; only the communication
 * pattern differs).
 */
#include <mpi.h>
#include <cblas.h>

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits keep every MPI count and local index inside an int. */
#define MAX_N 200000
#define MAX_NB 4096
#define MAX_ITER 1000000

/* The trailing update is done in pieces of this many local columns so that a
 * pending panel broadcast gets MPI_Test calls (progress in MPI libraries that
 * only progress inside MPI calls) while the update runs. */
#define UPDATE_CHUNK 256

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

typedef struct {
    int n, nb;
    int p, q; /* 0: not given on the command line */
    uint64_t seed;
    int iterations, warmup;
    int lookahead;
    int help;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lu [-n N] [--nb NB] [-p P] [-q Q] [--seed S] [--iterations K]\n"
            "          [--warmup W] [--no-lookahead] [--help]\n"
            "\n"
            "Blocked LU factorisation with partial pivoting (HPL-like) of a random\n"
            "N x N matrix on a P x Q process grid, then solves A x = b and checks\n"
            "HPL's scaled residual.\n"
            "\n"
            "  -n N            matrix order (default 1024, 1..%d)\n"
            "  --nb NB         block size of the block-cyclic layout (default 64, 1..%d)\n"
            "  -p P            process rows (default 1, or ranks / Q)\n"
            "  -q Q            process columns (default ranks / P); P * Q = ranks\n"
            "  --seed S        seed of the matrix entries (default 42, unsigned 64-bit)\n"
            "  --iterations K  timed factorisations, each of a fresh matrix (default 1, 1..%d)\n"
            "  --warmup W      untimed factorisations before them (default 0, 0..%d)\n"
            "  --no-lookahead  blocking MPI_Bcast of each panel, then the update\n"
            "                  (default: look-ahead with MPI_Ibcast)\n"
            "  --help          this text\n"
            "\n"
            "Flags taking a value accept both '--flag value' and '--flag=value'.\n"
            "Exit status: 0 residual passed, 1 residual failed, 2 bad flags.\n",
            MAX_N, MAX_NB, MAX_ITER, MAX_ITER);
}

/* Strict integer parse: the whole string must be a number within [lo, hi]. */
static int parse_long(const char *flag, const char *s, long long lo, long long hi,
                      long long *out, char *err, size_t errlen)
{
    char *end = NULL;
    long long v;

    if (s == NULL) {
        snprintf(err, errlen, "lu: %s needs a value", flag);
        return -1;
    }
    v = strtoll(s, &end, 10);
    if (*s == '\0' || end == NULL || *end != '\0' || v < lo || v > hi) {
        snprintf(err, errlen, "lu: %s must be an integer in [%lld, %lld], got '%s'", flag,
                 lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Seeds are unsigned 64-bit; strtoull would silently accept "-1" (and wrap
 * it), so only decimal digits are allowed, and overflow is caught by errno. */
static int parse_seed(const char *flag, const char *s, uint64_t *out, char *err, size_t errlen)
{
    char *end = NULL;
    unsigned long long v = 0;
    int ok = s != NULL && *s != '\0';

    if (s == NULL) {
        snprintf(err, errlen, "lu: %s needs a value", flag);
        return -1;
    }
    for (const char *c = s; ok && *c; c++)
        ok = *c >= '0' && *c <= '9';
    if (ok) {
        errno = 0;
        v = strtoull(s, &end, 10);
        ok = errno == 0 && *end == '\0';
    }
    if (!ok) {
        snprintf(err, errlen, "lu: %s must be an unsigned integer in [0, %llu], got '%s'", flag,
                 (unsigned long long)UINT64_MAX, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* Returns 0 on success, -1 with a message in err.  Runs on every rank with the
 * same arguments, so all ranks agree on the outcome without communicating. */
static int parse_args(int argc, char **argv, options_t *o, char *err, size_t errlen)
{
    o->n = 1024;
    o->nb = 64;
    o->p = 0;
    o->q = 0;
    o->seed = 42;
    o->iterations = 1;
    o->warmup = 0;
    o->lookahead = 1;
    o->help = 0;

    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *arg = argv[i];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        int has_inline = 0;
        long long v = 0;

        /* "--flag=value" form */
        if (arg[0] == '-' && eq != NULL && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
            has_inline = 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }

        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            o->help = 1;
            continue;
        }
        if (strcmp(name, "--no-lookahead") == 0) {
            if (has_inline) {
                snprintf(err, errlen, "lu: --no-lookahead takes no value");
                return -1;
            }
            o->lookahead = 0;
            continue;
        }

        int takes_value = strcmp(name, "-n") == 0 || strcmp(name, "--nb") == 0 ||
                          strcmp(name, "-p") == 0 || strcmp(name, "-q") == 0 ||
                          strcmp(name, "--seed") == 0 || strcmp(name, "--iterations") == 0 ||
                          strcmp(name, "--warmup") == 0;
        if (!takes_value) {
            snprintf(err, errlen, "lu: unknown flag '%s' (try --help)", arg);
            return -1;
        }
        if (!has_inline)
            value = (i + 1 < argc) ? argv[++i] : NULL;

        if (strcmp(name, "-n") == 0) {
            if (parse_long("-n", value, 1, MAX_N, &v, err, errlen))
                return -1;
            o->n = (int)v;
        } else if (strcmp(name, "--nb") == 0) {
            if (parse_long("--nb", value, 1, MAX_NB, &v, err, errlen))
                return -1;
            o->nb = (int)v;
        } else if (strcmp(name, "-p") == 0) {
            if (parse_long("-p", value, 1, INT_MAX, &v, err, errlen))
                return -1;
            o->p = (int)v;
        } else if (strcmp(name, "-q") == 0) {
            if (parse_long("-q", value, 1, INT_MAX, &v, err, errlen))
                return -1;
            o->q = (int)v;
        } else if (strcmp(name, "--seed") == 0) {
            if (parse_seed("--seed", value, &o->seed, err, errlen))
                return -1;
        } else if (strcmp(name, "--iterations") == 0) {
            if (parse_long("--iterations", value, 1, MAX_ITER, &v, err, errlen))
                return -1;
            o->iterations = (int)v;
        } else { /* --warmup */
            if (parse_long("--warmup", value, 0, MAX_ITER, &v, err, errlen))
                return -1;
            o->warmup = (int)v;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Block-cyclic index arithmetic (global index g, block size nb, np processes) */

/* How many of the global indices 0..g-1 process p holds.  With g = n this is
 * the local extent; with g = a global index it is the local position of the
 * first index >= g, which is how ranges like "rows at or below the panel"
 * become local. */
static int numroc(int g, int nb, int p, int np)
{
    int blocks = g / nb;
    int cnt = (blocks / np) * nb;
    int extra = blocks % np;

    if (p < extra)
        cnt += nb;
    else if (p == extra)
        cnt += g % nb;
    return cnt;
}

static int owner_of(int g, int nb, int np) { return (g / nb) % np; }
static int local_of(int g, int nb, int np) { return (g / nb / np) * nb + g % nb; }
static int global_of(int l, int nb, int p, int np) { return ((l / nb) * np + p) * nb + l % nb; }

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ------------------------------------------------------------------------ */
/* The matrix                                                                */

/* Entry (i, j) of [A b] from a hash of its global position, so every grid and
 * every rank count sees the same matrix.  The mixing is the splitmix64
 * finaliser (Steele, Lea, Flood 2014); the seed is spread by an odd constant
 * first so that seeds s and s+1 do not give shifted copies of one matrix.
 * The top 53 bits give a double in [0, 1) exactly; minus 0.5 is exact too. */
static double entry(uint64_t seed, int n, int i, int j)
{
    uint64_t z = seed * 0xD1B54A32D192ED03ULL + (uint64_t)i * (uint64_t)(n + 1) + (uint64_t)j;

    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 - 0.5;
}

typedef struct {
    int lo, hi; /* local columns lo..hi-1 */
} range_t;

static int width(range_t r) { return r.hi > r.lo ? r.hi - r.lo : 0; }

typedef struct {
    int n, nb, P, Q, myrow, mycol;
    int mloc, nloc; /* local rows of A, local columns of [A b] */
    size_t lda;
    double *A;
    MPI_Comm rowcomm, colcomm; /* rank in rowcomm = mycol, in colcomm = myrow */
    int lookahead;

    int *ipiv; /* global, 0-based: row j was exchanged with row ipiv[j] >= j */

    /* work space */
    double *panel[2]; /* double-buffered panel broadcasts: L rows + pivots */
    double *ubuf;     /* the U block row, broadcast down the column */
    double *wsend, *wrecv, *wblock; /* row interchange buffers */
    double *prow;     /* pivot row during the panel factorisation */
    int *tpos, *tcont; /* composed interchanges of one panel */
    int *cnt, *displ, *scnt, *sdispl, *cur;

    double wait; /* seconds in MPI_Wait / MPI_Bcast of panels */
} lu_t;

static double *at(const lu_t *lu, int r, int c) { return lu->A + (size_t)r + (size_t)c * lu->lda; }

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "lu: out of memory allocating %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

static void generate(lu_t *lu, uint64_t seed)
{
    for (int lc = 0; lc < lu->nloc; lc++) {
        int gc = global_of(lc, lu->nb, lu->mycol, lu->Q);
        double *col = at(lu, 0, lc);
        for (int lr = 0; lr < lu->mloc; lr++)
            col[lr] = entry(seed, lu->n, global_of(lr, lu->nb, lu->myrow, lu->P), gc);
    }
}

static int panel_width(const lu_t *lu, int k) { return imin(lu->nb, lu->n - k * lu->nb); }

/* Rows of panel k this process row holds (global rows >= j0): the L part the
 * panel broadcast carries.  Identical on every rank of a process row. */
static int panel_rows(const lu_t *lu, int k)
{
    return lu->mloc - numroc(k * lu->nb, lu->nb, lu->myrow, lu->P);
}

/* Doubles in the panel message: the L rows plus the pivot indices, carried as
 * doubles (exact below 2^53) so one broadcast does both. */
static int panel_count(const lu_t *lu, int k)
{
    return (panel_rows(lu, k) + 1) * panel_width(lu, k);
}

/* ------------------------------------------------------------------------ */
/* Panel factorisation, by the process column that owns panel k              */

static void factor_panel(lu_t *lu, int k)
{
    const int nb = lu->nb, P = lu->P, me = lu->myrow;
    const int j0 = k * nb, jb = panel_width(lu, k);
    const int lc0 = numroc(j0, nb, lu->mycol, lu->Q);
    double *tmp = lu->wsend; /* one panel row for the exchange */

    for (int jj = 0; jj < jb; jj++) {
        const int gj = j0 + jj, col = lc0 + jj;
        const int il = numroc(gj, nb, me, P); /* local rows with global >= gj */
        struct {
            double val;
            int idx;
        } mine = {-1.0, INT_MAX}, best;

        /* Local candidate.  Local rows are in increasing global order, so the
         * strict '>' keeps the lowest global row among equal magnitudes, the
         * same rule MAXLOC applies between processes: the pivot is a
         * function of the values only, not of the grid. */
        for (int r = il; r < lu->mloc; r++) {
            double v = fabs(*at(lu, r, col));
            if (v > mine.val) {
                mine.val = v;
                mine.idx = global_of(r, nb, me, P);
            }
        }
        /* The pivot search itself: one MAXLOC over the process column (a
         * single rank when P = 1, still the same call). */
        MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, lu->colcomm);
        const int gp = best.idx;
        lu->ipiv[gj] = gp;

        /* Exchange rows gj and gp across the whole panel width, as LAPACK's
         * unblocked factorisation does, so the L columns to the left follow
         * the interchange too. */
        const int pj = owner_of(gj, nb, P), pp = owner_of(gp, nb, P);
        if (gp != gj) {
            if (pj == pp) {
                if (me == pj) {
                    double *a = at(lu, local_of(gj, nb, P), lc0);
                    double *b = at(lu, local_of(gp, nb, P), lc0);
                    for (int c = 0; c < jb; c++) {
                        double t = a[(size_t)c * lu->lda];
                        a[(size_t)c * lu->lda] = b[(size_t)c * lu->lda];
                        b[(size_t)c * lu->lda] = t;
                    }
                }
            } else if (me == pj || me == pp) {
                const int other = me == pj ? pp : pj;
                double *a = at(lu, local_of(me == pj ? gj : gp, nb, P), lc0);
                for (int c = 0; c < jb; c++)
                    tmp[c] = a[(size_t)c * lu->lda];
                MPI_Sendrecv_replace(tmp, jb, MPI_DOUBLE, other, 1, other, 1, lu->colcomm,
                                     MPI_STATUS_IGNORE);
                for (int c = 0; c < jb; c++)
                    a[(size_t)c * lu->lda] = tmp[c];
            }
        }

        /* Every process of the column needs the pivot row (from the pivot
         * on) for the scaling and the rank-1 update. */
        const int len = jb - jj;
        if (me == pj) {
            const double *a = at(lu, local_of(gj, nb, P), col);
            for (int c = 0; c < len; c++)
                lu->prow[c] = a[(size_t)c * lu->lda];
        }
        if (P > 1)
            MPI_Bcast(lu->prow, len, MPI_DOUBLE, pj, lu->colcomm);

        /* Scale the column below the pivot, then the rank-1 update of the
         * remaining panel columns.  A plain loop: each entry gets exactly one
         * multiply and one subtract whatever the grid, which keeps the panel
         * (and so the pivots) the same on every grid as far as possible. */
        const int il2 = numroc(gj + 1, nb, me, P);
        const double piv = lu->prow[0];
        double *l = at(lu, 0, col);
        if (piv != 0.0) /* a zero pivot (singular matrix) is left as is */
            for (int r = il2; r < lu->mloc; r++)
                l[r] /= piv;
        for (int c = 1; c < len; c++) {
            const double u = lu->prow[c];
            double *a = at(lu, 0, col + c);
            for (int r = il2; r < lu->mloc; r++)
                a[r] -= l[r] * u;
        }
    }
}

/* Copy the factored panel (rows at or below the diagonal block) and its
 * pivots into the broadcast buffer. */
static void pack_panel(const lu_t *lu, int k, double *buf)
{
    const int j0 = k * lu->nb, jb = panel_width(lu, k);
    const int i0 = numroc(j0, lu->nb, lu->myrow, lu->P);
    const int rows = lu->mloc - i0;
    const int lc0 = numroc(j0, lu->nb, lu->mycol, lu->Q);

    for (int c = 0; c < jb; c++)
        if (rows > 0)
            memcpy(buf + (size_t)c * rows, at(lu, i0, lc0 + c), (size_t)rows * sizeof(double));
    for (int q = 0; q < jb; q++)
        buf[(size_t)rows * jb + q] = (double)lu->ipiv[j0 + q];
}

static void unpack_pivots(lu_t *lu, int k, const double *buf)
{
    const int j0 = k * lu->nb, jb = panel_width(lu, k);
    const size_t off = (size_t)panel_rows(lu, k) * jb;

    for (int q = 0; q < jb; q++)
        lu->ipiv[j0 + q] = (int)buf[off + q];
}

/* ------------------------------------------------------------------------ */
/* Row interchanges of panel k on the local columns left U right            */

static void pack_row(const lu_t *lu, int lr, range_t a, range_t b, double *dst)
{
    const double *row = lu->A + lr;
    for (int c = a.lo; c < a.hi; c++)
        *dst++ = row[(size_t)c * lu->lda];
    for (int c = b.lo; c < b.hi; c++)
        *dst++ = row[(size_t)c * lu->lda];
}

static void unpack_row(lu_t *lu, int lr, range_t a, range_t b, const double *src)
{
    double *row = lu->A + lr;
    for (int c = a.lo; c < a.hi; c++)
        row[(size_t)c * lu->lda] = *src++;
    for (int c = b.lo; c < b.hi; c++)
        row[(size_t)c * lu->lda] = *src++;
}

/*
 * The panel's jb interchanges (j0+q <-> ipiv[j0+q], in order) are first
 * composed into one permutation of the rows they touch.  Every move then
 * involves the diagonal block, which process row pr = k % P holds whole:
 *  - a block position receives some original row (from any process row),
 *  - a touched row below the block receives an original block row: a row
 *    from below only ever moves into the block, as the pivot of step q, and
 *    position j0+q is not touched by any later step.
 * So one MPI_Gatherv to pr and one MPI_Scatterv from pr do all the moves, in
 * two collectives instead of jb pairwise exchanges.
 */
static void swap_rows(lu_t *lu, int k, range_t left, range_t right)
{
    const int nb = lu->nb, P = lu->P, me = lu->myrow;
    const int j0 = k * nb, jb = panel_width(lu, k), pr = k % P;
    const int ncs = width(left) + width(right);
    int nt = jb;

    if (ncs == 0) /* the whole process column agrees: same columns */
        return;

    /* tpos[t]: a touched global row; tcont[t]: the original row that ends up
     * there.  Entries 0..jb-1 are the block positions. */
    for (int q = 0; q < jb; q++)
        lu->tpos[q] = lu->tcont[q] = j0 + q;
    for (int q = 0; q < jb; q++) {
        const int g = lu->ipiv[j0 + q];
        int t;
        if (g == j0 + q)
            continue;
        if (g < j0 + jb) {
            t = g - j0;
        } else {
            for (t = jb; t < nt && lu->tpos[t] != g; t++)
                ;
            if (t == nt) {
                lu->tpos[nt] = lu->tcont[nt] = g;
                nt++;
            }
        }
        int s = lu->tcont[q];
        lu->tcont[q] = lu->tcont[t];
        lu->tcont[t] = s;
    }

    if (me != pr) {
        int m = 0, mine = 0;
        /* our rows that move into the block, in block order */
        for (int q = 0; q < jb; q++) {
            const int src = lu->tcont[q];
            if (owner_of(src, nb, P) == me)
                pack_row(lu, local_of(src, nb, P), left, right, lu->wsend + (size_t)(m++) * ncs);
        }
        for (int t = jb; t < nt; t++)
            if (lu->tcont[t] != lu->tpos[t] && owner_of(lu->tpos[t], nb, P) == me)
                mine++;
        /* Gathered before the scatter overwrites: a row can be both. */
        MPI_Gatherv(lu->wsend, m * ncs, MPI_DOUBLE, NULL, NULL, NULL, MPI_DOUBLE, pr,
                    lu->colcomm);
        MPI_Scatterv(NULL, NULL, NULL, MPI_DOUBLE, lu->wrecv, mine * ncs, MPI_DOUBLE, pr,
                     lu->colcomm);
        m = 0;
        for (int t = jb; t < nt; t++)
            if (lu->tcont[t] != lu->tpos[t] && owner_of(lu->tpos[t], nb, P) == me)
                unpack_row(lu, local_of(lu->tpos[t], nb, P), left, right,
                           lu->wrecv + (size_t)(m++) * ncs);
        return;
    }

    /* Process row pr.  Counts of what comes from / goes to each process row;
     * our own part is moved locally (count 0 in the collectives). */
    for (int p = 0; p < P; p++)
        lu->cnt[p] = lu->scnt[p] = 0;
    for (int q = 0; q < jb; q++) {
        const int p = owner_of(lu->tcont[q], nb, P);
        if (p != pr)
            lu->cnt[p] += ncs;
    }
    for (int t = jb; t < nt; t++) {
        if (lu->tcont[t] == lu->tpos[t])
            continue;
        if (owner_of(lu->tcont[t], nb, P) != pr || lu->tcont[t] >= j0 + jb) {
            /* cannot happen (see above); refuse to produce a wrong matrix */
            fprintf(stderr, "lu: internal error: row interchange outside the block\n");
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        const int p = owner_of(lu->tpos[t], nb, P);
        if (p != pr)
            lu->scnt[p] += ncs;
    }
    int off = 0, soff = 0;
    for (int p = 0; p < P; p++) {
        lu->displ[p] = off;
        lu->sdispl[p] = soff;
        off += lu->cnt[p];
        soff += lu->scnt[p];
    }
    if (P > 1)
        MPI_Gatherv(lu->wsend, 0, MPI_DOUBLE, lu->wrecv, lu->cnt, lu->displ, MPI_DOUBLE, pr,
                    lu->colcomm);

    /* Build everything from the original rows before writing any. */
    for (int p = 0; p < P; p++)
        lu->cur[p] = lu->displ[p];
    for (int q = 0; q < jb; q++) {
        const int src = lu->tcont[q];
        const int p = owner_of(src, nb, P);
        double *dst = lu->wblock + (size_t)q * ncs;
        if (src == j0 + q)
            continue;
        if (p == pr) {
            pack_row(lu, local_of(src, nb, P), left, right, dst);
        } else {
            memcpy(dst, lu->wrecv + lu->cur[p], (size_t)ncs * sizeof(double));
            lu->cur[p] += ncs;
        }
    }
    for (int p = 0; p < P; p++)
        lu->cur[p] = lu->sdispl[p];
    int loc = soff; /* our own displaced rows go after the segments sent */
    for (int t = jb; t < nt; t++) {
        if (lu->tcont[t] == lu->tpos[t])
            continue;
        const int p = owner_of(lu->tpos[t], nb, P);
        double *dst;
        if (p == pr) {
            dst = lu->wsend + loc;
            loc += ncs;
        } else {
            dst = lu->wsend + lu->cur[p];
            lu->cur[p] += ncs;
        }
        pack_row(lu, local_of(lu->tcont[t], nb, P), left, right, dst);
    }

    for (int q = 0; q < jb; q++)
        if (lu->tcont[q] != j0 + q)
            unpack_row(lu, local_of(j0 + q, nb, P), left, right, lu->wblock + (size_t)q * ncs);
    loc = soff;
    for (int t = jb; t < nt; t++) {
        if (lu->tcont[t] == lu->tpos[t] || owner_of(lu->tpos[t], nb, P) != pr)
            continue;
        unpack_row(lu, local_of(lu->tpos[t], nb, P), left, right, lu->wsend + loc);
        loc += ncs;
    }
    if (P > 1)
        MPI_Scatterv(lu->wsend, lu->scnt, lu->sdispl, MPI_DOUBLE, lu->wrecv, 0, MPI_DOUBLE, pr,
                     lu->colcomm);
}

/* ------------------------------------------------------------------------ */
/* Update with panel k: interchanges on left and right, U block row on right,
 * trailing dgemm on right.  buf is panel k's broadcast buffer. */

static void update(lu_t *lu, int k, const double *buf, range_t left, range_t right,
                   MPI_Request *poll)
{
    const int nb = lu->nb, P = lu->P, me = lu->myrow;
    const int j0 = k * nb, jb = panel_width(lu, k), pr = k % P;
    const int i0 = numroc(j0, nb, me, P);
    const int ldl = imax(1, lu->mloc - i0);
    const int ncr = width(right);

    swap_rows(lu, k, left, right);
    if (ncr == 0)
        return;

    /* U12 = L11^-1 A12 where the block row lives, then down the column. */
    if (me == pr) {
        double *u = at(lu, i0, right.lo);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, jb, ncr,
                    1.0, buf, ldl, u, (int)lu->lda);
        for (int c = 0; c < ncr; c++)
            memcpy(lu->ubuf + (size_t)c * jb, u + (size_t)c * lu->lda,
                   (size_t)jb * sizeof(double));
    }
    if (P > 1)
        MPI_Bcast(lu->ubuf, jb * ncr, MPI_DOUBLE, pr, lu->colcomm);

    /* A22 -= L21 U12 on the rows below the block. */
    const int it = numroc(j0 + jb, nb, me, P);
    const int m = lu->mloc - it;
    if (m <= 0)
        return;
    for (int c0 = 0; c0 < ncr; c0 += UPDATE_CHUNK) {
        const int nc = imin(UPDATE_CHUNK, ncr - c0);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, nc, jb, -1.0,
                    buf + (it - i0), ldl, lu->ubuf + (size_t)c0 * jb, jb, 1.0,
                    at(lu, it, right.lo + c0), (int)lu->lda);
        /* Let the library move the next panel while we compute. */
        if (poll != NULL && *poll != MPI_REQUEST_NULL) {
            int done = 0;
            MPI_Test(poll, &done, MPI_STATUS_IGNORE);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The factorisation                                                         */

static void factorise(lu_t *lu)
{
    const int nb = lu->nb, Q = lu->Q, me = lu->mycol;
    const int K = (lu->n + nb - 1) / nb;
    MPI_Request req = MPI_REQUEST_NULL;
    double t;

    lu->wait = 0.0;
    if (lu->lookahead) {
        if (me == 0) {
            factor_panel(lu, 0);
            pack_panel(lu, 0, lu->panel[0]);
        }
        MPI_Ibcast(lu->panel[0], panel_count(lu, 0), MPI_DOUBLE, 0, lu->rowcomm, &req);
    }

    for (int k = 0; k < K; k++) {
        double *buf = lu->panel[k & 1];
        const int owner = k % Q;
        const int j0 = k * nb, jb = panel_width(lu, k);

        if (lu->lookahead) {
            t = MPI_Wtime();
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            lu->wait += MPI_Wtime() - t;
        } else {
            if (me == owner) {
                factor_panel(lu, k);
                pack_panel(lu, k, buf);
            }
            t = MPI_Wtime();
            MPI_Bcast(buf, panel_count(lu, k), MPI_DOUBLE, owner, lu->rowcomm);
            lu->wait += MPI_Wtime() - t;
        }
        unpack_pivots(lu, k, buf);

        const range_t left = {0, numroc(j0, nb, me, Q)};
        const range_t right = {numroc(j0 + jb, nb, me, Q), lu->nloc};
        const range_t none = {0, 0};
        const int has_next = k + 1 < K;
        double *next = lu->panel[(k + 1) & 1];

        if (has_next && me == (k + 1) % Q) {
            /* We own the next panel: bring its columns up to date first, so it
             * can be factored and sent before the bulk of our update.  The
             * baseline splits the update the same way, so both variants do
             * the same arithmetic. */
            const int jbn = panel_width(lu, k + 1);
            const range_t cols = {right.lo, right.lo + jbn};
            const range_t rest = {right.lo + jbn, lu->nloc};

            update(lu, k, buf, none, cols, NULL);
            if (lu->lookahead) {
                factor_panel(lu, k + 1);
                pack_panel(lu, k + 1, next);
                MPI_Ibcast(next, panel_count(lu, k + 1), MPI_DOUBLE, me, lu->rowcomm, &req);
            }
            update(lu, k, buf, left, rest, &req);
        } else {
            /* Post the receive of the next panel now; it travels while we
             * update with this one. */
            if (lu->lookahead && has_next)
                MPI_Ibcast(next, panel_count(lu, k + 1), MPI_DOUBLE, (k + 1) % Q, lu->rowcomm,
                           &req);
            update(lu, k, buf, left, right, &req);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Solve and check (not timed)                                               */

/* Back substitution U x = y with y the transformed b column.  x ends up on
 * every rank.  Partial sums are combined by MPI_Gather (a copy) and added in
 * process-column order here, never by an MPI reduction, so x does not depend
 * on the MPI library. */
static void back_substitute(lu_t *lu, double *x, MPI_Comm world, int size)
{
    const int n = lu->n, nb = lu->nb, P = lu->P, Q = lu->Q;
    const int pcb = owner_of(n, nb, Q), lcb = numroc(n, nb, pcb, Q);
    double *y = xmalloc((size_t)n * sizeof(double));
    double *part = xmalloc((size_t)imax(1, lu->mloc) * sizeof(double));
    int *counts = xmalloc((size_t)size * sizeof(int));
    int *displs = xmalloc((size_t)size * sizeof(int));
    double *gath = xmalloc((size_t)Q * nb * sizeof(double));
    double *s = xmalloc((size_t)nb * sizeof(double));
    double *xk = xmalloc((size_t)nb * sizeof(double));
    int off = 0;

    /* y to every rank: exact copies with MPI_Allgatherv. */
    for (int r = 0; r < size; r++) {
        counts[r] = (r % Q == pcb) ? numroc(n, nb, r / Q, P) : 0;
        displs[r] = off;
        off += counts[r];
    }
    double *all = xmalloc((size_t)imax(1, off) * sizeof(double));
    const int mycount = lu->mycol == pcb ? lu->mloc : 0;
    for (int l = 0; l < mycount; l++)
        part[l] = *at(lu, l, lcb);
    MPI_Allgatherv(part, mycount, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, world);
    for (int r = 0; r < size; r++)
        for (int l = 0; l < counts[r]; l++)
            y[global_of(l, nb, r / Q, P)] = all[displs[r] + l];

    for (int k = (n + nb - 1) / nb - 1; k >= 0; k--) {
        const int r0 = k * nb, kb = imin(nb, n - r0);
        const int pr = k % P, pc = k % Q;

        if (lu->myrow == pr) {
            const int lr0 = local_of(r0, nb, P);
            const int cs = numroc(r0 + kb, nb, lu->mycol, Q);
            const int ce = numroc(n, nb, lu->mycol, Q);

            for (int q = 0; q < kb; q++)
                s[q] = 0.0;
            for (int lc = cs; lc < ce; lc++) {
                const double xv = x[global_of(lc, nb, lu->mycol, Q)];
                const double *u = at(lu, lr0, lc);
                for (int q = 0; q < kb; q++)
                    s[q] += u[q] * xv;
            }
            MPI_Gather(s, kb, MPI_DOUBLE, gath, kb, MPI_DOUBLE, pc, lu->rowcomm);
            if (lu->mycol == pc) {
                const int lcd = local_of(r0, nb, Q);
                for (int q = 0; q < kb; q++) {
                    double v = y[r0 + q];
                    for (int c = 0; c < Q; c++)
                        v -= gath[(size_t)c * kb + q];
                    xk[q] = v;
                }
                for (int q = kb - 1; q >= 0; q--) {
                    double v = xk[q];
                    for (int qq = q + 1; qq < kb; qq++)
                        v -= *at(lu, lr0 + q, lcd + qq) * xk[qq];
                    xk[q] = v / *at(lu, lr0 + q, lcd + q);
                }
            }
        }
        MPI_Bcast(xk, kb, MPI_DOUBLE, pr * Q + pc, world);
        memcpy(x + r0, xk, (size_t)kb * sizeof(double));
    }
    free(all);
    free(xk);
    free(s);
    free(gath);
    free(displs);
    free(counts);
    free(part);
    free(y);
}

/* HPL's scaled residual ||Ax-b||oo / (eps (||A||oo ||x||oo + ||b||oo) n).
 * Rows are dealt round-robin over all ranks and regenerated from the hash;
 * each row's dot product is summed locally in column order and the ranks
 * combine only maxima, so the value is independent of the grid's reduction
 * structure and of the MPI library (it depends on x alone). */
static double residual(const double *x, int n, uint64_t seed, MPI_Comm world, int rank, int size)
{
    double loc[4] = {0.0, 0.0, 0.0, 0.0}, glob[4]; /* |Ax-b|, ||A||, ||x||, ||b|| */

    for (int i = rank; i < n; i += size) {
        double dot = 0.0, asum = 0.0;
        for (int j = 0; j < n; j++) {
            const double a = entry(seed, n, i, j);
            dot += a * x[j];
            asum += fabs(a);
        }
        const double b = entry(seed, n, i, n);
        const double r = fabs(dot - b);
        /* NaN would be lost by MAX; make it infinite so the check fails. */
        loc[0] = fmax(loc[0], isnan(r) ? INFINITY : r);
        loc[1] = fmax(loc[1], asum);
        loc[3] = fmax(loc[3], fabs(b));
    }
    for (int j = 0; j < n; j++)
        loc[2] = fmax(loc[2], isnan(x[j]) ? INFINITY : fabs(x[j]));
    MPI_Allreduce(loc, glob, 4, MPI_DOUBLE, MPI_MAX, world);

    /* HPL takes eps from HPL_dlamch('eps'), the unit round-off 2^-53. */
    const double eps = DBL_EPSILON / 2.0;
    return glob[0] / (eps * (glob[1] * glob[2] + glob[3]) * (double)n);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int cnt)
{
    qsort(v, (size_t)cnt, sizeof(double), cmp_double);
    return cnt % 2 ? v[cnt / 2] : 0.5 * (v[cnt / 2 - 1] + v[cnt / 2]);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    options_t o;
    char err[256];
    int rank, size;
    MPI_Comm world = MPI_COMM_WORLD;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);

    if (parse_args(argc, argv, &o, err, sizeof err) != 0) {
        if (rank == 0)
            fprintf(stderr, "%s\n", err);
        MPI_Finalize();
        return 2;
    }
    if (o.help) {
        if (rank == 0)
            usage(stdout);
        MPI_Finalize();
        return 0;
    }

    /* Grid: default 1 x ranks (a block-cyclic column distribution); one of
     * -p/-q alone fixes the other. */
    int P = o.p, Q = o.q;
    if (P == 0 && Q == 0) {
        P = 1;
        Q = size;
    } else if (P == 0) {
        P = size % Q == 0 ? size / Q : 0;
    } else if (Q == 0) {
        Q = size % P == 0 ? size / P : 0;
    }
    if (P == 0 || Q == 0 || (long long)P * Q != size) {
        if (rank == 0) {
            if (o.p && o.q)
                fprintf(stderr,
                        "lu: grid -p %d x -q %d needs %lld ranks, but %d are running; "
                        "-p times -q must equal the number of ranks\n",
                        o.p, o.q, (long long)o.p * o.q, size);
            else
                fprintf(stderr,
                        "lu: %s %d does not divide the number of ranks (%d); "
                        "-p times -q must equal the number of ranks\n",
                        o.p ? "-p" : "-q", o.p ? o.p : o.q, size);
        }
        MPI_Finalize();
        return 2;
    }

    lu_t lu;
    memset(&lu, 0, sizeof lu);
    lu.n = o.n;
    lu.nb = o.nb;
    lu.P = P;
    lu.Q = Q;
    lu.myrow = rank / Q; /* row-major rank order, HPL's default mapping */
    lu.mycol = rank % Q;
    lu.lookahead = o.lookahead;
    lu.mloc = numroc(o.n, o.nb, lu.myrow, P);
    lu.nloc = numroc(o.n + 1, o.nb, lu.mycol, Q);
    lu.lda = (size_t)imax(1, lu.mloc);
    MPI_Comm_split(world, lu.myrow, lu.mycol, &lu.rowcomm);
    MPI_Comm_split(world, lu.mycol, lu.myrow, &lu.colcomm);

    const size_t wcap = (size_t)o.nb * (size_t)imax(1, lu.nloc);
    const size_t pcap = (size_t)(lu.mloc + 1) * (size_t)o.nb;
    lu.A = xmalloc(lu.lda * (size_t)imax(1, lu.nloc) * sizeof(double));
    lu.ipiv = xmalloc((size_t)o.n * sizeof(int));
    lu.panel[0] = xmalloc(pcap * sizeof(double));
    lu.panel[1] = xmalloc(pcap * sizeof(double));
    lu.ubuf = xmalloc(wcap * sizeof(double));
    /* wsend also holds one panel row (nb) in the panel factorisation */
    lu.wsend = xmalloc((wcap > (size_t)o.nb ? wcap : (size_t)o.nb) * sizeof(double));
    lu.wrecv = xmalloc(wcap * sizeof(double));
    lu.wblock = xmalloc(wcap * sizeof(double));
    lu.prow = xmalloc((size_t)o.nb * sizeof(double));
    lu.tpos = xmalloc(2 * (size_t)o.nb * sizeof(int));
    lu.tcont = xmalloc(2 * (size_t)o.nb * sizeof(int));
    lu.cnt = xmalloc((size_t)P * sizeof(int));
    lu.displ = xmalloc((size_t)P * sizeof(int));
    lu.scnt = xmalloc((size_t)P * sizeof(int));
    lu.sdispl = xmalloc((size_t)P * sizeof(int));
    lu.cur = xmalloc((size_t)P * sizeof(int));

    if (rank == 0) {
        printf("lu: n %d, nb %d, grid %dx%d, %s, %d rank%s\n", o.n, o.nb, P, Q,
               o.lookahead ? "look-ahead (MPI_Ibcast)" : "no look-ahead (MPI_Bcast)", size,
               size == 1 ? "" : "s");
        fflush(stdout);
    }

    double *times = xmalloc((size_t)o.iterations * sizeof(double));
    double *waits = xmalloc((size_t)o.iterations * sizeof(double));
    for (int it = 0; it < o.warmup + o.iterations; it++) {
        double mine[2], most[2];

        generate(&lu, o.seed);
        MPI_Barrier(world);
        const double t0 = MPI_Wtime();
        factorise(&lu);
        mine[0] = MPI_Wtime() - t0;
        mine[1] = lu.wait;
        /* The factorisation ends when its slowest rank does. */
        MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, world);
        if (it >= o.warmup) {
            times[it - o.warmup] = most[0];
            waits[it - o.warmup] = most[1];
        }
    }

    const double tmed = median(times, o.iterations);
    const double wmed = median(waits, o.iterations);
    const double nn = (double)o.n;
    const double flops = 2.0 / 3.0 * nn * nn * nn + 1.5 * nn * nn;

    double *x = xmalloc((size_t)o.n * sizeof(double));
    back_substitute(&lu, x, world, size);
    const double r = residual(x, o.n, o.seed, world, rank, size);
    const int passed = r < 16.0; /* false for NaN too */

    if (rank == 0) {
        /* (i+1) * ipiv[i] with 1-based pivots as LAPACK reports them,
         * summed modulo 2^64: exact and grid independent. */
        uint64_t sum = 0;
        for (int i = 0; i < o.n; i++)
            sum += (uint64_t)(i + 1) * (uint64_t)(lu.ipiv[i] + 1);
        printf("lu: time per factorisation %.6f s (median of %d), %.2f GFLOP/s "
               "(2/3 n^3 + 3/2 n^2 flops), of which waiting for panels %.5f s\n",
               tmed, o.iterations, tmed > 0 ? flops / tmed / 1e9 : 0.0, wmed);
        printf("result: residual %.1e %s (threshold 16)\n", r, passed ? "PASSED" : "FAILED");
        printf("result: pivot checksum %llu\n", (unsigned long long)sum);
        fflush(stdout);
    }

    free(x);
    free(waits);
    free(times);
    free(lu.cur);
    free(lu.sdispl);
    free(lu.scnt);
    free(lu.displ);
    free(lu.cnt);
    free(lu.tcont);
    free(lu.tpos);
    free(lu.prow);
    free(lu.wblock);
    free(lu.wrecv);
    free(lu.wsend);
    free(lu.ubuf);
    free(lu.panel[1]);
    free(lu.panel[0]);
    free(lu.ipiv);
    free(lu.A);
    MPI_Comm_free(&lu.colcomm);
    MPI_Comm_free(&lu.rowcomm);
    MPI_Finalize();
    return passed ? 0 : 1;
}
