/* Bad cases under libdeputy-mpi, from a program that includes only mpi.h:
 * each ends with a clear error on every surviving rank, never a hang.
 *
 *   failure_check mismatch   every rank calls MPI_Iallreduce with its own
 *                            count (an erroneous program): each prints
 *                            "rank R: mismatch: <MPI error string>" and
 *                            "rank R: team goes on: ok" after a correct
 *                            allreduce on the same communicator.
 *   failure_check death      rank 1 dies (SIGKILL) instead of posting its
 *                            part of a 64 MiB MPI_Iallreduce; every other
 *                            rank's MPI_Wait returns an error: "rank R:
 *                            death: <MPI error string>".
 *   failure_check late-death rank 1 dies right after posting its part: the
 *                            others' operation may still complete (the agent
 *                            holds what rank 1 posted), then with the exact
 *                            sum ("rank R: late-death: ok"), or fail
 *                            ("rank R: late-death: <error>"); it never hangs
 *                            and never returns wrong data ("... WRONG").
 * The communicator's error handler is MPI_ERRORS_RETURN, so an error comes
 * back as a code instead of aborting the job. Exit 0 on the surviving ranks
 * when the expected error came (and 1 when the operation succeeded). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size;

static void say(const char *what, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    printf("rank %d: %s: %s\n", rank, what, rc == MPI_SUCCESS ? "ok" : text);
    fflush(stdout);
}

static int mismatch(void) {
    /* Counts above every threshold on each rank: all ranks offload. */
    const int count = 4096 * (rank + 1);
    int *in = malloc(sizeof(int) * (size_t)count * 2), *out = in + count;
    for (int i = 0; i < count; ++i) in[i] = i;
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    say("mismatch", rc);
    const int failed = rc != MPI_SUCCESS;
    /* The same communicator, a correct call: the team goes on. */
    for (int i = 0; i < 4096; ++i) in[i] = rank + i;
    rc = MPI_Iallreduce(in, out, 4096, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; rc == MPI_SUCCESS && i < 4096; ++i)
        if (out[i] != size * i + size * (size - 1) / 2) rc = MPI_ERR_OTHER;
    say("team goes on", rc);
    free(in);
    return failed && rc == MPI_SUCCESS ? 0 : 1;
}

static int death(int after_post) {
    const int count = 16 << 20; /* 64 MiB of int */
    int *in = malloc(sizeof(int) * (size_t)count), *out = malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; ++i) in[i] = i;
    MPI_Request req;
    /* Everyone has its team before anyone dies: a small operation first. */
    int rc = MPI_Iallreduce(in, out, 4096, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return say("setup", rc), 1;
    if (rank == 1 && !after_post) raise(SIGKILL);
    memset(out, 0, sizeof(int) * (size_t)count);
    rc = MPI_Iallreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rank == 1) raise(SIGKILL);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (after_post && rc == MPI_SUCCESS) {
        for (int i = 0; i < count; i += 4093)
            if (out[i] != size * i) {
                printf("rank %d: late-death: WRONG: element %d is %d, not %d\n", rank, i, out[i],
                       size * i);
                fflush(stdout);
                _exit(1);
            }
    }
    say(after_post ? "late-death" : "death", rc);
    /* No MPI_Finalize: a peer is gone, and MPI may wait for it there. */
    _exit(after_post || rc != MPI_SUCCESS ? 0 : 1);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* Where an MPI raises a generalized request's error. */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int code = 2;
    if (argc > 1 && !strcmp(argv[1], "mismatch")) code = mismatch();
    else if (argc > 1 && !strcmp(argv[1], "death")) code = death(0);
    else if (argc > 1 && !strcmp(argv[1], "late-death")) code = death(1);
    else fprintf(stderr, "usage: failure_check mismatch|death|late-death\n");
    MPI_Finalize();
    return code;
}
