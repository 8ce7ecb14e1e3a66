// Where the agent's threads and the ranks run on one node: the layouts that
// `--agent-cores` offers (`deputy agent`, `deputy launch`, `deputy mpirun`),
// computed from the topology. deputy wins when its engines have CPUs the
// ranks leave alone ("own core"); when they share busy ranks' CPUs
// ("shared"), an engine runs only when a rank lets it.
//
//   shared    nothing pinned (the default): everyone may run everywhere
//   last      the last core of each package (socket) for the agent; the
//             ranks get the other cores
//   N         N cores for the agent, one package after the other (package 0
//             first), each time the last core not yet taken; the ranks get
//             the rest
//   cpus:L    the CPUs of list L ("6-7,14-15") for the agent; the ranks get
//             every other CPU
//   smt       the engines on the SMT siblings of the ranks' cores: each
//             core's first CPU for a rank, its other CPUs for the agent
//
// A rank is bound to one "slot": a core's CPUs that are not the agent's
// (under smt, a core's first CPU); rank r takes slot r modulo their number.
#pragma once

#include <deputy/status.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/topology.h"

namespace deputy {

enum class AgentCoresKind { kShared, kLast, kCount, kCpus, kSmt };

// What the user asked for.
struct AgentCores {
    AgentCoresKind kind = AgentCoresKind::kShared;
    int count = 0;          // kCount
    std::vector<int> cpus;  // kCpus: in the order given, each once
    std::string text;       // as written ("last", "2", "cpus:6-7")
};

// Parses `text`; on error DP_ERR_INVALID with *error starting with `flag`
// and the text ("--agent-cores 6,7: a CPU list is written cpus:6,7 ...").
dp_status_t parse_agent_cores(std::string_view text, std::string_view flag, AgentCores *out,
                              std::string *error);

struct Placement {
    AgentCores request;
    // The agent's CPUs (its service thread may run on any of them),
    // ascending; empty when nothing is pinned (shared).
    std::vector<int> agent_cpus;
    // Engine e is pinned to engine_cpus[e % size]: the reserved cores' first
    // CPUs before any core's second, so engines spread over cores first.
    std::vector<int> engine_cpus;
    // Whole cores the agent's CPUs are on: an agent started with this
    // layout runs one engine per such core unless told otherwise. 0 for
    // shared and smt, which reserve no core.
    int agent_cores = 0;
    // The ranks' slots, in core order; empty when the ranks are not bound.
    std::vector<std::vector<int>> rank_slots;

    bool pinned() const { return !agent_cpus.empty(); }
    // The CPUs of every slot, ascending; empty when the ranks are not bound.
    std::vector<int> rank_cpus() const;
    // The slot of rank r.
    const std::vector<int> &slot_of(int rank) const {
        return rank_slots[size_t(rank) % rank_slots.size()];
    }
};

// The layout `request` on `topology`. DP_ERR_INVALID with *error naming
// `flag`, the request and the limit it broke (a CPU that does not exist,
// every core reserved, no SMT for smt).
dp_status_t compute_placement(const Topology &topology, const AgentCores &request,
                              std::string_view flag, Placement *out, std::string *error);

// "CPU 1", "CPUs 0-3,8" ("no CPU" for none).
std::string cpus_phrase(const std::vector<int> &cpus);

// The CPUs in both lists, ascending.
std::vector<int> cpus_in_both(const std::vector<int> &a, const std::vector<int> &b);

// What to tell someone whose `ranks` ranks (0: unknown) share CPUs with the
// engines: the `--agent-cores` layout that gives the engines CPUs of their
// own while each rank keeps a core ("--agent-cores last gives the engines
// CPU 1 and the ranks CPU 0"), or why this machine has none to spare.
std::string shared_advice(const Topology &topology, int ranks);

}  // namespace deputy
