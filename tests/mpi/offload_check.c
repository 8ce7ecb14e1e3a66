/* offload_check: an ordinary MPI program (it includes only <mpi.h>) that runs the
 * collectives deputy's PMPI library offloads, and the cases it must pass to MPI,
 * and prints one line per case:
 *
 *   case <name> <hash>
 *
 * where <hash> covers every output byte of every rank (FNV-1a per rank, then
 * over the ranks' hashes in rank order). Run once as it is and once with
 * LD_PRELOAD=libdeputy-mpi-<mpi>.so: the two outputs must be identical line for
 * line (tests/mpi/run_offload_check.py compares them).
 *
 * Every input is a function of (rank, case name, element index), chosen so that
 * sums and products are exact in any order (small integers, quarters, powers of
 * two): a float result does not depend on the order in which MPI or the agent
 * reduces. Each rank also computes what each output must be and checks it, that
 * send buffers were not written, and that the guard bytes around every output
 * buffer (and the gaps between alltoallv blocks) are untouched; a case that
 * fails any of these gets "WRONG <n>" after its hash, the details go to stderr
 * ("offload_check: rank R: case NAME: ..."), and rank 0 exits 1.
 *
 * Usage: offload_check [--full] [--only SUBSTRING] [--skip SUBSTRING] [--repeat N]
 *   --full   the whole cross product of the matrix, not the covering subset
 *   --only   only the cases whose name contains SUBSTRING (up to 8 --only:
 *            any of them): the inputs depend on the name, not on the order,
 *            so a failing case is reproduced alone with the same bytes
 *   --skip   not the cases whose name contains SUBSTRING (up to 8)
 *   --repeat every case N times (default 1): more chances for a race the
 *            runner counts, such as the members claiming an operation
 */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- results ---------------------------------------------------------- */

typedef struct {
    char name[96];
    uint64_t hash;
    long bad;
} case_result;

/* Where one thread runs its cases: its communicator and what it recorded. */
typedef struct {
    MPI_Comm comm;
    int rank, size;
    const char *prefix; /* "" or "thread0." ... */
    case_result *cases;
    size_t ncases, cap;
    /* the case being run */
    char name[96];
    uint64_t seed;
    long bad;
    int details; /* details printed for this case (at most a few) */
    /* Record the cases without running them: a rank that is not in a
     * communicator keeps the same list of cases as the ranks that are. */
    int dry;
} ctx_t;

static const char *only[8]; /* --only SUBSTRING, repeatable */
static int nonly;
static const char *skip[8]; /* --skip SUBSTRING, repeatable: a known bug's cases */
static int nskip;
static int repeat = 1; /* --repeat N */
static int full; /* --full: the whole cross product (see matrix) */
static int world_rank;

static void die(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "offload_check: rank %d: %s failed: %s\n", world_rank, what, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
}
#define CHECK(call)                              \
    do {                                         \
        int rc_ = (call);                        \
        if (rc_ != MPI_SUCCESS) die(#call, rc_); \
    } while (0)

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "offload_check: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Returns 0 when the case is filtered out (then nothing else may be called). */
static void case_end(ctx_t *c, uint64_t hash);
static int case_begin(ctx_t *c, const char *fmt, ...) {
    char tail[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    snprintf(c->name, sizeof c->name, "%s%s", c->prefix, tail);
    int wanted = !nonly;
    for (int k = 0; k < nonly && !wanted; k++) wanted = strstr(c->name, only[k]) != NULL;
    for (int k = 0; k < nskip && wanted; k++) wanted = strstr(c->name, skip[k]) == NULL;
    if (!wanted) return 0;
    c->bad = 0;
    if (c->dry) {
        case_end(c, 0);
        return 0;
    }
    c->seed = mix64(fnv(FNV0, c->name, strlen(c->name)));
    c->bad = 0;
    c->details = 0;
    return 1;
}

static void bad(ctx_t *c, long n, const char *fmt, ...) {
    c->bad += n;
    if (c->details++ >= 4) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "offload_check: rank %d: case %s: %s\n", world_rank, c->name, msg);
}

static void case_end(ctx_t *c, uint64_t hash) {
    if (c->ncases == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        case_result *grown = realloc(c->cases, c->cap * sizeof *grown);
        if (!grown) die("realloc", MPI_ERR_NO_MEM);
        c->cases = grown;
    }
    case_result *r = &c->cases[c->ncases++];
    snprintf(r->name, sizeof r->name, "%s", c->name);
    r->hash = hash;
    r->bad = c->bad;
}

/* ---- datatypes and values --------------------------------------------- */

enum kind { K_INT, K_UINT, K_FLOAT, K_BYTES };
typedef struct {
    const char *name;
    MPI_Datatype type;
    int size;
    enum kind kind;
} dtype_t;

enum { NREDUCIBLE = 13, NTYPES = 14 };
static dtype_t types[NTYPES]; /* the first NREDUCIBLE take reductions */

static void init_types(void) {
    const dtype_t t[NTYPES] = {
        {"int8", MPI_INT8_T, 1, K_INT},       {"uint8", MPI_UINT8_T, 1, K_UINT},
        {"int16", MPI_INT16_T, 2, K_INT},     {"uint16", MPI_UINT16_T, 2, K_UINT},
        {"int32", MPI_INT32_T, 4, K_INT},     {"uint32", MPI_UINT32_T, 4, K_UINT},
        {"int64", MPI_INT64_T, 8, K_INT},     {"uint64", MPI_UINT64_T, 8, K_UINT},
        {"int", MPI_INT, sizeof(int), K_INT}, {"long", MPI_LONG, sizeof(long), K_INT},
        {"float", MPI_FLOAT, 4, K_FLOAT},     {"double", MPI_DOUBLE, 8, K_FLOAT},
        /* Both MPIs reduce MPI_CHAR as the C char (signed on x86). */
        {"char", MPI_CHAR, 1, CHAR_MIN < 0 ? K_INT : K_UINT},
        {"byte", MPI_BYTE, 1, K_BYTES},
    };
    memcpy(types, t, sizeof t);
}
static const dtype_t *type_named(const char *name) {
    for (int i = 0; i < NTYPES; i++)
        if (!strcmp(types[i].name, name)) return &types[i];
    return NULL;
}

enum rop { R_NONE, R_SUM, R_PROD, R_MIN, R_MAX, R_LAND, R_LOR, R_LXOR, R_BAND, R_BOR, R_BXOR };
static const char *rop_name[] = {"move", "sum",  "prod", "min", "max", "land",
                                 "lor",  "lxor", "band", "bor", "bxor"};
/* MPI's logical and bitwise reductions: integer types only. */
static int rop_applies(const dtype_t *d, enum rop op) { return op <= R_MAX || d->kind != K_FLOAT; }
static MPI_Op mpi_op(enum rop r) {
    switch (r) {
        case R_SUM:
            return MPI_SUM;
        case R_PROD:
            return MPI_PROD;
        case R_MIN:
            return MPI_MIN;
        case R_MAX:
            return MPI_MAX;
        case R_LAND:
            return MPI_LAND;
        case R_LOR:
            return MPI_LOR;
        case R_LXOR:
            return MPI_LXOR;
        case R_BAND:
            return MPI_BAND;
        case R_BOR:
            return MPI_BOR;
        case R_BXOR:
            return MPI_BXOR;
        default:
            return MPI_OP_NULL;
    }
}

static int64_t get_i(const dtype_t *d, const void *b, size_t i) {
    const char *p = (const char *)b + i * d->size;
    switch (d->size) {
        case 1:
            return *(const int8_t *)p;
        case 2: {
            int16_t v;
            memcpy(&v, p, 2);
            return v;
        }
        case 4: {
            int32_t v;
            memcpy(&v, p, 4);
            return v;
        }
        default: {
            int64_t v;
            memcpy(&v, p, 8);
            return v;
        }
    }
}
static uint64_t get_u(const dtype_t *d, const void *b, size_t i) {
    uint64_t v = 0; /* little-endian: the low bytes */
    memcpy(&v, (const char *)b + i * d->size, d->size);
    return v;
}
static void set_u(const dtype_t *d, void *b, size_t i, uint64_t v) {
    memcpy((char *)b + i * d->size, &v, d->size); /* truncates, as a cast would */
}
static double get_f(const dtype_t *d, const void *b, size_t i) {
    if (d->size == 4) {
        float v;
        memcpy(&v, (const char *)b + i * 4, 4);
        return v;
    }
    double v;
    memcpy(&v, (const char *)b + i * 8, 8);
    return v;
}
static void set_f(const dtype_t *d, void *b, size_t i, double v) {
    if (d->size == 4) {
        float f = (float)v;
        memcpy((char *)b + i * 4, &f, 4);
    } else {
        memcpy((char *)b + i * 8, &v, 8);
    }
}

/* Element i of rank r's input for the current case, written to b[at].
 * Reductions get values whose results are exact in any order for `size`
 * ranks: sums bounded by the type's range / size, products of small factors
 * (|product| <= 2^size, which fits an int8 up to 6 ranks; 1 beyond), floats in
 * quarters for sums (11 significant bits: any sum of a few is exact) and
 * powers of two for products. Moving operations get arbitrary bytes. */
static void gen(const ctx_t *c, const dtype_t *d, enum rop op, int r, size_t i, void *b,
                size_t at) {
    uint64_t h = mix64(c->seed ^ mix64(((uint64_t)(r + 1) << 40) ^ i));
    int bits = 8 * d->size, size = c->size;
    if (op == R_NONE || d->kind == K_BYTES) {
        memcpy((char *)b + at * d->size, &h, d->size);
        return;
    }
    if (op >= R_LAND) { /* integers: zeros often enough that every result occurs */
        const uint64_t v = op == R_LAND   ? (h % 4 == 0 ? 0 : h >> 8 | 1)
                           : op == R_LOR  ? (h % 4 == 0 ? h >> 8 | 1 : 0)
                           : op == R_LXOR ? (h % 2 ? h >> 8 | 1 : 0)
                                          : h;
        set_u(d, b, at, v);
        return;
    }
    switch (d->kind) {
        case K_INT: {
            uint64_t max = (bits == 64) ? INT64_MAX : ((1ull << (bits - 1)) - 1);
            int64_t v;
            if (op == R_SUM) {
                uint64_t l = max / (uint64_t)size;
                v = (int64_t)(h % (2 * l + 1)) - (int64_t)l;
            } else if (op == R_PROD) {
                static const int64_t f4[] = {-2, -1, 1, 2};
                v = (size < bits - 2) ? f4[h % 4] : ((h & 1) ? 1 : -1);
            } else {
                v = (int64_t)h; /* min, max: the full range */
            }
            set_u(d, b, at, (uint64_t)v);
            return;
        }
        case K_UINT: {
            uint64_t max = (bits == 64) ? UINT64_MAX : ((1ull << bits) - 1);
            uint64_t v;
            if (op == R_SUM) {
                v = size == 1 && bits == 64 ? h : h % (max / (uint64_t)size + 1);
            } else if (op == R_PROD) {
                v = (size < bits) ? 1 + h % 2 : 1;
            } else {
                v = h;
            }
            set_u(d, b, at, v);
            return;
        }
        case K_FLOAT: {
            static const double f6[] = {-2, -1, -0.5, 0.5, 1, 2};
            double v;
            if (op == R_SUM)
                v = (double)((int64_t)(h % 4001) - 2000) / 4.0;
            else if (op == R_PROD)
                v = f6[h % 6];
            else
                v = (double)(int32_t)(uint32_t)h / 256.0; /* rounded to float: still a value */
            set_f(d, b, at, v);
            return;
        }
        default:
            return;
    }
}

/* acc[at] = acc[at] op x[xi] */
static void combine(const dtype_t *d, enum rop op, void *acc, size_t at, const void *x, size_t xi) {
    if (op >= R_LAND) { /* integers only (rop_applies); raw bits, truncated by set_u */
        const uint64_t a = get_u(d, acc, at), v = get_u(d, x, xi);
        const uint64_t mask = d->size == 8 ? UINT64_MAX : (1ull << (8 * d->size)) - 1;
        const int la = (a & mask) != 0, lv = (v & mask) != 0;
        const uint64_t r = op == R_LAND   ? (uint64_t)(la && lv)
                           : op == R_LOR  ? (uint64_t)(la || lv)
                           : op == R_LXOR ? (uint64_t)(la != lv)
                           : op == R_BAND ? (a & v)
                           : op == R_BOR  ? (a | v)
                                          : (a ^ v);
        set_u(d, acc, at, r);
        return;
    }
    if (d->kind == K_FLOAT) {
        double a = get_f(d, acc, at), v = get_f(d, x, xi);
        double r = op == R_SUM    ? a + v
                   : op == R_PROD ? a * v
                   : op == R_MIN  ? (v < a ? v : a)
                                  : (v > a ? v : a);
        set_f(d, acc, at, r);
    } else if (d->kind == K_INT) {
        int64_t a = get_i(d, acc, at), v = get_i(d, x, xi);
        uint64_t r = op == R_SUM    ? (uint64_t)a + (uint64_t)v
                     : op == R_PROD ? (uint64_t)a * (uint64_t)v
                     : op == R_MIN  ? (uint64_t)(v < a ? v : a)
                                    : (uint64_t)(v > a ? v : a);
        set_u(d, acc, at, r);
    } else {
        uint64_t a = get_u(d, acc, at), v = get_u(d, x, xi);
        uint64_t r = op == R_SUM    ? a + v
                     : op == R_PROD ? a * v
                     : op == R_MIN  ? (v < a ? v : a)
                                    : (v > a ? v : a);
        set_u(d, acc, at, r);
    }
}

/* want[0..n) = op over ranks r in [first, first + count) of rank r's input
 * elements from..from+n (the case's inputs). */
static void reduced(const ctx_t *c, const dtype_t *d, enum rop op, int first, int count,
                    size_t from, size_t n, void *want) {
    unsigned char one[8];
    for (size_t i = 0; i < n; i++) {
        gen(c, d, op, first, from + i, want, i);
        for (int r = first + 1; r < first + count; r++) {
            gen(c, d, op, r, from + i, one, 0);
            combine(d, op, want, i, one, 0);
        }
    }
}

/* ---- guarded buffers -------------------------------------------------- */

enum { GUARD = 64 };
static unsigned char guard_byte(size_t k) {
    return (unsigned char)(0xA5 ^ (k * 29));
}
static unsigned char fill_byte(size_t k) {
    return (unsigned char)(0x3C + k * 13);
}

/* bytes usable, GUARD guard bytes on each side. */
static void *galloc(size_t bytes) {
    unsigned char *base = xmalloc(bytes + 2 * GUARD);
    for (size_t k = 0; k < GUARD; k++) {
        base[k] = guard_byte(k);
        base[GUARD + bytes + k] = guard_byte(GUARD + k);
    }
    return base + GUARD;
}
/* Checks the guards of p (and frees it). */
static void gfree(ctx_t *c, void *p, size_t bytes, const char *what) {
    unsigned char *base = (unsigned char *)p - GUARD;
    long wrong = 0;
    long first = -1;
    for (size_t k = 0; k < GUARD; k++) {
        if (base[k] != guard_byte(k)) {
            wrong++;
            if (first < 0) first = (long)k - GUARD;
        }
        if (base[GUARD + bytes + k] != guard_byte(GUARD + k)) {
            wrong++;
            if (first < 0) first = (long)(bytes + k);
        }
    }
    if (wrong)
        bad(c, wrong, "%ld guard byte(s) around %s (%zu bytes) written, first at offset %ld", wrong,
            what, bytes, first);
    free(base);
}

/* Untouched-output pattern: what an output region holds before the call. */
static void fill_pattern(void *p, size_t bytes) {
    for (size_t k = 0; k < bytes; k++) ((unsigned char *)p)[k] = fill_byte(k);
}

/* Compares an output (or an input that must not change) byte for byte. */
static void expect_bytes(ctx_t *c, const char *what, const void *got, const void *want,
                         size_t bytes, int elem) {
    const unsigned char *g = got, *w = want;
    long wrong = 0;
    size_t first = 0;
    for (size_t k = 0; k < bytes; k++)
        if (g[k] != w[k]) {
            if (!wrong) first = k;
            wrong++;
        }
    if (!wrong) return;
    uint64_t gv = 0, wv = 0;
    size_t e = first / elem;
    size_t len = (e + 1) * elem <= bytes ? (size_t)elem : 1;
    if (len > 8) len = 8;
    memcpy(&gv, g + e * elem, len);
    memcpy(&wv, w + e * elem, len);
    bad(c, wrong,
        "%s: %ld byte(s) differ, first at byte %zu (element %zu: got 0x%llx, want 0x%llx)", what,
        wrong, first, e, (unsigned long long)gv, (unsigned long long)wv);
}

/* ---- collective matrix -------------------------------------------------- */

static void wait_one(ctx_t *c, MPI_Request *req) {
    CHECK(MPI_Wait(req, MPI_STATUS_IGNORE));
    if (*req != MPI_REQUEST_NULL) bad(c, 1, "MPI_Wait left the request active");
}

static void run_allreduce(ctx_t *c, int nb, const dtype_t *d, enum rop op, int count, int inplace) {
    if (!case_begin(c, "%sallreduce.%s.%s.n%d%s", nb ? "i" : "", d->name, rop_name[op], count,
                    inplace ? ".inplace" : ""))
        return;
    size_t bytes = (size_t)count * d->size;
    unsigned char *send = galloc(bytes), *recv = galloc(bytes), *want = xmalloc(bytes);
    for (int i = 0; i < count; i++) gen(c, d, op, c->rank, i, send, i);
    if (inplace)
        memcpy(recv, send, bytes);
    else
        fill_pattern(recv, bytes);
    const void *sb = inplace ? MPI_IN_PLACE : send;
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Iallreduce(sb, recv, count, d->type, mpi_op(op), c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Allreduce(sb, recv, count, d->type, mpi_op(op), c->comm));
    }
    reduced(c, d, op, 0, c->size, 0, count, want);
    expect_bytes(c, "result", recv, want, bytes, d->size);
    if (!inplace) {
        for (int i = 0; i < count; i++) gen(c, d, op, c->rank, i, want, i);
        expect_bytes(c, "send buffer", send, want, bytes, d->size);
    }
    case_end(c, fnv(FNV0, recv, bytes));
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, bytes, "recvbuf");
    free(want);
}

