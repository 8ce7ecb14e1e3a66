/* A stand-in for the PMPI library (src/mpi) in tests/launch: a real shared
 * object that `deputy mpirun --mpi-lib` can preload, with nothing in it but
 * a symbol to find it by. */
int deputy_mpirun_test_stub = 1;
