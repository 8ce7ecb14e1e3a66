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
 * the ring of sizes), MPI_Issend and MPI_Ssend around the ring, MPI_PROC_NULL, a truncated receive
 * (MPI_ERR_TRUNCATE with MPI_ERRORS_RETURN), and persistent requests
 * (persistent(), below). Usage: p2p_check (no arguments); exit 1 on a
 * wrong result. */
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

/* An inactive persistent request: complete at once, an empty status (MPI
 * 3.1, 3.7.3), and still allocated. */
static void check_inactive(MPI_Request *req, int use_wait, const char *what) {
    const MPI_Request before = *req;
    MPI_Status st;
    int flag = 0, count = -1;
    st.MPI_SOURCE = st.MPI_TAG = 12345;
    if (use_wait) {
        MPI_Wait(req, &st);
        flag = 1;
    } else {
        MPI_Test(req, &flag, &st);
    }
    MPI_Get_count(&st, MPI_INT, &count);
    check(flag && *req == before && *req != MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE &&
              st.MPI_TAG == MPI_ANY_TAG && count == 0,
          what);
}

static int persistent_value(int from, int i, int round) { return from * 1000003 + i * 31 + round; }

/* Persistent requests around the ring. MPI_Recv_init / MPI_Send_init of
 * PN ints (past the eager bound), started ROUNDS times with MPI_Startall
 * together with a persistent pair of MPI's own (a message to itself on
 * MPI_COMM_SELF, whose point-to-point MPI carries), and an MPI_Ibarrier
 * beside them; the send buffer changed before each start, the received one
 * checked after each completion, which is in turn MPI_Waitall,
 * MPI_Waitsome, MPI_Testany, MPI_Testall, MPI_Waitany. Then MPI_Start with
 * MPI_Test and MPI_Wait; waits and tests of inactive requests; an
 * MPI_Ssend_init against an MPI_Recv_init of MPI_ANY_SOURCE / MPI_ANY_TAG
 * polled with MPI_Request_get_status; MPI_Request_free of inactive
 * requests, of an active one and of an active MPI_Isend; MPI_Cancel of an
 * inactive persistent request (each MPI's own answer, the same with
 * deputy). */
enum { PN = 5000, ROUNDS = 6 };
static int p_out[PN], p_in[PN + 1], p_self_out, p_self_in, p_free_out[2], p_free_in[2];