/* MPI_Reduce: the root's result, in place at the root. The others' recvbuf
 * is not significant (not checked: MPICH's tree uses it, and crashes on a
 * NULL one). */
static void run_reduce(ctx_t *c, int nb, const dtype_t *d, enum rop op, int count, int inplace,
                       int root) {
    if (!case_begin(c, "%sreduce.%s.%s.n%d.root%d%s", nb ? "i" : "", d->name, rop_name[op], count,
                    root, inplace ? ".inplace" : ""))
        return;
    const int at_root = c->rank == root;
    size_t bytes = (size_t)count * d->size;
    unsigned char *send = galloc(bytes), *recv = galloc(bytes);
    unsigned char *want = xmalloc(bytes);
    for (int i = 0; i < count; i++) gen(c, d, op, c->rank, i, send, i);
    if (at_root && inplace)
        memcpy(recv, send, bytes);
    else
        fill_pattern(recv, bytes);
    const void *sb = at_root && inplace ? MPI_IN_PLACE : send;
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Ireduce(sb, recv, count, d->type, mpi_op(op), root, c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Reduce(sb, recv, count, d->type, mpi_op(op), root, c->comm));
    }
    uint64_t hash = FNV0;
    if (at_root) {
        reduced(c, d, op, 0, c->size, 0, count, want);
        expect_bytes(c, "result", recv, want, bytes, d->size);
        hash = fnv(FNV0, recv, bytes);
    }
    if (!(at_root && inplace)) {
        for (int i = 0; i < count; i++) gen(c, d, op, c->rank, i, want, i);
        expect_bytes(c, "send buffer", send, want, bytes, d->size);
    }
    case_end(c, hash);
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, bytes, "recvbuf");
    free(want);
}

/* MPI_Scan and MPI_Exscan: rank r's result reduces ranks 0..r (0..r-1);
 * exscan's rank 0 has none (MPI leaves its recvbuf undefined: not checked
 * nor hashed). */
static void run_scan(ctx_t *c, int nb, int exclusive, const dtype_t *d, enum rop op, int count,
                     int inplace) {
    if (!case_begin(c, "%s%sscan.%s.%s.n%d%s", nb ? "i" : "", exclusive ? "ex" : "", d->name,
                    rop_name[op], count, inplace ? ".inplace" : ""))
        return;
    size_t bytes = (size_t)count * d->size;
    unsigned char *send = galloc(bytes), *recv = galloc(bytes), *want = xmalloc(bytes);
    for (int i = 0; i < count; i++) gen(c, d, op, c->rank, i, send, i);
    if (inplace)
        memcpy(recv, send, bytes);
    else
        fill_pattern(recv, bytes);
    const void *sb = inplace ? MPI_IN_PLACE : send;
    MPI_Request req;
    if (nb && exclusive) CHECK(MPI_Iexscan(sb, recv, count, d->type, mpi_op(op), c->comm, &req));
    if (nb && !exclusive) CHECK(MPI_Iscan(sb, recv, count, d->type, mpi_op(op), c->comm, &req));
    if (nb) wait_one(c, &req);
    if (!nb && exclusive) CHECK(MPI_Exscan(sb, recv, count, d->type, mpi_op(op), c->comm));
    if (!nb && !exclusive) CHECK(MPI_Scan(sb, recv, count, d->type, mpi_op(op), c->comm));
    const int upto = exclusive ? c->rank : c->rank + 1;
    uint64_t hash = FNV0;
    if (upto > 0) {
        reduced(c, d, op, 0, upto, 0, count, want);
        expect_bytes(c, "result", recv, want, bytes, d->size);
        hash = fnv(FNV0, recv, bytes);
    }
    if (!inplace) {
        for (int i = 0; i < count; i++) gen(c, d, op, c->rank, i, want, i);
        expect_bytes(c, "send buffer", send, want, bytes, d->size);
    }
    case_end(c, hash);
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, bytes, "recvbuf");
    free(want);
}

/* MPI_(I)Reduce_scatter: rank m's result block has counts[m] elements,
 * `equal` (every count `count`: the library runs it as reduce_scatter_block)
 * or not (count + m % 2: as deputy's reduce_scatterv). */
static void run_reduce_scatter(ctx_t *c, int nb, const dtype_t *d, enum rop op, int count,
                               int inplace, int equal) {
    if (!case_begin(c, "%sreduce_scatter.%s.%s.n%d%s%s", nb ? "i" : "", d->name, rop_name[op],
                    count, inplace ? ".inplace" : "", equal ? "" : ".unequal"))
        return;
    const int p = c->size, me = c->rank;
    int *counts = xmalloc(sizeof(int) * p);
    size_t nall = 0, first = 0;
    for (int m = 0; m < p; m++) {
        counts[m] = equal ? count : count + m % 2;
        if (m < me) first += (size_t)counts[m];
        nall += (size_t)counts[m];
    }
    const size_t all = nall * d->size, bytes = (size_t)counts[me] * d->size;
    unsigned char *send = galloc(all), *recv = galloc(inplace ? all : bytes), *want = xmalloc(all + 1);
    for (size_t i = 0; i < nall; i++) gen(c, d, op, me, i, send, i);
    if (inplace) memcpy(recv, send, all);
    else fill_pattern(recv, bytes);
    const void *sb = inplace ? MPI_IN_PLACE : send;
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Ireduce_scatter(sb, recv, counts, d->type, mpi_op(op), c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Reduce_scatter(sb, recv, counts, d->type, mpi_op(op), c->comm));
    }
    reduced(c, d, op, 0, p, first, (size_t)counts[me], want);
    expect_bytes(c, "result", recv, want, bytes, d->size);
    case_end(c, fnv(FNV0, recv, bytes));
    gfree(c, send, all, "sendbuf");
    gfree(c, recv, inplace ? all : bytes, "recvbuf");
    free(want);
    free(counts);
}

static void run_reduce_scatter_block(ctx_t *c, int nb, const dtype_t *d, enum rop op, int count,
                                     int inplace) {
    if (!case_begin(c, "%sreduce_scatter_block.%s.%s.n%d%s", nb ? "i" : "", d->name, rop_name[op],
                    count, inplace ? ".inplace" : ""))
        return;
    size_t bytes = (size_t)count * d->size, all = bytes * c->size;
    size_t nall = (size_t)count * c->size;
    unsigned char *send = galloc(all), *recv = galloc(inplace ? all : bytes);
    unsigned char *want = xmalloc(all);
    for (size_t i = 0; i < nall; i++) gen(c, d, op, c->rank, i, send, i);
    if (inplace)
        memcpy(recv, send, all);
    else
        fill_pattern(recv, bytes);
    const void *sb = inplace ? MPI_IN_PLACE : send;
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Ireduce_scatter_block(sb, recv, count, d->type, mpi_op(op), c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Reduce_scatter_block(sb, recv, count, d->type, mpi_op(op), c->comm));
    }
    /* The result is the first count elements; with MPI_IN_PLACE MPI leaves the
     * rest of recvbuf undefined, so only the guards around it are checked. */
    reduced(c, d, op, 0, c->size, (size_t)c->rank * count, count, want);
    expect_bytes(c, "result", recv, want, bytes, d->size);
    if (!inplace) {
        for (size_t i = 0; i < nall; i++) gen(c, d, op, c->rank, i, want, i);
        expect_bytes(c, "send buffer", send, want, all, d->size);
    }
    case_end(c, fnv(FNV0, recv, bytes));
    gfree(c, send, all, "sendbuf");
    gfree(c, recv, inplace ? all : bytes, "recvbuf");
    free(want);
}

static void run_allgather(ctx_t *c, int nb, const dtype_t *d, int count, int inplace) {
    if (!case_begin(c, "%sallgather.%s.n%d%s", nb ? "i" : "", d->name, count,
                    inplace ? ".inplace" : ""))
        return;
    size_t bytes = (size_t)count * d->size, all = bytes * c->size;
    unsigned char *send = galloc(bytes), *recv = galloc(all), *want = xmalloc(all);
    for (int i = 0; i < count; i++) gen(c, d, R_NONE, c->rank, i, send, i);
    fill_pattern(recv, all);
    if (inplace) memcpy(recv + c->rank * bytes, send, bytes);
    if (nb) {
        MPI_Request req;
        if (inplace)
            CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, d->type, c->comm,
                                 &req));
        else
            CHECK(MPI_Iallgather(send, count, d->type, recv, count, d->type, c->comm, &req));
        wait_one(c, &req);
    } else if (inplace) {
        CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, d->type, c->comm));
    } else {
        CHECK(MPI_Allgather(send, count, d->type, recv, count, d->type, c->comm));
    }
    for (int r = 0; r < c->size; r++)
        for (int i = 0; i < count; i++) gen(c, d, R_NONE, r, i, want, (size_t)r * count + i);
    expect_bytes(c, "result", recv, want, all, d->size);
    if (!inplace) expect_bytes(c, "send buffer", send, want + c->rank * bytes, bytes, d->size);
    case_end(c, fnv(FNV0, recv, all));
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, all, "recvbuf");
    free(want);
}

