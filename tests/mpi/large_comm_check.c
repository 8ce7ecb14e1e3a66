/* A communicator larger than the 64 ranks deputy once stopped at, and its
 * splits: MPI_COMM_WORLD of every rank (run_large_comm_check.py starts 100),
 * rows of 10 and the first 80 ranks. Collectives on each, every result
 * checked against what MPI defines; prints "large_comm_check: ok" on rank 0
 * when every rank agrees. Includes only <mpi.h>: the same program runs with
 * and without libdeputy-mpi. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

static void expect(int ok, const char *what, int rank, long got, long want) {
    if (ok) return;
    ++failures;
    fprintf(stderr, "large_comm_check: rank %d: %s: got %ld, want %ld\n", rank, what, got, want);
}

/* Allreduce, bcast from the last rank, allgather and alltoall of ints on
 * `comm`, whose ranks know their world rank. */
static void check(MPI_Comm comm, const char *name, int world_rank) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long sum = 0, want = 0;
    long mine = world_rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, comm);
    int *ranks = malloc(sizeof(int) * (size_t)size);
    MPI_Allgather(&world_rank, 1, MPI_INT, ranks, 1, MPI_INT, comm);
    for (int m = 0; m < size; ++m) want += ranks[m] + 1;
    expect(sum == want, name, world_rank, sum, want);
    int root_value = rank == size - 1 ? 7000 + world_rank : -1;
    MPI_Bcast(&root_value, 1, MPI_INT, size - 1, comm);
    expect(root_value == 7000 + ranks[size - 1], name, world_rank, root_value,
           7000 + ranks[size - 1]);
    int *out = malloc(sizeof(int) * (size_t)size), *in = malloc(sizeof(int) * (size_t)size);
    for (int m = 0; m < size; ++m) out[m] = rank * 1000 + m;
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, comm);
    for (int m = 0; m < size; ++m) expect(in[m] == m * 1000 + rank, name, world_rank, in[m],
                                          m * 1000 + rank);
    MPI_Request req;
    double x = world_rank, total = 0;
    MPI_Iallreduce(&x, &total, 1, MPI_DOUBLE, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    double want_total = 0;
    for (int m = 0; m < size; ++m) want_total += ranks[m];
    expect(total == want_total, name, world_rank, (long)total, (long)want_total);
    MPI_Barrier(comm);
    free(ranks);
    free(out);
    free(in);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check(MPI_COMM_WORLD, "world", rank);
    MPI_Comm row, first;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 10, rank, &row);
    check(row, "row", rank);
    MPI_Comm_split(MPI_COMM_WORLD, rank < 80 ? 0 : 1, rank, &first);
    check(first, rank < 80 ? "first 80" : "the rest", rank);
    MPI_Comm_free(&row);
    MPI_Comm_free(&first);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? "large_comm_check: %d failures\n" : "large_comm_check: ok\n", all);
    MPI_Finalize();
    return all != 0;
}
