// What creating a communicator costs an MPI program, with and without
// libdeputy-mpi (which forms the new communicator's team as it is created:
// docs/mpi.md, "How it works"). Not part of deputy's tests: a stand-alone
// probe for docs/PERFORMANCE.md. Only mpi.h. Prints, per round of 200, the
// time of one MPI_Comm_dup + MPI_Comm_free on rank 0 (median of 5 rounds
// last).
//
// Build and run (2 ranks):
//   mpicc.openmpi -O2 -o /tmp/comm_create_cost scripts/probes/comm_create_cost.c
//   mpirun.openmpi -np 2 /tmp/comm_create_cost                 (MPI alone)
//   build/tools/deputy mpirun -np 2 /tmp/comm_create_cost      (with the library)
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROUNDS = 5, PER_ROUND = 200 };

static int compare(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double us[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < PER_ROUND; i++) {
            MPI_Comm c;
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
            MPI_Comm_free(&c);
        }
        us[round] = (MPI_Wtime() - t0) / PER_ROUND * 1e6;
        if (rank == 0) printf("round %d: MPI_Comm_dup + MPI_Comm_free %.1f us\n", round, us[round]);
    }
    qsort(us, ROUNDS, sizeof us[0], compare);
    if (rank == 0) printf("median: %.1f us\n", us[ROUNDS / 2]);
    MPI_Finalize();
    return 0;
}