static void run_alltoall(ctx_t *c, int nb, const dtype_t *d, int count, int inplace) {
    if (!case_begin(c, "%salltoall.%s.n%d%s", nb ? "i" : "", d->name, count,
                    inplace ? ".inplace" : ""))
        return;
    size_t n = (size_t)count * c->size, all = n * d->size;
    unsigned char *send = galloc(all), *recv = galloc(all), *want = xmalloc(all);
    for (size_t i = 0; i < n; i++) gen(c, d, R_NONE, c->rank, i, send, i);
    if (inplace)
        memcpy(recv, send, all);
    else
        fill_pattern(recv, all);
    if (nb) {
        MPI_Request req;
        if (inplace)
            CHECK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, d->type, c->comm,
                                &req));
        else
            CHECK(MPI_Ialltoall(send, count, d->type, recv, count, d->type, c->comm, &req));
        wait_one(c, &req);
    } else if (inplace) {
        CHECK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, d->type, c->comm));
    } else {
        CHECK(MPI_Alltoall(send, count, d->type, recv, count, d->type, c->comm));
    }
    /* block r of the result is block <rank> of rank r's input */
    for (int r = 0; r < c->size; r++)
        for (int i = 0; i < count; i++)
            gen(c, d, R_NONE, r, (size_t)c->rank * count + i, want, (size_t)r * count + i);
    expect_bytes(c, "result", recv, want, all, d->size);
    if (!inplace) {
        for (size_t i = 0; i < n; i++) gen(c, d, R_NONE, c->rank, i, want, i);
        expect_bytes(c, "send buffer", send, want, all, d->size);
    }
    case_end(c, fnv(FNV0, recv, all));
    gfree(c, send, all, "sendbuf");
    gfree(c, recv, all, "recvbuf");
    free(want);
}

/* Alltoallv blocks: rank i sends cnt(i, j) elements to rank j; symmetric
 * (cnt(i,j) == cnt(j,i)), as MPI_IN_PLACE requires, some blocks empty. */
static int v_count(int count, int i, int j) {
    if (count == 0 || (i + j) % 4 == 3) return 0;
    return count + (i + j) % 3;
}
/* Send blocks in rank order with 2-element gaps; receive blocks in reverse
 * rank order with 3-element gaps (the gaps must stay untouched). Returns the
 * buffer's length in elements. */
static size_t v_layout(int count, int me, int size, int reverse, int *counts, int *displs) {
    size_t at = reverse ? 3 : 2;
    for (int k = 0; k < size; k++) {
        int j = reverse ? size - 1 - k : k;
        counts[j] = v_count(count, me, j);
        displs[j] = (int)at;
        at += counts[j] + (reverse ? 3 : 2);
    }
    return at;
}

static void run_alltoallv(ctx_t *c, int nb, const dtype_t *d, int count, int inplace) {
    if (!case_begin(c, "%salltoallv.%s.n%d%s", nb ? "i" : "", d->name, count,
                    inplace ? ".inplace" : ""))
        return;
    int p = c->size, me = c->rank;
    int *sc = xmalloc(4 * sizeof(int) * p), *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
    int *oc = xmalloc(2 * sizeof(int) * p), *od = oc + p; /* another rank's layout */
    size_t sn = v_layout(count, me, p, 0, sc, sd), rn = v_layout(count, me, p, 1, rc, rd);
    size_t sbytes = sn * d->size, rbytes = rn * d->size;
    unsigned char *send = galloc(sbytes), *recv = galloc(rbytes);
    unsigned char *want = xmalloc(sbytes > rbytes ? sbytes : rbytes);
    /* In place, the data to send is recvbuf's block j (in the receive layout). */
    fill_pattern(recv, rbytes);
    if (inplace) {
        for (int j = 0; j < p; j++)
            for (int e = 0; e < rc[j]; e++) gen(c, d, R_NONE, me, rd[j] + e, recv, rd[j] + e);
    } else {
        for (size_t i = 0; i < sn; i++) gen(c, d, R_NONE, me, i, send, i);
    }
    MPI_Request req;
    if (nb) {
        if (inplace)
            CHECK(MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, d->type,
                                 c->comm, &req));
        else
            CHECK(MPI_Ialltoallv(send, sc, sd, d->type, recv, rc, rd, d->type, c->comm, &req));
        wait_one(c, &req);
    } else if (inplace) {
        CHECK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, d->type,
                            c->comm));
    } else {
        CHECK(MPI_Alltoallv(send, sc, sd, d->type, recv, rc, rd, d->type, c->comm));
    }
    /* block j of the result: what rank j's block <me> held */
    fill_pattern(want, rbytes);
    for (int j = 0; j < p; j++) {
        v_layout(count, j, p, inplace, oc, od);
        for (int e = 0; e < rc[j]; e++) gen(c, d, R_NONE, j, od[me] + e, want, rd[j] + e);
    }
    expect_bytes(c, "result (and the gaps between blocks)", recv, want, rbytes, d->size);
    if (!inplace) {
        for (size_t i = 0; i < sn; i++) gen(c, d, R_NONE, me, i, want, i);
        expect_bytes(c, "send buffer", send, want, sbytes, d->size);
    }
    case_end(c, fnv(FNV0, recv, rbytes));
    gfree(c, send, sbytes, "sendbuf");
    gfree(c, recv, rbytes, "recvbuf");
    free(want);
    free(sc);
    free(oc);
}

/* MPI_(I)Allgatherv, MPI_(I)Gatherv, MPI_(I)Scatterv: rank m's block has
 * gv_count(count, m) elements (some 0); in the gathering buffer (every
 * receive buffer of allgatherv, the root's of gatherv, the root's send
 * buffer of scatterv) the blocks lie in reverse rank order with 3-element
 * gaps, which must stay untouched. `strided` (gatherv and scatterv): the
 * root's datatype is its element resized to twice its extent (blocks
 * spread over every other slot; a derived type at the root, which the
 * library runs through a packed copy while the others pass plain elements). */
static int gv_count(int count, int m) { return count == 0 || m % 4 == 3 ? 0 : count + m % 3; }
/* The layout in elements of the root's type; returns the buffer's length. */
static size_t gv_layout(int count, int size, int *counts, int *displs) {
    size_t at = 3;
    for (int m = size - 1; m >= 0; m--) {
        counts[m] = gv_count(count, m);
        displs[m] = (int)at;
        at += counts[m] + 3;
    }
    return at;
}

/* which: 0 allgatherv, 1 gatherv, 2 scatterv. */
static void run_vgather(ctx_t *c, int nb, int which, const dtype_t *d, int count, int inplace,
                        int root, int strided) {
    static const char *const names[] = {"allgatherv", "gatherv", "scatterv"};
    char at[16] = "";
    if (which) snprintf(at, sizeof at, ".root%d", root);
    if (!case_begin(c, "%s%s.%s.n%d%s%s%s", nb ? "i" : "", names[which], d->name, count, at,
                    inplace ? ".inplace" : "", strided ? ".strided" : ""))
        return;
    const int p = c->size, me = c->rank, at_root = which == 0 || me == root;
    int *counts = xmalloc(2 * sizeof(int) * p), *displs = counts + p;
    const size_t slots = gv_layout(count, p, counts, displs);
    const size_t stride = strided ? 2 : 1, e = d->size;
    const size_t big = slots * stride * e, own = (size_t)counts[me] * e;
    MPI_Datatype rt = d->type;
    if (strided) {
        CHECK(MPI_Type_create_resized(d->type, 0, (MPI_Aint)(2 * e), &rt));
        CHECK(MPI_Type_commit(&rt));
    }
    /* the gathering buffer (g) and this rank's own block (b) */
    unsigned char *g = galloc(big), *b = galloc(own), *want = xmalloc(big > own ? big : own);
    fill_pattern(g, big);
    fill_pattern(b, own);
    const int gathers = which != 2;
    if (which == 2 && me == root) /* the root's blocks to scatter */
        for (int m = 0; m < p; m++)
            for (int i = 0; i < counts[m]; i++)
                gen(c, d, R_NONE, m, (size_t)i, g, ((size_t)displs[m] + i) * stride);
    if (gathers) {
        for (int i = 0; i < counts[me]; i++) gen(c, d, R_NONE, me, (size_t)i, b, (size_t)i);
        if (inplace && at_root)
            for (int i = 0; i < counts[me]; i++)
                gen(c, d, R_NONE, me, (size_t)i, g, ((size_t)displs[me] + i) * stride);
    }
    MPI_Request req;
    int rc;
    const int here = inplace && (which == 0 || me == root);
    if (which == 0) {
        const void *sb = here ? MPI_IN_PLACE : b;
        rc = nb ? MPI_Iallgatherv(sb, counts[me], d->type, g, counts, displs, rt, c->comm, &req)
                : MPI_Allgatherv(sb, counts[me], d->type, g, counts, displs, rt, c->comm);
    } else if (which == 1) {
        const void *sb = here ? MPI_IN_PLACE : b;
        void *rb = me == root ? g : NULL;
        rc = nb ? MPI_Igatherv(sb, counts[me], d->type, rb, counts, displs, rt, root, c->comm,
                               &req)
                : MPI_Gatherv(sb, counts[me], d->type, rb, counts, displs, rt, root, c->comm);
    } else {
        void *rb = here ? MPI_IN_PLACE : b;
        const void *sb = me == root ? g : NULL;
        rc = nb ? MPI_Iscatterv(sb, counts, displs, rt, rb, counts[me], d->type, root, c->comm,
                                &req)
                : MPI_Scatterv(sb, counts, displs, rt, rb, counts[me], d->type, root, c->comm);
    }
    CHECK(rc);
    if (nb) wait_one(c, &req);
    uint64_t hash = FNV0;
    if (gathers && at_root) { /* every block where it lands, the gaps as they were */
        fill_pattern(want, big);
        for (int m = 0; m < p; m++)
            for (int i = 0; i < counts[m]; i++)
                gen(c, d, R_NONE, m, (size_t)i, want, ((size_t)displs[m] + i) * stride);
        expect_bytes(c, "result (and the gaps between blocks)", g, want, big, 1);
        hash = fnv(FNV0, g, big);
    } else if (!gathers && !here) {
        for (int i = 0; i < counts[me]; i++) gen(c, d, R_NONE, me, (size_t)i, want, (size_t)i);
        expect_bytes(c, "result", b, want, own, e);
        hash = fnv(FNV0, b, own);
    }
    if (strided) CHECK(MPI_Type_free(&rt));
    case_end(c, hash);
    gfree(c, g, big, "gathering buffer");
    gfree(c, b, own, "own block");
    free(want);
    free(counts);
}

/* MPI_MINLOC and MPI_MAXLOC on MPI's (value, index) pairs. Values from a
 * range of five, so that ranks tie often; the index of rank r runs against
 * the rank order ((size - 1 - r) * 2 + i % 2), so that a rule "the first
 * rank wins a tie" gives the wrong index where MPI's "the lower index wins"
 * does not. Only the value and index are compared and hashed (MPI leaves a
 * pair's padding to the implementation). */
typedef struct {
    const char *name;
    MPI_Datatype type;
    int vfloat, ifloat;    /* value / index is floating point */
    size_t vsize, isize;   /* their sizes */
    size_t ioff, extent;   /* where the index is; one pair's extent */
} pair_t;
struct p_fi { float v; int i; };
struct p_di { double v; int i; };
struct p_li { long v; int i; };
struct p_ii { int v; int i; };
struct p_si { short v; int i; };
struct p_ff { float v; float i; };
struct p_dd { double v; double i; };
#define PAIR(name, type, vf, ifl, S)                                                   \
    { name, type, vf, ifl, sizeof(((struct S *)0)->v), sizeof(((struct S *)0)->i), \
      offsetof(struct S, i), sizeof(struct S) }
