#include "mpi/placement.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/fnv.h"

namespace deputy::mpi {

const char *placement_name(Placement p) {
    return p == Placement::own_core ? "own-core" : "shared";
}

std::optional<Placement> placement_from_environment(std::string *error) {
    const char *v = std::getenv("DEPUTY_MPI_PLACEMENT");
    if (!v || !*v || std::string_view(v) == "auto") return std::nullopt;
    if (std::string_view(v) == "own-core") return Placement::own_core;
    if (std::string_view(v) == "shared") return Placement::shared;
    *error = std::string("DEPUTY_MPI_PLACEMENT=") + v + ": not own-core, shared or auto";
    return std::nullopt;
}

Placement local_placement(dp_context_t *ctx) {
    cpu_set_t agent, mine;
    CPU_ZERO(&agent);
    CPU_ZERO(&mine);
    // An agent whose CPUs cannot be read, or a rank whose own cannot, is
    // taken to share: the column that never loses to MPI.
    if (dp_agent_cpus(ctx, reinterpret_cast<unsigned char *>(&agent), sizeof agent) <= 0 ||
        sched_getaffinity(0, sizeof mine, &mine) != 0)
        return Placement::shared;
    cpu_set_t both;
    CPU_AND(&both, &agent, &mine);
    return CPU_COUNT(&both) > 0 ? Placement::shared : Placement::own_core;
}

namespace {

// Processes under one kernel share its CPU numbers, whatever their
// containers, network namespaces or MPI's idea of their host (simulated
// nodes are namespaces of one machine): its boot id names it; the host
// name where that cannot be read.
std::string kernel_identity() {
    char id[64] = {};
    if (FILE *f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
        const bool got = std::fgets(id, sizeof id, f) != nullptr;
        std::fclose(f);
        if (got) return id;
    }
    gethostname(id, sizeof id - 1);
    return id;
}

}  // namespace

bool ranks_crowd_my_cpus() {
    // Not MPI_COMM_TYPE_SHARED: with Open MPI's, ranks on simulated hosts
    // (network namespaces of one machine) hung in the allgather below, two
    // of four never leaving it; and what shares CPUs is the kernel.
    const std::string kernel = kernel_identity();
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm node;
    if (PMPI_Comm_split(MPI_COMM_WORLD, int(fnv1a(kernel.data(), kernel.size()) & 0x7fffffff),
                        rank, &node) != MPI_SUCCESS)
        return false;
    cpu_set_t mine;
    CPU_ZERO(&mine);
    // A mask that cannot be read crowds nobody: the default wait stays.
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);
    int size = 0;
    PMPI_Comm_size(node, &size);
    std::vector<cpu_set_t> all(size_t(std::max(size, 0)));
    const int rc = PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE,
                                  node);
    PMPI_Comm_free(&node);
    if (rc != MPI_SUCCESS || CPU_COUNT(&mine) == 0) return false;
    int crowd = 0;  // ranks that may run on one of my CPUs, me included
    for (const cpu_set_t &theirs : all) {
        cpu_set_t both;
        CPU_AND(&both, &theirs, &mine);
        crowd += CPU_COUNT(&both) > 0 ? 1 : 0;
    }
    return crowd > CPU_COUNT(&mine);
}

}  // namespace deputy::mpi
