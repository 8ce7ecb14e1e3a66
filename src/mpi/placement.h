// Where the agent runs relative to this node's ranks, which picks the
// thresholds' column (operations.h): its own cores (what deputy is for: a
// spare core, or a DPU's), or the ranks' cores (every core runs a rank;
// the agent gets a core only when a rank leaves one).
#pragma once

#include <deputy/context.h>

#include <optional>
#include <string>

namespace deputy::mpi {

enum class Placement { own_core, shared };

const char *placement_name(Placement p);  // "own-core", "shared"

// DEPUTY_MPI_PLACEMENT=own-core|shared; nullopt when unset ("auto" too);
// a value that is neither is an error naming it.
std::optional<Placement> placement_from_environment(std::string *error);

// This rank alone: shared when a CPU this rank may run on is one the
// agent's threads may run on (both from the kernel's affinity masks).
Placement local_placement(dp_context_t *ctx);

// Whether more of this node's ranks may run on this rank's CPUs than there
// are CPUs (two ranks bound to one core; four unbound ranks on two CPUs;
// "node" is what shares a kernel, simulated hosts included):
// then a rank waiting for a teammate should give its CPU away at once
// (dp_config_t.cpu_shared). Collective over MPI_COMM_WORLD.
bool ranks_crowd_my_cpus();

}  // namespace deputy::mpi