static pair_t pairs[7];
static void init_pairs(void) {
    const pair_t p[7] = {
        PAIR("2int", MPI_2INT, 0, 0, p_ii),          PAIR("float_int", MPI_FLOAT_INT, 1, 0, p_fi),
        PAIR("double_int", MPI_DOUBLE_INT, 1, 0, p_di), PAIR("long_int", MPI_LONG_INT, 0, 0, p_li),
        PAIR("short_int", MPI_SHORT_INT, 0, 0, p_si), PAIR("2real", MPI_2REAL, 1, 1, p_ff),
        PAIR("2double", MPI_2DOUBLE_PRECISION, 1, 1, p_dd),
    };
    memcpy(pairs, p, sizeof p);
}
enum { NPAIRS = 7 };
static double num_get(const void *p, int fl, size_t size) {
    if (fl) {
        if (size == 4) { float f; memcpy(&f, p, 4); return f; }
        double d; memcpy(&d, p, 8); return d;
    }
    if (size == 2) { int16_t v; memcpy(&v, p, 2); return v; }
    if (size == 4) { int32_t v; memcpy(&v, p, 4); return v; }
    int64_t v; memcpy(&v, p, 8); return (double)v;
}
static void num_set(void *p, int fl, size_t size, double x) {
    if (fl) {
        if (size == 4) { float f = (float)x; memcpy(p, &f, 4); } else memcpy(p, &x, 8);
    } else if (size == 2) { int16_t v = (int16_t)x; memcpy(p, &v, 2); }
    else if (size == 4) { int32_t v = (int32_t)x; memcpy(p, &v, 4); }
    else { int64_t v = (int64_t)x; memcpy(p, &v, 8); }
}
static void pair_gen(const ctx_t *c, const pair_t *pt, int r, size_t i, unsigned char *at) {
    const uint64_t h = mix64(c->seed ^ ((uint64_t)i << 8));
    num_set(at, pt->vfloat, pt->vsize, (double)((h >> 3) % 5 + r % 2) - 2);
    num_set(at + pt->ioff, pt->ifloat, pt->isize, (double)((c->size - 1 - r) * 2 + (int)(i % 2)));
}
/* Element i reduced over ranks first..last-1, as MPI defines it. */
static void pair_reduced(const ctx_t *c, const pair_t *pt, int maxloc, int first, int last,
                         size_t i, double *value, double *index) {
    unsigned char one[16];
    for (int r = first; r < last; r++) {
        pair_gen(c, pt, r, i, one);
        const double v = num_get(one, pt->vfloat, pt->vsize);
        const double x = num_get(one + pt->ioff, pt->ifloat, pt->isize);
        if (r == first || (maxloc ? v > *value : v < *value) || (v == *value && x < *index)) {
            *value = v;
            *index = x;
        }
    }
}
static void expect_pairs(ctx_t *c, const pair_t *pt, int maxloc, int first, int last,
                         const unsigned char *got, int count, uint64_t *hash) {
    long wrong = 0;
    for (int i = 0; i < count; i++) {
        double v = 0, x = 0;
        pair_reduced(c, pt, maxloc, first, last, (size_t)i, &v, &x);
        const unsigned char *at = got + (size_t)i * pt->extent;
        const double gv = num_get(at, pt->vfloat, pt->vsize);
        const double gx = num_get(at + pt->ioff, pt->ifloat, pt->isize);
        if (gv != v || gx != x) {
            if (!wrong)
                bad(c, 1, "element %d: got (%g, %g), want (%g, %g)", i, gv, gx, v, x);
            wrong++;
        }
        *hash = fnv(*hash, at, pt->vsize);
        *hash = fnv(*hash, at + pt->ioff, pt->isize);
    }
    if (wrong > 1) bad(c, wrong - 1, "and %ld more element(s) wrong", wrong - 1);
}

/* which: 0 allreduce, 1 reduce (at `root`), 2 scan. */
static void run_loc(ctx_t *c, int nb, int which, const pair_t *pt, int maxloc, int count,
                    int inplace, int root) {
    static const char *const names[] = {"allreduce", "reduce", "scan"};
    char at[16] = ""; /* ".root<r>", as run_reduce names it (KNOWN_MPI_CRASHES match it) */
    if (which == 1) snprintf(at, sizeof at, ".root%d", root);
    if (!case_begin(c, "%s%s.%s.%s.n%d%s%s", nb ? "i" : "", names[which], pt->name,
                    maxloc ? "maxloc" : "minloc", count, at, inplace ? ".inplace" : ""))
        return;
    const MPI_Op op = maxloc ? MPI_MAXLOC : MPI_MINLOC;
    const size_t bytes = (size_t)count * pt->extent;
    unsigned char *send = galloc(bytes), *recv = galloc(bytes);
    memset(send, 0, bytes);
    for (int i = 0; i < count; i++) pair_gen(c, pt, c->rank, (size_t)i, send + i * pt->extent);
    const int at_root = which != 1 || c->rank == root;
    if (inplace && at_root) memcpy(recv, send, bytes);
    else fill_pattern(recv, bytes);
    const void *sb = inplace && at_root ? MPI_IN_PLACE : send;
    MPI_Request req;
    if (which == 0 && nb) CHECK(MPI_Iallreduce(sb, recv, count, pt->type, op, c->comm, &req));
    if (which == 0 && !nb) CHECK(MPI_Allreduce(sb, recv, count, pt->type, op, c->comm));
    if (which == 1 && nb) CHECK(MPI_Ireduce(sb, recv, count, pt->type, op, root, c->comm, &req));
    if (which == 1 && !nb) CHECK(MPI_Reduce(sb, recv, count, pt->type, op, root, c->comm));
    if (which == 2 && nb) CHECK(MPI_Iscan(sb, recv, count, pt->type, op, c->comm, &req));
    if (which == 2 && !nb) CHECK(MPI_Scan(sb, recv, count, pt->type, op, c->comm));
    if (nb) wait_one(c, &req);
    uint64_t hash = FNV0;
    if (at_root)
        expect_pairs(c, pt, maxloc, 0, which == 2 ? c->rank + 1 : c->size, recv, count, &hash);
    case_end(c, hash);
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, bytes, "recvbuf");
}

/* MPI_Gather and MPI_Scatter, roots first to last, in place at the root.
 * `column` (int types only): the root's side is a derived type that puts
 * rank r's block in column r of a count x size matrix (a vector resized to
 * one element), recvcount / sendcount 1: legal MPI that libdeputy-mpi runs
 * through a packed copy at the root while the other ranks send or receive
 * plain elements. */
static MPI_Datatype column_type(const dtype_t *d, int count, int size) {
    MPI_Datatype vec, col;
    CHECK(MPI_Type_vector(count, 1, size, d->type, &vec));
    CHECK(MPI_Type_create_resized(vec, 0, (MPI_Aint)d->size, &col));
    CHECK(MPI_Type_commit(&col));
    CHECK(MPI_Type_free(&vec));
    return col;
}
/* Where element i of rank r's block is in the root's buffer. */
static size_t rooted_at(int count, int size, int column, int r, int i) {
    return column ? (size_t)i * size + r : (size_t)r * count + i;
}

static void run_gather(ctx_t *c, int nb, const dtype_t *d, int count, int inplace, int root,
                       int column) {
    if (!case_begin(c, "%sgather.%s.n%d.root%d%s%s", nb ? "i" : "", d->name, count, root,
                    inplace ? ".inplace" : "", column ? ".column" : ""))
        return;
    const int at_root = c->rank == root;
    size_t bytes = (size_t)count * d->size, all = bytes * c->size;
    unsigned char *send = galloc(bytes), *recv = galloc(all), *want = xmalloc(all);
    for (int i = 0; i < count; i++) gen(c, d, R_NONE, c->rank, i, send, i);
    fill_pattern(recv, all);
    if (at_root && inplace)
        for (int i = 0; i < count; i++)
            gen(c, d, R_NONE, root, i, recv, rooted_at(count, c->size, column, root, i));
    MPI_Datatype rtype = column ? column_type(d, count, c->size) : d->type;
    const int rcount = column ? 1 : count;
    const void *sb = at_root && inplace ? MPI_IN_PLACE : send;
    /* the receive side is significant at the root only: the others pass junk */
    void *rb = at_root ? recv : NULL;
    if (!at_root) rtype = column ? rtype : MPI_DATATYPE_NULL;
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Igather(sb, count, d->type, rb, at_root ? rcount : 0, rtype, root, c->comm,
                          &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Gather(sb, count, d->type, rb, at_root ? rcount : 0, rtype, root, c->comm));
    }
    uint64_t hash = FNV0;
    if (at_root) {
        memset(want, 0, all);
        for (int r = 0; r < c->size; r++)
            for (int i = 0; i < count; i++)
                gen(c, d, R_NONE, r, i, want, rooted_at(count, c->size, column, r, i));
        expect_bytes(c, "result", recv, want, all, d->size);
        hash = fnv(FNV0, recv, all);
    } else {
        fill_pattern(want, all);
        expect_bytes(c, "untouched receive buffer", recv, want, all, 1);
    }
    if (!(at_root && inplace)) {
        for (int i = 0; i < count; i++) gen(c, d, R_NONE, c->rank, i, want, i);
        expect_bytes(c, "send buffer", send, want, bytes, d->size);
    }
    if (column) CHECK(MPI_Type_free(&rtype));
    case_end(c, hash);
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, all, "recvbuf");
    free(want);
}

static void run_scatter(ctx_t *c, int nb, const dtype_t *d, int count, int inplace, int root,
                        int column) {
    if (!case_begin(c, "%sscatter.%s.n%d.root%d%s%s", nb ? "i" : "", d->name, count, root,
                    inplace ? ".inplace" : "", column ? ".column" : ""))
        return;
    const int at_root = c->rank == root;
    size_t bytes = (size_t)count * d->size, all = bytes * c->size;
    unsigned char *send = galloc(all), *recv = galloc(bytes), *want = xmalloc(all);
    fill_pattern(send, all);
    if (at_root)
        for (int r = 0; r < c->size; r++)
            for (int i = 0; i < count; i++)
                gen(c, d, R_NONE, r, i, send, rooted_at(count, c->size, column, r, i));
    fill_pattern(recv, bytes);
    MPI_Datatype stype = column ? column_type(d, count, c->size) : d->type;
    const int scount = column ? 1 : count;
    void *rb = at_root && inplace ? MPI_IN_PLACE : recv;
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Iscatter(at_root ? send : NULL, at_root ? scount : 0, stype, rb, count, d->type,
                           root, c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Scatter(at_root ? send : NULL, at_root ? scount : 0, stype, rb, count, d->type,
                          root, c->comm));
    }
    uint64_t hash = FNV0;
    if (!(at_root && inplace)) {
        for (int i = 0; i < count; i++) gen(c, d, R_NONE, c->rank, i, want, i);
        expect_bytes(c, "result", recv, want, bytes, d->size);
        hash = fnv(FNV0, recv, bytes);
    }
    /* the root's send buffer (gaps included) is read, never written */
    fill_pattern(want, all);
    if (at_root)
        for (int r = 0; r < c->size; r++)
            for (int i = 0; i < count; i++)
                gen(c, d, R_NONE, r, i, want, rooted_at(count, c->size, column, r, i));
    expect_bytes(c, "send buffer", send, want, all, 1);
    if (column) CHECK(MPI_Type_free(&stype));
    case_end(c, hash);
    gfree(c, send, all, "sendbuf");
    gfree(c, recv, bytes, "recvbuf");
    free(want);
}

static void run_bcast(ctx_t *c, int nb, const dtype_t *d, int count, int root) {
    if (!case_begin(c, "%sbcast.%s.n%d.root%d", nb ? "i" : "", d->name, count, root)) return;
    size_t bytes = (size_t)count * d->size;
    unsigned char *buf = galloc(bytes), *want = xmalloc(bytes);
    for (int i = 0; i < count; i++) gen(c, d, R_NONE, root, i, want, i);
    if (c->rank == root)
        memcpy(buf, want, bytes);
    else
        fill_pattern(buf, bytes);
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Ibcast(buf, count, d->type, root, c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Bcast(buf, count, d->type, root, c->comm));
    }
    expect_bytes(c, c->rank == root ? "root's buffer" : "result", buf, want, bytes, d->size);
    case_end(c, fnv(FNV0, buf, bytes));
    gfree(c, buf, bytes, "buffer");
    free(want);
}

/* A barrier that does not synchronize is caught without timing: every rank
 * writes the round number into its slot of a shared-memory window, and after
 * the barrier every rank must see every slot at that round (the second
 * barrier keeps a fast rank from writing the next round early). */
static void run_barrier(ctx_t *c, int nb, int rounds) {
    if (!case_begin(c, "%sbarrier.shm.x%d", nb ? "i" : "", rounds)) return;
    MPI_Comm node;
    MPI_Win win;
    int nrank, nsize;
    volatile int *mine;
    CHECK(MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    CHECK(MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, node, (void *)&mine,
                                  &win));
    volatile int **slot = xmalloc(nsize * sizeof *slot);
    for (int r = 0; r < nsize; r++) {
        MPI_Aint sz;
        int du;
        CHECK(MPI_Win_shared_query(win, r, &sz, &du, (void *)&slot[r]));
    }
    *mine = -1;
    CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int k = 0; k < rounds; k++) {
        *mine = k;
        MPI_Win_sync(win);
        for (int b = 0; b < 2; b++) {
            if (nb) {
                MPI_Request req;
                CHECK(MPI_Ibarrier(c->comm, &req));
                wait_one(c, &req);
            } else {
                CHECK(MPI_Barrier(c->comm));
            }
            MPI_Win_sync(win);
            if (b == 0)
                for (int r = 0; r < nsize; r++)
                    if (*slot[r] != k)
                        bad(c, 1, "round %d: after the barrier rank %d of the node shows %d", k, r,
                            *slot[r]);
        }
    }
    CHECK(MPI_Win_unlock_all(win));
    CHECK(MPI_Win_free(&win));
    CHECK(MPI_Comm_free(&node));
    free(slot);
    case_end(c, fnv(FNV0, &rounds, sizeof rounds));
}

enum { BIG = (1 << 20) + 1 };
static const int counts[] = {0, 1, 13, 4097};
enum { NCOUNTS = sizeof counts / sizeof counts[0] };

/* --full: every operation x datatype x count x in place (x reduction, x
 * root), about 2900 cases on 4 ranks. Otherwise (CI) a covering subset of
 * about 220: every operation with every datatype, every (count, in place)
 * pair and every root; every (type, reduction) pair in one of the two forms
 * (blocking, non-blocking). The same case names as --full: each CI case is
 * one of the full run's. */
