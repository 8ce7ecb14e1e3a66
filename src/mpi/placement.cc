#include "mpi/placement.h"

#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

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

}  // namespace deputy::mpi
