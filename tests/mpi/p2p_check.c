/* An MPI program of point-to-point calls that checks its own results and
 * prints one `result:` line per case (a checksum of what each rank
 * received, gathered on rank 0): tests/apps/run_app_check.py runs it under
 * the MPI's launcher and under `deputy mpirun --p2p` and compares the lines.
 * It includes only <mpi.h>.
 *
 * Cases: a ring of Isend/Irecv at sizes 0 B to 1 MiB + 1 (waited with
 * MPI_Waitall beside a request of MPI's own), MPI_Send/MPI_Recv with
 * MPI_ANY_SOURCE and MPI_ANY_TAG (the status's source, tag and count),
 * MPI_Sendrecv and MPI_Sendrecv_replace around the ring, MPI_Probe and
 * MPI_Iprobe before a receive of the probed size, 500 early messages per
 * rank received in order by tag (MPI_Send and MPI_Recv in any_source and
 * the ring of sizes), MPI_Issend and MPI_Ssend around the ring, MPI_PROC_NULL, and a truncated receive
 * (MPI_ERR_TRUNCATE with MPI_ERRORS_RETURN). Usage: p2p_check (no
 * arguments); exit 1 on a wrong result. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failed;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "p2p_check: rank %d: WRONG: %s\n", rank, what);
        failed = 1;
    }
}

static unsigned char byte_of(int from, size_t i, int salt) {
    return (unsigned char)((from * 131 + (int)i * 7 + salt + (int)(i >> 9)) & 0xff);
}

static uint64_t checksum(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Every rank's value on rank 0, summed into one line. */
static void result(const char *name, uint64_t mine) {
    uint64_t total = 0;
    MPI_Reduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("result: %s %llu\n", name, (unsigned long long)total);
}

static void ring(void) {
    static const size_t sizes[] = {0, 1, 4095, 65536, 65537, (1u << 20) + 1};
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    uint64_t sum = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
        const size_t n = sizes[k];
        unsigned char *out = malloc(n + 1), *in = malloc(n + 1);
        for (size_t i = 0; i < n; ++i) out[i] = byte_of(rank, i, (int)k);
        memset(in, 0xEE, n + 1);
        MPI_Request reqs[3];
        MPI_Irecv(in, (int)n, MPI_BYTE, left, 10 + (int)k, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(out, (int)n, MPI_BYTE, right, 10 + (int)k, MPI_COMM_WORLD, &reqs[1]);
        MPI_Ibarrier(MPI_COMM_WORLD, &reqs[2]); /* MPI's own request in the same wait */
        MPI_Status st[3];
        MPI_Waitall(3, reqs, st);
        int count = -1;
        MPI_Get_count(&st[0], MPI_BYTE, &count);
        check(count == (int)n && st[0].MPI_SOURCE == left && st[0].MPI_TAG == 10 + (int)k,
              "ring: the receive's status");
        int ok = in[n] == 0xEE;
        for (size_t i = 0; i < n && ok; ++i) ok = in[i] == byte_of(left, i, (int)k);
        check(ok, "ring: the bytes");
        sum += checksum(in, n) + n;
        free(out);
        free(in);
    }
    result("ring", sum);
}

/* Every rank but 0 sends rank 0 two messages (tags rank and 1000 + rank);
 * rank 0 takes them with MPI_ANY_SOURCE / MPI_ANY_TAG, in any order, and
 * answers each sender with its own value doubled. */