static void matrix(ctx_t *c) {
    for (int nb = 1; nb >= 0; nb--) {
        for (int t = 0; t < NREDUCIBLE; t++)
            for (int op = R_SUM; op <= R_BXOR; op++)
                for (int k = 0; k < NCOUNTS; k++)
                    for (int ip = 0; ip < 2; ip++) {
                        /* half the (type, reduction) pairs in each form, the other
                         * half in the other; each form sees every type, every
                         * reduction and all 8 (count, in place) pairs */
                        if (!rop_applies(&types[t], (enum rop)op)) continue;
                        if (!full && (((op - R_SUM) % 2 == t % 2) != nb ||
                                      k != (t + nb) % NCOUNTS || ip != (t / 3) % 2))
                            continue;
                        run_allreduce(c, nb, &types[t], op, counts[k], ip);
                        run_reduce_scatter_block(c, nb, &types[t], op, counts[k], ip);
                        run_reduce_scatter(c, nb, &types[t], op, counts[k], ip, (t + op) % 2);
                        run_reduce(c, nb, &types[t], op, counts[k], ip, (t + op) % c->size);
                        run_scan(c, nb, 0, &types[t], op, counts[k], ip);
                        run_scan(c, nb, 1, &types[t], op, counts[k], ip);
                    }
        for (int t = 0; t < NTYPES; t++)
            for (int k = 0; k < NCOUNTS; k++) {
                for (int ip = 0; ip < 2; ip++) {
                    if (!full && (k != t % NCOUNTS || ip != (t / NCOUNTS) % 2)) continue;
                    run_allgather(c, nb, &types[t], counts[k], ip);
                    run_alltoall(c, nb, &types[t], counts[k], ip);
                    run_alltoallv(c, nb, &types[t], counts[k], ip);
                }
                for (int root = 0; root < c->size; root++) {
                    if (!full && (k != t % NCOUNTS || root != t % c->size)) continue;
                    run_bcast(c, nb, &types[t], counts[k], root);
                }
                for (int root = 0; root < c->size; root++)
                    for (int ip = 0; ip < 2; ip++)
                        for (int col = 0; col < 2; col++) {
                            /* CI: one root per type and form (every root in
                             * turn), in place or not, plain or column; a
                             * column needs an element per row */
                            if (col && counts[k] == 0) continue;
                            if (!full && (root != (t + nb) % c->size || k != t % NCOUNTS ||
                                          ip != (t / 2) % 2 || col != (t / 4 + nb) % 2))
                                continue;
                            run_gather(c, nb, &types[t], counts[k], ip, root, col);
                            run_scatter(c, nb, &types[t], counts[k], ip, root, col);
                        }
                for (int which = 0; which < 3; which++)
                    for (int root = 0; root < c->size; root++)
                        for (int ip = 0; ip < 2; ip++)
                            for (int st = 0; st < 2; st++) {
                                /* CI: one root per type, form and call (every root
                                 * in turn), in place or not, strided or not */
                                if ((which == 0 && (root || st)) || (st && counts[k] == 0))
                                    continue;
                                if (!full && ((which && root != (t + nb + which) % c->size) ||
                                              k != (t + which) % NCOUNTS ||
                                              ip != (t / 2 + which) % 2 ||
                                              st != (t / 4 + nb) % 2))
                                    continue;
                                run_vgather(c, nb, which, &types[t], counts[k], ip, root, st);
                            }
            }
        for (int p = 0; p < NPAIRS; p++)
            for (int maxloc = 0; maxloc < 2; maxloc++)
                for (int which = 0; which < 3; which++)
                    for (int k = 0; k < NCOUNTS; k++)
                        for (int ip = 0; ip < 2; ip++) {
                            /* CI: every pair, both ops, each collective, in
                             * place or not, in one of the two forms */
                            if (!full && (k != (p + which) % NCOUNTS ||
                                          ip != (p + maxloc + which + nb) % 2 ||
                                          (p + maxloc) % 2 != nb))
                                continue;
                            run_loc(c, nb, which, &pairs[p], maxloc, counts[k], ip,
                                    (p + which) % c->size);
                        }
        run_barrier(c, nb, full ? 50 : 10);
    }
    /* 1 Mi + 1 elements: several of the agent's chunks, an odd tail. */
    run_allreduce(c, 1, type_named("int32"), R_SUM, BIG, 0);
    run_allreduce(c, 0, type_named("double"), R_SUM, BIG, 1);
    run_allreduce(c, 1, type_named("float"), R_MAX, BIG, 0);
    run_reduce_scatter_block(c, 1, type_named("int8"), R_SUM, BIG, 0);
    run_allgather(c, 1, type_named("byte"), BIG, 0);
    run_alltoall(c, 1, type_named("char"), BIG, 0);
    run_alltoallv(c, 1, type_named("uint8"), BIG, 0);
    run_bcast(c, 1, type_named("double"), BIG, c->size - 1);
    run_bcast(c, 0, type_named("int16"), BIG, 0);
    run_reduce(c, 1, type_named("float"), R_SUM, BIG, 0, c->size - 1);
    run_scan(c, 1, 0, type_named("int32"), R_SUM, BIG, 0);
    run_scan(c, 0, 1, type_named("double"), R_MAX, BIG, 1);
    run_gather(c, 1, type_named("int32"), BIG, 0, c->size - 1, 0);
    run_scatter(c, 0, type_named("double"), BIG, 1, 0, 0);
    run_gather(c, 0, type_named("uint16"), BIG, 1, 0, 1);
    run_vgather(c, 1, 0, type_named("int32"), BIG, 0, 0, 0);
    run_vgather(c, 1, 1, type_named("double"), BIG, 1, c->size - 1, 1);
    run_vgather(c, 0, 2, type_named("uint8"), BIG, 0, 0, 1);
}

/* The operations once each, for communicators other than MPI_COMM_WORLD. */
static void small_set(ctx_t *c) {
    const dtype_t *i32 = type_named("int32"), *dbl = type_named("double");
    run_allreduce(c, 1, i32, R_SUM, 13, 0);
    run_allreduce(c, 0, dbl, R_PROD, 4097, 1);
    run_reduce_scatter_block(c, 1, i32, R_MAX, 13, 0);
    run_allgather(c, 1, dbl, 13, 1);
    run_alltoall(c, 1, i32, 13, 0);
    run_alltoallv(c, 1, dbl, 13, 0);
    run_bcast(c, 1, i32, 4097, c->size - 1);
    run_reduce(c, 1, dbl, R_SUM, 13, 0, 0);
    run_scan(c, 0, 0, i32, R_SUM, 4097, 0);
    run_scan(c, 1, 1, dbl, R_MIN, 13, 1);
    run_gather(c, 1, i32, 13, 0, c->size - 1, 0);
    run_scatter(c, 0, dbl, 4097, 1, 0, 1);
    run_vgather(c, 1, 0, i32, 13, 1, 0, 0);
    run_vgather(c, 1, 1, dbl, 4097, 0, c->size - 1, 0);
    run_vgather(c, 0, 2, i32, 13, 0, 0, 1);
    run_barrier(c, 1, 3);
}

/* ---- what the library must pass to MPI ------------------------------ */

/* A user-defined commutative op: wrapping sum of uint32 (same result as
 * MPI_SUM, so the check is exact). */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int bytes; /* *len counts elements of *dt: uint32 or a pair of them */
    MPI_Type_size(*dt, &bytes);
    uint32_t *a = in, *b = inout;
    for (long i = 0; i < (long)*len * (bytes / 4); i++) b[i] += a[i];
}
/* A non-commutative one: composition of affine maps x -> a*x + b (mod 2^32),
 * one map per uint64 (a high, b low). MPI applies it in rank order:
 * result = f0 o f1 o ... (inout = in o inout, in from the lower ranks). */
static uint64_t compose(uint64_t f, uint64_t g) { /* (f o g)(x) = f(g(x)) */
    uint32_t fa = (uint32_t)(f >> 32), fb = (uint32_t)f, ga = (uint32_t)(g >> 32), gb = (uint32_t)g;
    return ((uint64_t)(fa * ga) << 32) | (uint32_t)(fa * gb + fb);
}
static void user_affine(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    uint64_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = compose(a[i], b[i]);
}

static void run_userop(ctx_t *c, int nb, int count, int affine, MPI_Datatype type_override,
                       const char *label) {
    if (!case_begin(c, "fallback.userop.%s.%sallreduce.n%d", label, nb ? "i" : "", count)) return;
    const dtype_t *d = type_named(affine ? "uint64" : "uint32");
    MPI_Op op;
    CHECK(MPI_Op_create(affine ? user_affine : user_sum, !affine, &op));
    size_t bytes = (size_t)count * d->size;
    unsigned char *send = galloc(bytes), *recv = galloc(bytes), *want = xmalloc(bytes);
    unsigned char one[8];
    /* sum: the R_SUM values; affine: any maps */
    for (int i = 0; i < count; i++) gen(c, d, affine ? R_NONE : R_SUM, c->rank, i, send, i);
    fill_pattern(recv, bytes);
    MPI_Datatype t = type_override != MPI_DATATYPE_NULL ? type_override : d->type;
    int n = type_override != MPI_DATATYPE_NULL ? count / 2 : count; /* contiguous(2) */
    if (nb) {
        MPI_Request req;
        CHECK(MPI_Iallreduce(send, recv, n, t, op, c->comm, &req));
        wait_one(c, &req);
    } else {
        CHECK(MPI_Allreduce(send, recv, n, t, op, c->comm));
    }
    for (int i = 0; i < count; i++) {
        gen(c, d, affine ? R_NONE : R_SUM, 0, i, want, i);
        for (int r = 1; r < c->size; r++) {
            gen(c, d, affine ? R_NONE : R_SUM, r, i, one, 0);
            if (affine) {
                uint64_t f, g;
                memcpy(&f, want + 8 * i, 8);
                memcpy(&g, one, 8);
                f = compose(f, g);
                memcpy(want + 8 * i, &f, 8);
            } else {
                combine(d, R_SUM, want, i, one, 0);
            }
        }
    }
    expect_bytes(c, "result", recv, want, bytes, d->size);
    case_end(c, fnv(FNV0, recv, bytes));
    gfree(c, send, bytes, "sendbuf");
    gfree(c, recv, bytes, "recvbuf");
    free(want);
    CHECK(MPI_Op_free(&op));
}

/* Derived datatypes in the moving operations: strided vectors (the gaps at
 * the receiver must stay untouched) and a contiguous type. */
static void run_derived(ctx_t *c, int nb) {
    const dtype_t *i32 = type_named("int32"), *dbl = type_named("double");
    const int n = 13;
    MPI_Datatype vec_int, vec_dbl, contig;
    CHECK(MPI_Type_vector(n, 1, 2, MPI_INT32_T, &vec_int));
    CHECK(MPI_Type_vector(n, 1, 3, MPI_DOUBLE, &vec_dbl));
    CHECK(MPI_Type_contiguous(5, MPI_INT32_T, &contig));
    MPI_Type_commit(&vec_int);
    MPI_Type_commit(&vec_dbl);
    MPI_Type_commit(&contig);
    MPI_Request req;

    if (case_begin(c, "fallback.derived.%sallgather.vector", nb ? "i" : "")) {
        /* every other int32 of 2n from each rank, packed at the receiver */
        size_t sb = 2 * n * 4, rb = (size_t)n * 4 * c->size;
        unsigned char *send = galloc(sb), *recv = galloc(rb), *want = xmalloc(rb);
        for (int i = 0; i < 2 * n; i++) gen(c, i32, R_NONE, c->rank, i, send, i);
        fill_pattern(recv, rb);
        if (nb) {
            CHECK(MPI_Iallgather(send, 1, vec_int, recv, n, MPI_INT32_T, c->comm, &req));
            wait_one(c, &req);
        } else {
            CHECK(MPI_Allgather(send, 1, vec_int, recv, n, MPI_INT32_T, c->comm));
        }
        for (int r = 0; r < c->size; r++)
            for (int i = 0; i < n; i++) gen(c, i32, R_NONE, r, 2 * i, want, (size_t)r * n + i);
        expect_bytes(c, "result", recv, want, rb, 4);
        case_end(c, fnv(FNV0, recv, rb));
        gfree(c, send, sb, "sendbuf");
        gfree(c, recv, rb, "recvbuf");
        free(want);
    }
    if (case_begin(c, "fallback.derived.%sbcast.vector", nb ? "i" : "")) {
        size_t bytes = 3 * n * 8;
        int root = c->size - 1;
        unsigned char *buf = galloc(bytes), *want = xmalloc(bytes);
        fill_pattern(want, bytes);
        for (int i = 0; i < n; i++) gen(c, dbl, R_NONE, root, 3 * i, want, 3 * i);
        if (c->rank == root)
            memcpy(buf, want, bytes);
        else
            fill_pattern(buf, bytes);
        if (nb) {
            CHECK(MPI_Ibcast(buf, 1, vec_dbl, root, c->comm, &req));
            wait_one(c, &req);
        } else {
            CHECK(MPI_Bcast(buf, 1, vec_dbl, root, c->comm));
        }
        expect_bytes(c, "result (and the gaps of the vector)", buf, want, bytes, 8);
        case_end(c, fnv(FNV0, buf, bytes));
        gfree(c, buf, bytes, "buffer");
        free(want);
    }
    if (case_begin(c, "fallback.derived.%salltoall.contiguous", nb ? "i" : "")) {
        /* 2 contiguous(5 x int32) per block */
        size_t per = 10, n_all = per * c->size, bytes = n_all * 4;
        unsigned char *send = galloc(bytes), *recv = galloc(bytes), *want = xmalloc(bytes);
        for (size_t i = 0; i < n_all; i++) gen(c, i32, R_NONE, c->rank, i, send, i);
        fill_pattern(recv, bytes);
        if (nb) {
            CHECK(MPI_Ialltoall(send, 2, contig, recv, 2, contig, c->comm, &req));
            wait_one(c, &req);
        } else {
            CHECK(MPI_Alltoall(send, 2, contig, recv, 2, contig, c->comm));
        }
        for (int r = 0; r < c->size; r++)
            for (size_t i = 0; i < per; i++)
                gen(c, i32, R_NONE, r, c->rank * per + i, want, r * per + i);
        expect_bytes(c, "result", recv, want, bytes, 4);
        case_end(c, fnv(FNV0, recv, bytes));
        gfree(c, send, bytes, "sendbuf");
        gfree(c, recv, bytes, "recvbuf");
        free(want);
    }
    MPI_Type_free(&vec_int);
    MPI_Type_free(&vec_dbl);
    MPI_Type_free(&contig);
}