static void persistent(void) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Request reqs[5];
    MPI_Recv_init(p_in, PN, MPI_INT, left, 30, MPI_COMM_WORLD, &reqs[0]);
    MPI_Send_init(p_out, PN, MPI_INT, right, 30, MPI_COMM_WORLD, &reqs[1]);
    MPI_Recv_init(&p_self_in, 1, MPI_INT, 0, 31, MPI_COMM_SELF, &reqs[2]);
    MPI_Send_init(&p_self_out, 1, MPI_INT, 0, 31, MPI_COMM_SELF, &reqs[3]);
    const MPI_Request handles[4] = {reqs[0], reqs[1], reqs[2], reqs[3]};
    check_inactive(&reqs[0], 0, "persistent: MPI_Test of a receive never started");
    check_inactive(&reqs[1], 1, "persistent: MPI_Wait of a send never started");
    uint64_t sum = 0;
    for (int round = 0; round < ROUNDS; ++round) {
        for (int i = 0; i < PN; ++i) p_out[i] = persistent_value(rank, i, round);
        for (int i = 0; i <= PN; ++i) p_in[i] = -1;
        p_self_out = 1000 * rank + round;
        p_self_in = -1;
        MPI_Startall(4, reqs);
        MPI_Ibarrier(MPI_COMM_WORLD, &reqs[4]);
        MPI_Status st[5];
        int seen[5] = {0, 0, 0, 0, 0};
        const int method = round % 5;
        if (method == 0) {
            MPI_Waitall(5, reqs, st);
            for (int k = 0; k < 5; ++k) seen[k] = 1;
        } else if (method == 1 || method == 4) {
            /* MPI_Waitsome / MPI_Waitany until nothing is active. */
            for (;;) {
                int n = 0, idx[5];
                MPI_Status got[5];
                if (method == 1) {
                    MPI_Waitsome(5, reqs, &n, idx, got);
                } else {
                    MPI_Waitany(5, reqs, &idx[0], &got[0]);
                    n = idx[0] == MPI_UNDEFINED ? MPI_UNDEFINED : 1;
                }
                if (n == MPI_UNDEFINED) break;
                for (int k = 0; k < n; ++k) {
                    check(!seen[idx[k]], "persistent: a request returned twice");
                    seen[idx[k]] = 1;
                    st[idx[k]] = got[k];
                }
            }
        } else if (method == 2) {
            for (int done = 0; done < 5;) {
                int idx = MPI_UNDEFINED, flag = 0;
                MPI_Status got;
                MPI_Testany(5, reqs, &idx, &flag, &got);
                if (flag && idx == MPI_UNDEFINED) break;
                if (!flag) continue;
                check(!seen[idx], "persistent: MPI_Testany returned a request twice");
                seen[idx] = 1;
                st[idx] = got;
                ++done;
            }
        } else {
            int flag = 0;
            while (!flag) MPI_Testall(5, reqs, &flag, st);
            for (int k = 0; k < 5; ++k) seen[k] = 1;
        }
        check(seen[0] && seen[1] && seen[2] && seen[3] && seen[4],
              "persistent: every request completed once");
        check(reqs[0] == handles[0] && reqs[1] == handles[1] && reqs[2] == handles[2] &&
                  reqs[3] == handles[3] && reqs[4] == MPI_REQUEST_NULL,
              "persistent: requests inactive, not freed, after completion");
        int count = -1;
        MPI_Get_count(&st[0], MPI_INT, &count);
        check(count == PN && st[0].MPI_SOURCE == left && st[0].MPI_TAG == 30,
              "persistent: the ring receive's status");
        MPI_Get_count(&st[2], MPI_INT, &count);
        check(count == 1 && st[2].MPI_SOURCE == 0 && st[2].MPI_TAG == 31 &&
                  p_self_in == 1000 * rank + round,
              "persistent: MPI's own persistent pair");
        int ok = p_in[PN] == -1;
        for (int i = 0; i < PN && ok; ++i) ok = p_in[i] == persistent_value(left, i, round);
        check(ok, "persistent: the bytes of each round");
        sum += checksum((unsigned char *)p_in, PN * sizeof(int)) + (uint64_t)method;
        check_inactive(&reqs[0], round % 2, "persistent: a completed receive, waited again");
    }

    /* MPI_Start; the receive tested until done, the send waited for. */
    for (int i = 0; i < PN; ++i) p_out[i] = persistent_value(rank, i, ROUNDS);
    MPI_Start(&reqs[0]);
    MPI_Start(&reqs[1]);
    MPI_Status st;
    int flag = 0, count = -1;
    while (!flag) MPI_Test(&reqs[0], &flag, &st);
    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
    MPI_Get_count(&st, MPI_INT, &count);
    int ok = count == PN && st.MPI_SOURCE == left && st.MPI_TAG == 30 && reqs[0] == handles[0] &&
             reqs[1] == handles[1];
    for (int i = 0; i < PN && ok; ++i) ok = p_in[i] == persistent_value(left, i, ROUNDS);
    check(ok, "persistent: MPI_Start, MPI_Test, MPI_Wait");
    sum += checksum((unsigned char *)p_in, PN * sizeof(int));
    for (int k = 0; k < 4; ++k) {
        MPI_Request_free(&reqs[k]);
        check(reqs[k] == MPI_REQUEST_NULL, "persistent: MPI_Request_free of an inactive one");
    }

    /* A synchronous persistent send against a persistent receive of any
     * source and tag, polled with MPI_Request_get_status (which frees
     * nothing), started twice. */
    MPI_Request ss, rr;
    MPI_Ssend_init(&p_self_out, 1, MPI_INT, right, 34, MPI_COMM_WORLD, &ss);
    MPI_Recv_init(&p_self_in, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rr);
    for (int k = 0; k < 2; ++k) {
        p_self_out = 200 + 10 * rank + k;
        p_self_in = -1;
        MPI_Start(&rr);
        MPI_Start(&ss);
        flag = 0;
        while (!flag) MPI_Request_get_status(rr, &flag, MPI_STATUS_IGNORE);
        MPI_Request pair[2] = {rr, ss};
        MPI_Status sts[2];
        MPI_Waitall(2, pair, sts);
        MPI_Get_count(&sts[0], MPI_INT, &count);
        check(pair[0] == rr && pair[1] == ss && p_self_in == 200 + 10 * left + k &&
                  sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == 34 && count == 1,
              "persistent: MPI_Ssend_init to MPI_Recv_init of any source and tag");
        sum += (uint64_t)p_self_in;
    }
    MPI_Request_free(&ss);
    MPI_Request_free(&rr);

    /* Freed while active, a persistent send and an MPI_Isend: each message
     * still arrives. */
    MPI_Request r[2], s;
    p_free_out[0] = 300 + rank;
    p_free_out[1] = 400 + rank;
    p_free_in[0] = p_free_in[1] = -1;
    MPI_Irecv(&p_free_in[0], 1, MPI_INT, left, 35, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(&p_free_in[1], 1, MPI_INT, left, 36, MPI_COMM_WORLD, &r[1]);
    MPI_Send_init(&p_free_out[0], 1, MPI_INT, right, 35, MPI_COMM_WORLD, &s);
    MPI_Start(&s);
    MPI_Request_free(&s);
    check(s == MPI_REQUEST_NULL, "persistent: MPI_Request_free of an active one");
    MPI_Isend(&p_free_out[1], 1, MPI_INT, right, 36, MPI_COMM_WORLD, &s);
    MPI_Request_free(&s);
    MPI_Status ignored[2]; /* (GCC 12 warns of MPICH's MPI_STATUSES_IGNORE) */
    MPI_Waitall(2, r, ignored);
    check(p_free_in[0] == 300 + left && p_free_in[1] == 400 + left,
          "persistent: messages of requests freed while active");
    sum += (uint64_t)(p_free_in[0] + p_free_in[1]);

    /* MPI_Cancel of an inactive persistent request: whatever this MPI
     * answers for its own (Open MPI 4.1: success; MPICH 4.0: an error). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Recv_init(p_in, PN, MPI_INT, left, 37, MPI_COMM_WORLD, &rr);
    int cls = MPI_SUCCESS;
    MPI_Error_class(MPI_Cancel(&rr), &cls);
    check(rr != MPI_REQUEST_NULL, "persistent: MPI_Cancel of an inactive request keeps it");
    MPI_Request_free(&rr);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    /* The sends freed above are complete once every rank has its message. */
    MPI_Barrier(MPI_COMM_WORLD);
    result("persistent", sum);
    result("persistent_cancel_inactive", (uint64_t)cls);
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
    persistent();
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("result: %s\n", any ? "WRONG" : "all right");
    MPI_Finalize();
    return any;
}