static void any_source(void) {
    uint64_t sum = 0;
    if (rank == 0) {
        for (int m = 0; m < 2 * (size - 1); ++m) {
            int v[2];
            MPI_Status st;
            MPI_Recv(v, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            int count = -1;
            MPI_Get_count(&st, MPI_INT, &count);
            check(count == 2 && v[0] == st.MPI_SOURCE &&
                      (st.MPI_TAG == st.MPI_SOURCE || st.MPI_TAG == 1000 + st.MPI_SOURCE) &&
                      v[1] == st.MPI_TAG,
                  "any source: status and payload");
            sum += (uint64_t)v[0] * 3 + (uint64_t)v[1];
            if (st.MPI_TAG >= 1000) {
                const int answer = 2 * v[0];
                MPI_Send(&answer, 1, MPI_INT, st.MPI_SOURCE, 7, MPI_COMM_WORLD);
            }
        }
    } else {
        int v[2] = {rank, rank};
        MPI_Send(v, 2, MPI_INT, 0, rank, MPI_COMM_WORLD);
        v[1] = 1000 + rank;
        MPI_Send(v, 2, MPI_INT, 0, 1000 + rank, MPI_COMM_WORLD);
        int answer = 0;
        MPI_Recv(&answer, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(answer == 2 * rank, "any source: the answer");
        sum += (uint64_t)answer;
    }
    result("any_source", sum);
}

static void sendrecv(void) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { N = 100000 };
    double *out = malloc(N * sizeof(double)), *in = malloc(N * sizeof(double));
    for (int i = 0; i < N; ++i) out[i] = rank * 1e6 + i;
    MPI_Status st;
    MPI_Sendrecv(out, N, MPI_DOUBLE, right, 3, in, N, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &st);
    int ok = st.MPI_SOURCE == left && st.MPI_TAG == 3;
    for (int i = 0; i < N && ok; ++i) ok = in[i] == left * 1e6 + i;
    check(ok, "sendrecv");
    /* Replace: the buffer travels one step right. */
    MPI_Sendrecv_replace(out, N, MPI_DOUBLE, right, 4, left, 4, MPI_COMM_WORLD, &st);
    ok = st.MPI_SOURCE == left;
    for (int i = 0; i < N && ok; ++i) ok = out[i] == left * 1e6 + i;
    check(ok, "sendrecv_replace");
    result("sendrecv", checksum((unsigned char *)in, N * sizeof(double)) +
                           checksum((unsigned char *)out, N * sizeof(double)));
    free(out);
    free(in);
}

/* Each rank sends its right neighbour a message of a length only the
 * sender knows; the receiver probes for it (MPI_Probe, or MPI_Iprobe in a
 * loop on odd ranks) and receives exactly that many. */
static void probe(void) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const int n = 1000 + 37 * rank;
    int *out = malloc(n * sizeof(int));
    for (int i = 0; i < n; ++i) out[i] = rank + i;
    MPI_Request req;
    MPI_Isend(out, n, MPI_INT, right, 5, MPI_COMM_WORLD, &req);
    MPI_Status st;
    if (rank % 2) {
        int flag = 0;
        while (!flag) MPI_Iprobe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    } else {
        MPI_Probe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
    }
    int count = 0;
    MPI_Get_count(&st, MPI_INT, &count);
    check(count == 1000 + 37 * left && st.MPI_SOURCE == left && st.MPI_TAG == 5, "probe status");
    int *in = malloc((count ? count : 1) * sizeof(int));
    MPI_Recv(in, count, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int ok = 1;
    for (int i = 0; i < count && ok; ++i) ok = in[i] == left + i;
    check(ok, "probe: the bytes");
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    result("probe", checksum((unsigned char *)in, (size_t)count * sizeof(int)));
    free(in);
    free(out);
}

/* 500 small messages to the right before any receive (tags cycling over
 * 3), then received by tag: each tag's messages in their sending order.
 * Nonblocking sends, waited for after the receives: blocking ones before
 * any receive would be unsafe (MPICH on one rank waits in the first). */
static void early(void) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { M = 500 };
    static int out[M][2];
    static MPI_Request sends[M];
    static MPI_Status statuses[M]; /* (GCC 12 warns of MPICH's MPI_STATUSES_IGNORE) */
    for (int k = 0; k < M; ++k) {
        out[k][0] = rank;
        out[k][1] = k;
        MPI_Isend(out[k], 2, MPI_INT, right, k % 3, MPI_COMM_WORLD, &sends[k]);
    }
    uint64_t sum = 0;
    for (int tag = 2; tag >= 0; --tag)
        for (int k = tag; k < M; k += 3) {
            int v[2];
            MPI_Recv(v, 2, MPI_INT, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(v[0] == left && v[1] == k, "early: order within a tag");
            sum += (uint64_t)v[1] * (uint64_t)(tag + 1);
        }
    MPI_Waitall(M, sends, statuses);
    result("early", sum);
}

/* Synchronous sends around the ring: MPI_Issend waited after the receive,
 * MPI_Ssend with the receive posted first. */
static void synchronous(void) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = 100 + rank, in = -1, in2 = -1;
    MPI_Request req;
    MPI_Issend(&out, 1, MPI_INT, right, 21, MPI_COMM_WORLD, &req);
    MPI_Recv(&in, 1, MPI_INT, left, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Irecv(&in2, 1, MPI_INT, left, 22, MPI_COMM_WORLD, &req);
    MPI_Ssend(&out, 1, MPI_INT, right, 22, MPI_COMM_WORLD);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    check(in == 100 + left && in2 == 100 + left, "synchronous sends");
    result("synchronous", (uint64_t)(in + in2));
}

static void proc_null_and_truncation(void) {
    int x = 42;
    MPI_Status st;
    MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    check(x == 42 && st.MPI_SOURCE == MPI_PROC_NULL && count == 0, "MPI_PROC_NULL");
    /* A receive shorter than its message, on a duplicate that returns errors. */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[4] = {0, 0, 0, 0};
    MPI_Request req;
    MPI_Isend(out, 8, MPI_INT, right, 9, comm, &req);
    const int rc = MPI_Recv(in, 4, MPI_INT, left, 9, comm, MPI_STATUS_IGNORE);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    check(cls == MPI_ERR_TRUNCATE, "truncation: MPI_ERR_TRUNCATE");
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_free(&comm);
    result("proc_null_truncate", (uint64_t)(cls == MPI_ERR_TRUNCATE) + (uint64_t)x);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ring();
    any_source();
    sendrecv();
    probe();
    early();
    synchronous();
    proc_null_and_truncation();
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("result: %s\n", any ? "WRONG" : "all right");
    MPI_Finalize();
    return any;
}