/* An intercommunicator between the lower and the upper half of the ranks
 * (two ranks or more): results come from the other group. */
static void run_intercomm(ctx_t *c) {
    if (c->size < 2) {
        if (case_begin(c, "fallback.intercomm.skipped-one-rank")) case_end(c, 0);
        return;
    }
    const dtype_t *i32 = type_named("int32");
    int half = c->size / 2, low = c->rank < half;
    MPI_Comm local, inter;
    CHECK(MPI_Comm_split(c->comm, low, c->rank, &local));
    CHECK(MPI_Intercomm_create(local, 0, c->comm, low ? half : 0, 99, &inter));
    int lrank, rsize, rfirst = low ? half : 0;
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_remote_size(inter, &rsize);
    const int n = 13;
    MPI_Request req;
    for (int nb = 1; nb >= 0; nb--) {
        if (case_begin(c, "fallback.intercomm.%sallreduce.int32.sum.n%d", nb ? "i" : "", n)) {
            size_t bytes = n * 4;
            unsigned char *send = galloc(bytes), *recv = galloc(bytes), *want = xmalloc(bytes);
            for (int i = 0; i < n; i++) gen(c, i32, R_SUM, c->rank, i, send, i);
            fill_pattern(recv, bytes);
            if (nb) {
                CHECK(MPI_Iallreduce(send, recv, n, MPI_INT32_T, MPI_SUM, inter, &req));
                wait_one(c, &req);
            } else {
                CHECK(MPI_Allreduce(send, recv, n, MPI_INT32_T, MPI_SUM, inter));
            }
            reduced(c, i32, R_SUM, rfirst, rsize, 0, n, want);
            expect_bytes(c, "result", recv, want, bytes, 4);
            case_end(c, fnv(FNV0, recv, bytes));
            gfree(c, send, bytes, "sendbuf");
            gfree(c, recv, bytes, "recvbuf");
            free(want);
        }
        if (case_begin(c, "fallback.intercomm.%sbcast.int32.n%d", nb ? "i" : "", n)) {
            /* root: rank 0 of the lower group; the rest of its group passes
             * MPI_PROC_NULL and its buffer must not change */
            size_t bytes = n * 4;
            unsigned char *buf = galloc(bytes), *want = xmalloc(bytes);
            int root = low ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
            if (root == MPI_ROOT) {
                for (int i = 0; i < n; i++) gen(c, i32, R_NONE, 0, i, buf, i);
            } else {
                fill_pattern(buf, bytes);
            }
            memcpy(want, buf, bytes);
            if (!low)
                for (int i = 0; i < n; i++) gen(c, i32, R_NONE, 0, i, want, i);
            if (nb) {
                CHECK(MPI_Ibcast(buf, n, MPI_INT32_T, root, inter, &req));
                wait_one(c, &req);
            } else {
                CHECK(MPI_Bcast(buf, n, MPI_INT32_T, root, inter));
            }
            expect_bytes(c, "buffer", buf, want, bytes, 4);
            case_end(c, fnv(FNV0, buf, bytes));
            gfree(c, buf, bytes, "buffer");
            free(want);
        }
        if (case_begin(c, "fallback.intercomm.%sallgather.int32.n%d", nb ? "i" : "", n)) {
            size_t bytes = n * 4, rb = bytes * rsize;
            unsigned char *send = galloc(bytes), *recv = galloc(rb), *want = xmalloc(rb);
            for (int i = 0; i < n; i++) gen(c, i32, R_NONE, c->rank, i, send, i);
            fill_pattern(recv, rb);
            if (nb) {
                CHECK(MPI_Iallgather(send, n, MPI_INT32_T, recv, n, MPI_INT32_T, inter, &req));
                wait_one(c, &req);
            } else {
                CHECK(MPI_Allgather(send, n, MPI_INT32_T, recv, n, MPI_INT32_T, inter));
            }
            for (int r = 0; r < rsize; r++)
                for (int i = 0; i < n; i++) gen(c, i32, R_NONE, rfirst + r, i, want, r * n + i);
            expect_bytes(c, "result", recv, want, rb, 4);
            case_end(c, fnv(FNV0, recv, rb));
            gfree(c, send, bytes, "sendbuf");
            gfree(c, recv, rb, "recvbuf");
            free(want);
        }
        if (case_begin(c, "fallback.intercomm.%salltoall.int32.n%d", nb ? "i" : "", n)) {
            int lsize;
            MPI_Comm_size(local, &lsize);
            size_t sb = (size_t)n * 4 * rsize, rb = sb;
            unsigned char *send = galloc(sb), *recv = galloc(rb), *want = xmalloc(rb);
            for (int i = 0; i < n * rsize; i++) gen(c, i32, R_NONE, c->rank, i, send, i);
            fill_pattern(recv, rb);
            if (nb) {
                CHECK(MPI_Ialltoall(send, n, MPI_INT32_T, recv, n, MPI_INT32_T, inter, &req));
                wait_one(c, &req);
            } else {
                CHECK(MPI_Alltoall(send, n, MPI_INT32_T, recv, n, MPI_INT32_T, inter));
            }
            for (int r = 0; r < rsize; r++)
                for (int i = 0; i < n; i++)
                    gen(c, i32, R_NONE, rfirst + r, lrank * n + i, want, r * n + i);
            expect_bytes(c, "result", recv, want, rb, 4);
            case_end(c, fnv(FNV0, recv, rb));
            gfree(c, send, sb, "sendbuf");
            gfree(c, recv, rb, "recvbuf");
            free(want);
        }
        if (case_begin(c, "fallback.intercomm.%sbarrier", nb ? "i" : "")) {
            if (nb) {
                CHECK(MPI_Ibarrier(inter, &req));
                wait_one(c, &req);
            } else {
                CHECK(MPI_Barrier(inter));
            }
            case_end(c, FNV0);
        }
    }
    CHECK(MPI_Comm_free(&inter));
    CHECK(MPI_Comm_free(&local));
}

static void fallbacks(ctx_t *c) {
    for (int nb = 1; nb >= 0; nb--) {
        run_userop(c, nb, 13, 0, MPI_DATATYPE_NULL, "sum");
        run_userop(c, nb, 4097, 0, MPI_DATATYPE_NULL, "sum");
        run_userop(c, nb, 13, 1, MPI_DATATYPE_NULL, "noncommutative");
        run_derived(c, nb);
    }
    /* a derived datatype with a user-defined op: pairs of uint32 summed */
    MPI_Datatype pair;
    CHECK(MPI_Type_contiguous(2, MPI_UINT32_T, &pair));
    MPI_Type_commit(&pair);
    run_userop(c, 1, 26, 0, pair, "sum-on-derived");
    MPI_Type_free(&pair);
    run_intercomm(c);
}

/* Communicators made with MPI_Comm_split (ranks reordered, one of them
 * excluded) and MPI_Comm_dup, used, then freed with nothing outstanding; and
 * many made and freed in turn (a library that kept a team per freed
 * communicator runs out of them). */
static void communicators(ctx_t *world) {
    MPI_Comm comm;
    ctx_t sub;
    /* split: two colors by parity, rank order reversed */
    CHECK(MPI_Comm_split(world->comm, world->rank % 2, world->size - world->rank, &comm));
    sub = *world;
    sub.comm = comm;
    MPI_Comm_rank(comm, &sub.rank);
    MPI_Comm_size(comm, &sub.size);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "split%d.", world->rank % 2);
    sub.prefix = prefix;
    small_set(&sub);
    world->cases = sub.cases, world->ncases = sub.ncases, world->cap = sub.cap;
    CHECK(MPI_Comm_free(&comm));

    /* split with MPI_UNDEFINED: the last rank is left out (MPI_COMM_NULL) */
    int last = world->rank == world->size - 1;
    CHECK(MPI_Comm_split(world->comm, last ? MPI_UNDEFINED : 0, world->rank, &comm));
    if (comm != MPI_COMM_NULL) {
        sub = *world;
        sub.comm = comm;
        MPI_Comm_rank(comm, &sub.rank);
        MPI_Comm_size(comm, &sub.size);
        sub.prefix = "split-without-last.";
        small_set(&sub);
        world->cases = sub.cases, world->ncases = sub.ncases, world->cap = sub.cap;
        CHECK(MPI_Comm_free(&comm));
    } else {
        /* the same names as the ranks that run them, hash 0 */
        sub = *world;
        sub.prefix = "split-without-last.";
        sub.size = world->size - 1;
        sub.dry = 1;
        small_set(&sub);
        world->cases = sub.cases, world->ncases = sub.ncases, world->cap = sub.cap;
    }

    CHECK(MPI_Comm_dup(world->comm, &comm));
    sub = *world;
    sub.comm = comm;
    sub.prefix = "dup.";
    small_set(&sub);
    world->cases = sub.cases, world->ncases = sub.ncases, world->cap = sub.cap;
    CHECK(MPI_Comm_free(&comm));

    sub = *world;
    sub.prefix = "self.";
    sub.comm = MPI_COMM_SELF;
    sub.rank = 0;
    sub.size = 1;
    small_set(&sub);
    world->cases = sub.cases, world->ncases = sub.ncases, world->cap = sub.cap;

    /* Nonblocking collectives on two communicators started in opposite
     * orders on neighbouring ranks, which MPI allows (it orders collectives
     * per communicator): a library that set a communicator up in its first
     * collective, collectively, would have the ranks wait for each other. */
    if (case_begin(world, "comm.opposite-orders")) {
        enum { N = 16384 };
        MPI_Comm comms[2];
        int32_t *send[2], *sum[2], *all[2];
        MPI_Request req[4];
        const int p = world->size;
        for (int k = 0; k < 2; k++) {
            CHECK(MPI_Comm_dup(world->comm, &comms[k]));
            send[k] = xmalloc(N * 4);
            sum[k] = xmalloc(N * 4);
            all[k] = xmalloc((size_t)N * 4 * p);
            for (int i = 0; i < N; i++) send[k][i] = (int32_t)(i * (k + 1) + world->rank);
        }
        /* Twice: completed by MPI_Waitall, then by MPI_Waitany (which
         * leaves the wait of both communicators' operations still pending
         * each time it returns one). */
        for (int round = 0; round < 2; round++) {
            for (int j = 0; j < 2; j++) {
                const int k = (world->rank + j) % 2;
                CHECK(MPI_Iallreduce(send[k], sum[k], N, MPI_INT32_T, MPI_SUM, comms[k], &req[k]));
                CHECK(MPI_Iallgather(send[k], N, MPI_INT32_T, all[k], N, MPI_INT32_T, comms[k],
                                     &req[2 + k]));
            }
            MPI_Status sts[4]; /* not MPI_STATUSES_IGNORE: MPICH's header says 4 are written */
            if (round == 0) {
                CHECK(MPI_Waitall(4, req, sts));
            } else {
                for (int left = 4, k; left > 0; left--) CHECK(MPI_Waitany(4, req, &k, sts));
            }
        }
        uint64_t h = FNV0;
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < N; i++) {
                const int32_t want = (int32_t)(p * i * (k + 1) + p * (p - 1) / 2);
                if (sum[k][i] != want) {
                    bad(world, 1, "communicator %d: sum %d: %d, want %d", k, i, sum[k][i], want);
                    break;
                }
            }
            for (int i = 0; i < N * p; i++) {
                const int32_t want = (int32_t)((i % N) * (k + 1) + i / N);
                if (all[k][i] != want) {
                    bad(world, 1, "communicator %d: gathered %d: %d, want %d", k, i, all[k][i],
                        want);
                    break;
                }
            }
            h = fnv(h, sum[k], N * 4);
            h = fnv(h, all[k], (size_t)N * 4 * p);
            free(send[k]), free(sum[k]), free(all[k]);
            CHECK(MPI_Comm_free(&comms[k]));
        }
        case_end(world, h);
    }

    /* A communicator the library does not see created (MPI_Comm_idup does
     * not block): its first nonblocking collective goes to MPI ("team not
     * formed yet"), its first blocking one forms its team, and the next
     * nonblocking one may be offloaded. */
    if (case_begin(world, "comm.idup-nonblocking-first")) {
        MPI_Request req;
        CHECK(MPI_Comm_idup(world->comm, &comm, &req));
        CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        uint64_t h = FNV0;
        int64_t v = world->rank + 1, sum[3] = {0, 0, 0}, want = 0;
        for (int r = 0; r < world->size; r++) want += r + 1;
        CHECK(MPI_Iallreduce(&v, &sum[0], 1, MPI_INT64_T, MPI_SUM, comm, &req));
        CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        CHECK(MPI_Allreduce(&v, &sum[1], 1, MPI_INT64_T, MPI_SUM, comm));
        CHECK(MPI_Iallreduce(&v, &sum[2], 1, MPI_INT64_T, MPI_SUM, comm, &req));
        CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        for (int k = 0; k < 3; k++)
            if (sum[k] != want)
                bad(world, 1, "call %d: sum %lld, want %lld", k, (long long)sum[k], (long long)want);
        h = fnv(h, sum, sizeof sum);
        CHECK(MPI_Comm_free(&comm));
        case_end(world, h);
    }

    /* communicators one after the other, more than a client's 64 teams */
    const int rounds = 66;
    if (case_begin(world, "comm.dup-use-free.x%d", rounds)) {
        uint64_t h = FNV0;
        const dtype_t *i64 = type_named("int64");
        for (int k = 0; k < rounds; k++) {
            int64_t v = k * 1000 + world->rank, sum = 0, want = 0;
            CHECK(MPI_Comm_dup(world->comm, &comm));
            CHECK(MPI_Allreduce(&v, &sum, 1, i64->type, MPI_SUM, comm));
            CHECK(MPI_Comm_free(&comm));
            for (int r = 0; r < world->size; r++) want += k * 1000 + r;
            if (sum != want)
                bad(world, 1, "round %d: sum %lld, want %lld", k, (long long)sum, (long long)want);
            h = fnv(h, &sum, sizeof sum);
        }
        case_end(world, h);
    }
}

