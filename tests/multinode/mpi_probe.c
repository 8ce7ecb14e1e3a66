/* A small MPI program for the network-namespace harness (netns.sh).
 *
 *   mpi_probe check [COUNT]     one MPI_Allreduce and one MPI_Alltoall of COUNT
 *                               elements per rank, both checked bit-exact on every
 *                               rank; each rank prints one line:
 *                                 probe rank R size N ip A.B.C.D netns net:[INODE] ok
 *                               ip is the rank's own non-loopback IPv4 address, netns
 *                               the network namespace it runs in: with one rank per
 *                               namespace both differ from rank to rank.
 *   mpi_probe stream [ITERS]    ITERS (default: 10^9, i.e. until killed) MPI_Allreduces
 *                               of 4096 doubles, each checked; every rank prints
 *                               "stream rank R iter I" after iteration 1 and every 20th.
 *
 * Any wrong value ends the job with MPI_Abort (exit code 3).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size;

static void fail(const char *what, long index, double got, double want) {
    fprintf(stderr, "probe rank %d: %s wrong at %ld: got %.17g, want %.17g\n", rank, what, index, got,
            want);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* The first IPv4 address of an interface that is up and not loopback. */
static void own_ip(char *out, size_t len) {
    struct ifaddrs *list, *a;
    snprintf(out, len, "none");
    if (getifaddrs(&list) != 0) return;
    for (a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
        if ((a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ifa_addr)->sin_addr, out, (socklen_t)len);
        break;
    }
    freeifaddrs(list);
}

static void own_netns(char *out, size_t len) {
    ssize_t n = readlink("/proc/self/ns/net", out, len - 1);
    if (n < 0) n = 0;
    out[n] = '\0';
}

/* Values whose sums over any number of ranks (< 2^20) and in any order are exact
 * in binary64: multiples of 1/4 below 2^30. */
static double value(int r, long i) { return (double)((r + 1) * ((i % 4093) + 1)) * 0.25; }

static void allreduce_check(long count) {
    double *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
    int64_t *iin = malloc(count * sizeof *iin), *iout = malloc(count * sizeof *iout);
    const double ranks_sum = (double)size * (size + 1) / 2;
    long i;
    for (i = 0; i < count; i++) {
        in[i] = value(rank, i);
        iin[i] = ((int64_t)1 << 40) * (rank + 1) + i;  /* well beyond 32 bits */
    }
    MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(iin, iout, (int)count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < count; i++) {
        double want = ranks_sum * ((i % 4093) + 1) * 0.25;
        int64_t iwant = ((int64_t)1 << 40) * (int64_t)ranks_sum + (int64_t)size * i;
        if (memcmp(&out[i], &want, sizeof want) != 0) fail("allreduce double", i, out[i], want);
        if (iout[i] != iwant) fail("allreduce int64", i, (double)iout[i], (double)iwant);
    }
    free(in), free(out), free(iin), free(iout);
}

static void alltoall_check(long count) {
    /* Block j of rank r's send buffer goes to rank j; element k of it is r*2^32 + j*2^16 + k. */
    long per = count / size, j, k;
    uint64_t *send = malloc(per * size * sizeof *send), *recv = malloc(per * size * sizeof *recv);
    for (j = 0; j < size; j++)
        for (k = 0; k < per; k++) send[j * per + k] = ((uint64_t)rank << 32) | ((uint64_t)j << 16) | (uint64_t)k;
    MPI_Alltoall(send, (int)per, MPI_UINT64_T, recv, (int)per, MPI_UINT64_T, MPI_COMM_WORLD);
    for (j = 0; j < size; j++)
        for (k = 0; k < per; k++) {
            uint64_t want = ((uint64_t)j << 32) | ((uint64_t)rank << 16) | (uint64_t)k;
            if (recv[j * per + k] != want) fail("alltoall", j * per + k, (double)recv[j * per + k], (double)want);
        }
    free(send), free(recv);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "check";
    char ip[64], ns[64];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "check") == 0) {
        long count = argc > 2 ? atol(argv[2]) : 1L << 16;  /* 512 KiB of doubles: many TCP segments */
        if (count < size) count = size;
        own_ip(ip, sizeof ip);
        own_netns(ns, sizeof ns);
        allreduce_check(count);
        alltoall_check(count);
        MPI_Barrier(MPI_COMM_WORLD);
        printf("probe rank %d size %d ip %s netns %s ok\n", rank, size, ip, ns);
    } else if (strcmp(mode, "stream") == 0) {
        long iters = argc > 2 ? atol(argv[2]) : 1000000000L, it;
        const long count = 4096;
        double *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
        const double ranks_sum = (double)size * (size + 1) / 2;
        long i;
        for (i = 0; i < count; i++) in[i] = value(rank, i);
        for (it = 1; it <= iters; it++) {
            MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            for (i = 0; i < count; i++) {
                double want = ranks_sum * ((i % 4093) + 1) * 0.25;
                if (out[i] != want) fail("stream allreduce", i, out[i], want);
            }
            if (it == 1 || it % 20 == 0) printf("stream rank %d iter %ld\n", rank, it);
        }
        free(in), free(out);
    } else {
        if (rank == 0) fprintf(stderr, "usage: mpi_probe check [COUNT] | stream [ITERS]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Finalize();
    return 0;
}