/* ---- mixed request arrays --------------------------------------------- */

/* A set of requests of both kinds: deputy-eligible collectives, MPI's own
 * point-to-point, and a null request. */
enum { RQ_ALLREDUCE, RQ_RECV, RQ_SEND, RQ_NULL, RQ_BCAST, RQ_ALLTOALL, RQ_BARRIER, RQ_N };
enum { RQ_COUNT = 4097, RQ_TAG = 7 };
typedef struct {
    MPI_Request req[RQ_N];
    MPI_Status st[RQ_N];
    int32_t *ar_send, *ar_recv, *p2p_send, *p2p_recv, *bc, *a2a_send, *a2a_recv;
    int left, right;
} reqset;

static void rq_post(ctx_t *c, reqset *s) {
    const dtype_t *i32 = type_named("int32");
    int n = RQ_COUNT, p = c->size;
    s->left = (c->rank + p - 1) % p;
    s->right = (c->rank + 1) % p;
    s->ar_send = xmalloc(n * 4), s->ar_recv = xmalloc(n * 4);
    s->p2p_send = xmalloc(n * 4), s->p2p_recv = xmalloc(n * 4);
    s->bc = xmalloc(n * 4);
    s->a2a_send = xmalloc((size_t)n * 4 * p), s->a2a_recv = xmalloc((size_t)n * 4 * p);
    for (int i = 0; i < n; i++) {
        gen(c, i32, R_SUM, c->rank, i, s->ar_send, i);
        gen(c, i32, R_NONE, c->rank, 1000000 + i, s->p2p_send, i);
        gen(c, i32, R_NONE, 0, 2000000 + i, s->bc, i);
    }
    for (int i = 0; i < n * p; i++) gen(c, i32, R_NONE, c->rank, 3000000 + i, s->a2a_send, i);
    if (c->rank != 0) fill_pattern(s->bc, n * 4);
    fill_pattern(s->p2p_recv, n * 4);
    CHECK(MPI_Iallreduce(s->ar_send, s->ar_recv, n, MPI_INT32_T, MPI_SUM, c->comm,
                         &s->req[RQ_ALLREDUCE]));
    /* the receive is posted with a larger count than arrives: MPI_Get_count
     * must say what arrived */
    CHECK(MPI_Irecv(s->p2p_recv, n, MPI_INT32_T, s->left, RQ_TAG, c->comm, &s->req[RQ_RECV]));
    CHECK(MPI_Isend(s->p2p_send, n - 1 - c->rank, MPI_INT32_T, s->right, RQ_TAG, c->comm,
                    &s->req[RQ_SEND]));
    s->req[RQ_NULL] = MPI_REQUEST_NULL;
    CHECK(MPI_Ibcast(s->bc, n, MPI_INT32_T, 0, c->comm, &s->req[RQ_BCAST]));
    CHECK(MPI_Ialltoall(s->a2a_send, n, MPI_INT32_T, s->a2a_recv, n, MPI_INT32_T, c->comm,
                        &s->req[RQ_ALLTOALL]));
    CHECK(MPI_Ibarrier(c->comm, &s->req[RQ_BARRIER]));
}

/* An empty status, as MPI defines it for a null or inactive request. */
static void expect_empty(ctx_t *c, const char *what, MPI_Status *st) {
    int count = -1, cancelled = -1;
    MPI_Get_count(st, MPI_INT32_T, &count);
    MPI_Test_cancelled(st, &cancelled);
    if (st->MPI_SOURCE != MPI_ANY_SOURCE || st->MPI_TAG != MPI_ANY_TAG || count != 0 || cancelled)
        bad(c, 1, "%s: status not empty: source %d tag %d count %d cancelled %d", what,
            st->MPI_SOURCE, st->MPI_TAG, count, cancelled);
}

/* Checks the data and the statuses that MPI defines (the receive's source,
 * tag and count; "not cancelled" for every completed request; the null
 * request's empty status when `null_status` is set), frees, and hashes. */
static uint64_t rq_finish(ctx_t *c, reqset *s, int null_status) {
    const dtype_t *i32 = type_named("int32");
    int n = RQ_COUNT, p = c->size;
    int32_t *want = xmalloc((size_t)n * 4 * p);
    for (int k = 0; k < RQ_N; k++)
        if (s->req[k] != MPI_REQUEST_NULL) bad(c, 1, "request %d still active after completion", k);
    reduced(c, i32, R_SUM, 0, p, 0, n, want);
    expect_bytes(c, "iallreduce result", s->ar_recv, want, n * 4, 4);
    int got = n - 1 - s->left;
    fill_pattern(want, n * 4);
    for (int i = 0; i < got; i++) gen(c, i32, R_NONE, s->left, 1000000 + i, want, i);
    expect_bytes(c, "irecv data", s->p2p_recv, want, n * 4, 4);
    for (int i = 0; i < n; i++) gen(c, i32, R_NONE, 0, 2000000 + i, want, i);
    expect_bytes(c, "ibcast result", s->bc, want, n * 4, 4);
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++)
            gen(c, i32, R_NONE, r, 3000000 + c->rank * n + i, want, (size_t)r * n + i);
    expect_bytes(c, "ialltoall result", s->a2a_recv, want, (size_t)n * 4 * p, 4);
    int count = -1;
    MPI_Get_count(&s->st[RQ_RECV], MPI_INT32_T, &count);
    if (s->st[RQ_RECV].MPI_SOURCE != s->left || s->st[RQ_RECV].MPI_TAG != RQ_TAG || count != got)
        bad(c, 1, "irecv status: source %d tag %d count %d, want %d %d %d",
            s->st[RQ_RECV].MPI_SOURCE, s->st[RQ_RECV].MPI_TAG, count, s->left, RQ_TAG, got);
    for (int k = 0; k < RQ_N; k++) {
        int cancelled = -1;
        if (k == RQ_NULL) continue;
        MPI_Test_cancelled(&s->st[k], &cancelled);
        if (cancelled) bad(c, 1, "request %d: status says cancelled", k);
    }
    if (null_status) expect_empty(c, "null request", &s->st[RQ_NULL]);
    uint64_t h = fnv(FNV0, s->ar_recv, n * 4);
    h = fnv(h, s->p2p_recv, n * 4);
    h = fnv(h, s->bc, n * 4);
    h = fnv(h, s->a2a_recv, (size_t)n * 4 * p);
    h = fnv(h, &count, sizeof count);
    free(want);
    free(s->ar_send), free(s->ar_recv), free(s->p2p_send), free(s->p2p_recv), free(s->bc);
    free(s->a2a_send), free(s->a2a_recv);
    return h;
}

/* Marks index k done; a request reported twice, or the null one, is wrong. */
static void rq_done(ctx_t *c, reqset *s, int *done, int k, const MPI_Status *st) {
    if (k < 0 || k >= RQ_N || k == RQ_NULL || done[k]) {
        bad(c, 1, "completion reported index %d (null or already done)", k);
        return;
    }
    done[k] = 1;
    s->st[k] = *st;
}

enum { GET_STATUS_POLLS = 50000000 };
static void requests(ctx_t *c) {
    reqset s;
    int done[RQ_N];
    MPI_Status st;
    if (case_begin(c, "requests.waitall")) {
        rq_post(c, &s);
        CHECK(MPI_Waitall(RQ_N, s.req, s.st));
        case_end(c, rq_finish(c, &s, 1));
    }
    if (case_begin(c, "requests.testall")) {
        rq_post(c, &s);
        int flag = 0;
        while (!flag) CHECK(MPI_Testall(RQ_N, s.req, &flag, s.st));
        case_end(c, rq_finish(c, &s, 1));
    }
    if (case_begin(c, "requests.waitany")) {
        rq_post(c, &s);
        memset(done, 0, sizeof done);
        for (int k;;) {
            CHECK(MPI_Waitany(RQ_N, s.req, &k, &st));
            if (k == MPI_UNDEFINED) break;
            rq_done(c, &s, done, k, &st);
        }
        expect_empty(c, "waitany with no active request", &st);
        for (int k = 0; k < RQ_N; k++)
            if (k != RQ_NULL && !done[k]) bad(c, 1, "waitany never returned request %d", k);
        case_end(c, rq_finish(c, &s, 0));
    }
    if (case_begin(c, "requests.testany")) {
        rq_post(c, &s);
        memset(done, 0, sizeof done);
        for (int k, flag;;) {
            CHECK(MPI_Testany(RQ_N, s.req, &k, &flag, &st));
            if (!flag) continue;
            if (k == MPI_UNDEFINED) break;
            rq_done(c, &s, done, k, &st);
        }
        expect_empty(c, "testany with no active request", &st);
        for (int k = 0; k < RQ_N; k++)
            if (k != RQ_NULL && !done[k]) bad(c, 1, "testany never returned request %d", k);
        case_end(c, rq_finish(c, &s, 0));
    }
    for (int test = 0; test < 2; test++)
        if (case_begin(c, "requests.%s", test ? "testsome" : "waitsome")) {
            int idx[RQ_N], out;
            MPI_Status sts[RQ_N];
            rq_post(c, &s);
            memset(done, 0, sizeof done);
            for (;;) {
                if (test)
                    CHECK(MPI_Testsome(RQ_N, s.req, &out, idx, sts));
                else
                    CHECK(MPI_Waitsome(RQ_N, s.req, &out, idx, sts));
                if (out == MPI_UNDEFINED) break;
                if (!test && out == 0) bad(c, 1, "waitsome returned no request");
                for (int k = 0; k < out; k++) rq_done(c, &s, done, idx[k], &sts[k]);
            }
            for (int k = 0; k < RQ_N; k++)
                if (k != RQ_NULL && !done[k]) bad(c, 1, "never returned request %d", k);
            case_end(c, rq_finish(c, &s, 0));
        }
    /* MPI_Request_get_status: completion seen without freeing; then
     * MPI_Wait frees. On a null request: flag set, empty status. */
    if (case_begin(c, "requests.get_status")) {
        rq_post(c, &s);
        for (int k = 0; k < RQ_N; k++) {
            int flag = 0;
            long polls = 0;
            MPI_Request before = s.req[k];
            /* A bound on the polls, not a time: a library whose get_status
             * never sees completion fails this case (MPI_Wait then completes
             * the request) instead of hanging the job. Completion here takes
             * about 10^5 polls. */
            while (!flag && polls++ < GET_STATUS_POLLS)
                CHECK(MPI_Request_get_status(s.req[k], &flag, &s.st[k]));
            if (!flag) {
                bad(c, 1, "request %d: MPI_Request_get_status never set flag in %ld polls", k,
                    (long)GET_STATUS_POLLS);
                CHECK(MPI_Wait(&s.req[k], &s.st[k]));
                continue;
            }
            if (s.req[k] != before) bad(c, 1, "get_status changed request %d", k);
            if (k == RQ_NULL) {
                expect_empty(c, "get_status of a null request", &s.st[k]);
                continue;
            }
            CHECK(MPI_Wait(&s.req[k], &st));
            if (k == RQ_RECV) s.st[k] = st;
        }
        case_end(c, rq_finish(c, &s, 1));
    }
    /* MPI_Request_free on a send while collectives are outstanding (freeing a
     * collective's request is erroneous in MPI, so it is not done). */
    if (case_begin(c, "requests.free")) {
        rq_post(c, &s);
        CHECK(MPI_Request_free(&s.req[RQ_SEND]));
        if (s.req[RQ_SEND] != MPI_REQUEST_NULL) bad(c, 1, "MPI_Request_free left the handle");
        CHECK(MPI_Waitall(RQ_N, s.req, s.st));
        s.st[RQ_SEND] = s.st[RQ_NULL];
        /* the receive has completed on every rank after this barrier, so the
         * freed send's buffer may go */
        CHECK(MPI_Barrier(c->comm));
        case_end(c, rq_finish(c, &s, 1));
    }
    /* Eight collectives outstanding, waited for in reverse order: waiting
     * for the last must make the earlier ones progress. */
    if (case_begin(c, "requests.outstanding-reverse")) {
        enum { K = 8, N = 4097 };
        const dtype_t *i64 = type_named("int64");
        int64_t *in = xmalloc(K * N * 8), *out = xmalloc(K * N * 8), *want = xmalloc(N * 8);
        MPI_Request req[K];
        for (int k = 0; k < K; k++) {
            for (int i = 0; i < N; i++) gen(c, i64, R_SUM, c->rank, k * N + i, in, k * N + i);
            CHECK(
                MPI_Iallreduce(in + k * N, out + k * N, N, MPI_INT64_T, MPI_SUM, c->comm, &req[k]));
        }
        for (int k = K - 1; k >= 0; k--) wait_one(c, &req[k]);
        uint64_t h = FNV0;
        for (int k = 0; k < K; k++) {
            reduced(c, i64, R_SUM, 0, c->size, k * N, N, want);
            expect_bytes(c, "result", out + k * N, want, N * 8, 8);
            h = fnv(h, out + k * N, N * 8);
        }
        case_end(c, h);
        free(in), free(out), free(want);
    }
}

/* ---- where the buffers live ------------------------------------------- */

/* An MPI_Iallreduce (sum) of n elements from send into recv, checked;
 * returns the hash of the result. The input of rank r is element `from + i`
 * of the case. */
static uint64_t checked_allreduce(ctx_t *c, const dtype_t *d, void *send, void *recv, int n,
                                  size_t from) {
    size_t bytes = (size_t)n * d->size;
    void *want = xmalloc(bytes);
    for (int i = 0; i < n; i++) gen(c, d, R_SUM, c->rank, from + i, send, i);
    fill_pattern(recv, bytes);
    MPI_Request req;
    CHECK(MPI_Iallreduce(send, recv, n, d->type, MPI_SUM, c->comm, &req));
    wait_one(c, &req);
    reduced(c, d, R_SUM, 0, c->size, from, n, want);
    expect_bytes(c, "result", recv, want, bytes, d->size);
    uint64_t h = fnv(FNV0, recv, bytes);
    free(want);
    return h;
}

static void *alloc_mem(size_t bytes) {
    void *p = NULL;
    CHECK(MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &p));
    return p;
}

/* Buffers from MPI_Alloc_mem (deputy's pool under the library, as far as it
 * goes), on the stack, in static storage, and in a mapping that is unmapped
 * and mapped again at the same address with another size (the library
 * remembers the mappings it registered). */
static void memory(ctx_t *c) {
    const dtype_t *i64 = type_named("int64"), *dbl = type_named("double"),
                  *u8 = type_named("uint8"), *i32 = type_named("int32");
    if (case_begin(c, "memory.alloc_mem.iallreduce.int64.sum.n65537")) {
        int n = 65537;
        void *send = alloc_mem(n * 8), *recv = alloc_mem(n * 8);
        case_end(c, checked_allreduce(c, i64, send, recv, n, 0));
        CHECK(MPI_Free_mem(send));
        CHECK(MPI_Free_mem(recv));
    }
    /* 36 MiB each: the second does not fit a 64 MiB pool beside the first,
     * so one buffer is deputy's and the other MPI's */
    if (case_begin(c, "memory.alloc_mem.pool-and-beyond.iallreduce.double.sum")) {
        int n = (36 << 20) / 8;
        void *send = alloc_mem((size_t)n * 8), *recv = alloc_mem((size_t)n * 8);
        case_end(c, checked_allreduce(c, dbl, send, recv, n, 0));
        CHECK(MPI_Free_mem(send));
        CHECK(MPI_Free_mem(recv));
    }
    if (case_begin(c, "memory.alloc_mem.ialltoall-iallgather-ibcast")) {
        int n = 65536, p = c->size;
        size_t all = (size_t)n * p;
        unsigned char *send = alloc_mem(all), *recv = alloc_mem(all), *want = xmalloc(all);
        MPI_Request req;
        for (size_t i = 0; i < all; i++) gen(c, u8, R_NONE, c->rank, i, send, i);
        CHECK(MPI_Ialltoall(send, n, MPI_UINT8_T, recv, n, MPI_UINT8_T, c->comm, &req));
        wait_one(c, &req);
        for (int r = 0; r < p; r++)
            for (int i = 0; i < n; i++)
                gen(c, u8, R_NONE, r, (size_t)c->rank * n + i, want, (size_t)r * n + i);
        expect_bytes(c, "ialltoall result", recv, want, all, 1);
        uint64_t h = fnv(FNV0, recv, all);
        /* in place: this rank's block of recv is its input */
        fill_pattern(recv, all);
        for (int i = 0; i < n; i++)
            gen(c, u8, R_NONE, c->rank, 1000000 + i, recv, (size_t)c->rank * n + i);
        CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_UINT8_T, c->comm,
                             &req));
        wait_one(c, &req);
        for (int r = 0; r < p; r++)
            for (int i = 0; i < n; i++) gen(c, u8, R_NONE, r, 1000000 + i, want, (size_t)r * n + i);
        expect_bytes(c, "iallgather result", recv, want, all, 1);
        h = fnv(h, recv, all);
        if (c->rank == 0)
            for (int i = 0; i < n; i++) gen(c, u8, R_NONE, 0, 2000000 + i, send, i);
        else
            fill_pattern(send, n);
        CHECK(MPI_Ibcast(send, n, MPI_UINT8_T, 0, c->comm, &req));
        wait_one(c, &req);
        for (int i = 0; i < n; i++) gen(c, u8, R_NONE, 0, 2000000 + i, want, i);
        expect_bytes(c, "ibcast result", send, want, n, 1);
        case_end(c, fnv(h, send, n));
        CHECK(MPI_Free_mem(send));
        CHECK(MPI_Free_mem(recv));
        free(want);
    }
    if (case_begin(c, "memory.stack.iallreduce.int32.sum.n13")) {
        int32_t send[13], recv[13];
        case_end(c, checked_allreduce(c, i32, send, recv, 13, 0));
    }
    if (case_begin(c, "memory.static.iallreduce.int32.sum.n4097")) {
        static int32_t send[4097], recv[4097];
        case_end(c, checked_allreduce(c, i32, send, recv, 4097, 0));
    }
    if (case_begin(c, "memory.remapped.iallreduce.int64.sum")) {
        /* 8 MiB, then 1 MiB at the same address, then 8 MiB again */
        const size_t sizes[3] = {8u << 20, 1u << 20, 8u << 20};
        unsigned char *at = NULL;
        uint64_t h = FNV0;
        for (int k = 0; k < 3; k++) {
            int flags = MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0);
            unsigned char *p = mmap(at, sizes[k], PROT_READ | PROT_WRITE, flags, -1, 0);
            if (p == MAP_FAILED) /* the address was taken meanwhile: anywhere */
                p = mmap(NULL, sizes[k], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                         0);
            if (p == MAP_FAILED) die("mmap", MPI_ERR_NO_MEM);
            at = p;
            /* send in the first half, result in the second */
            int n = (int)(sizes[k] / 2 / 8);
            h = fnv(h, &(uint64_t){checked_allreduce(c, i64, p, p + sizes[k] / 2, n, k << 24)}, 8);
            munmap(p, sizes[k]);
        }
        case_end(c, h);
    }
}

/* ---- two threads, each on its own communicator ---------------------- */

static void *thread_main(void *arg) {
    ctx_t *c = arg;
    const char *thread = c->prefix;
    char prefix[32];
    c->prefix = prefix;
    const dtype_t *i32 = type_named("int32"), *dbl = type_named("double"),
                  *u16 = type_named("uint16"), *i16 = type_named("int16");
    for (int k = 0; k < (full ? 10 : 2); k++) {
        snprintf(prefix, sizeof prefix, "%sk%d.", thread, k);
        run_allreduce(c, 1, i32, R_SUM, 13 + k, 0);
        run_allreduce(c, 0, dbl, R_PROD, 4097, k % 2);
        run_reduce_scatter_block(c, 1, i16, R_MAX, 100 + k, 0);
        run_alltoall(c, 1, u16, 7 + k, 0);
        run_alltoallv(c, 1, dbl, 5 + k, 0);
        run_allgather(c, 0, i32, 4097, 0);
        run_bcast(c, 1, dbl, 13 + k, k % c->size);
        run_barrier(c, 1, 2);
    }
    /* Communicators made, used and freed by both threads at once: their
     * first collectives (where the library makes a team) run concurrently,
     * in whatever order the threads reach them on each rank. */
    MPI_Comm parent = c->comm;
    for (int k = 0; k < 2; k++) {
        snprintf(prefix, sizeof prefix, "%sdup%d.", thread, k);
        CHECK(MPI_Comm_dup(parent, &c->comm));
        run_allreduce(c, 1, i32, R_SUM, 13, 0);
        CHECK(MPI_Comm_free(&c->comm));
    }
    c->comm = parent;
    c->prefix = thread;
    return NULL;
}

static void threads(ctx_t *world, int provided) {
    if (provided < MPI_THREAD_MULTIPLE) {
        if (case_begin(world, "threads.skipped-provided-%d", provided)) case_end(world, 0);
        return;
    }
    ctx_t t[2];
    pthread_t id[2];
    static const char *prefixes[2] = {"thread0.", "thread1."};
    for (int k = 0; k < 2; k++) {
        t[k] = *world;
        t[k].cases = NULL, t[k].ncases = t[k].cap = 0;
        t[k].prefix = prefixes[k];
        CHECK(MPI_Comm_dup(world->comm, &t[k].comm));
    }
    for (int k = 0; k < 2; k++)
        if (pthread_create(&id[k], NULL, thread_main, &t[k])) die("pthread_create", MPI_ERR_OTHER);
    for (int k = 0; k < 2; k++) pthread_join(id[k], NULL);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < t[k].ncases; i++) {
            snprintf(world->name, sizeof world->name, "%s", t[k].cases[i].name);
            world->bad = t[k].cases[i].bad;
            case_end(world, t[k].cases[i].hash);
        }
        free(t[k].cases);
        CHECK(MPI_Comm_free(&t[k].comm));
    }
}

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv) {
    int provided;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc && nonly < 8) {
            only[nonly++] = argv[++i];
        } else if (!strcmp(argv[i], "--skip") && i + 1 < argc && nskip < 8) {
            skip[nskip++] = argv[++i];
        } else if (!strcmp(argv[i], "--full")) {
            full = 1;
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            repeat = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: offload_check [--full] [--only SUBSTRING] [--skip SUBSTRING] "
                            "[--repeat N]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    init_types();
    init_pairs();
    ctx_t c = {.comm = MPI_COMM_WORLD, .prefix = ""};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.size);
    world_rank = c.rank;

    for (int round = 0; round < repeat; round++) {
        matrix(&c);
        fallbacks(&c);
        communicators(&c);
        requests(&c);
        memory(&c);
        threads(&c, provided);
    }

    /* Rank 0 collects every rank's hashes and verdicts (with MPI_Gather,
     * which deputy does not offload) and prints. */
    long n = (long)c.ncases, nn[2] = {n, -n}, extremes[2];
    CHECK(MPI_Reduce(nn, extremes, 2, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD));
    uint64_t *hashes = xmalloc(c.ncases * 8);
    long *bads = xmalloc(c.ncases * sizeof(long));
    for (size_t i = 0; i < c.ncases; i++) hashes[i] = c.cases[i].hash, bads[i] = c.cases[i].bad;
    uint64_t *all_h = NULL;
    long *all_b = NULL;
    if (c.rank == 0) {
        all_h = xmalloc(c.ncases * 8 * c.size);
        all_b = xmalloc(c.ncases * sizeof(long) * c.size);
        if (extremes[0] != n || -extremes[1] != n) {
            fprintf(stderr, "offload_check: ranks ran different numbers of cases\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    CHECK(MPI_Gather(hashes, (int)n, MPI_UINT64_T, all_h, (int)n, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    CHECK(MPI_Gather(bads, (int)n, MPI_LONG, all_b, (int)n, MPI_LONG, 0, MPI_COMM_WORLD));
    int status = 0;
    if (c.rank == 0) {
        long wrong_cases = 0;
        /* The MPI library's first line, spaces squeezed: the runner matches
         * known bugs of that MPI against it. */
        char ver[MPI_MAX_LIBRARY_VERSION_STRING], *o = ver;
        int len;
        MPI_Get_library_version(ver, &len);
        for (const char *q = ver; *q && *q != '\n'; q++)
            if (!(*q == ' ' || *q == '\t') || (o > ver && o[-1] != ' '))
                *o++ = *q == '\t' ? ' ' : *q;
        *o = 0;
        printf("offload_check size %d thread-level %d%s\n", c.size, provided, full ? " full" : "");
        printf("mpi %s\n", ver);
        for (size_t i = 0; i < c.ncases; i++) {
            uint64_t h = FNV0;
            long wrong = 0;
            for (int r = 0; r < c.size; r++) {
                h = fnv(h, &all_h[r * c.ncases + i], 8);
                wrong += all_b[r * c.ncases + i];
            }
            printf("case %s %016llx", c.cases[i].name, (unsigned long long)h);
            if (wrong) {
                printf(" WRONG %ld", wrong);
                wrong_cases++;
            }
            printf("\n");
        }
        printf("done %zu cases, %ld wrong\n", c.ncases, wrong_cases);
        status = wrong_cases ? 1 : 0;
        free(all_h), free(all_b);
    }
    fflush(stdout);
    free(hashes), free(bads), free(c.cases);
    MPI_Finalize();
    return status;
}
