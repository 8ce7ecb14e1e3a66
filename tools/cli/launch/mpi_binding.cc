#include "cli/launch/mpi_binding.h"

#include <algorithm>

#include "common/affinity.h"

namespace deputy::launch {

std::vector<std::string> mpi_binding_options(MpiFlavor flavor, const Topology &topology,
                                             const Placement &placement, int ranks) {
    if (placement.rank_slots.empty()) return {};
    if (flavor == MpiFlavor::kHydra) {
        std::string user = "user:";
        const size_t entries = std::max(placement.rank_slots.size(), size_t(std::max(ranks, 0)));
        for (size_t s = 0; s < entries; ++s) {
            if (s) user += ',';
            const std::vector<int> &slot = placement.slot_of(int(s));
            for (size_t c = 0; c < slot.size(); ++c)
                user += (c ? "+" : "") + std::to_string(slot[c]);
        }
        return {"-bind-to", user};
    }
    // Whole cores, or single CPUs?
    std::vector<int> cores;
    bool whole_cores = true;
    for (const std::vector<int> &slot : placement.rank_slots) {
        const TopologyCore *core = topology.core_of(slot.front());
        if (core == nullptr || core->cpus.size() != slot.size()) {
            whole_cores = false;
            break;
        }
        cores.push_back(core->logical_index);
    }
    if (whole_cores)
        return {"--cpu-set", affinity::format_cpu_list(cores), "--bind-to",
                "core:overload-allowed"};
    std::vector<int> pus;
    for (int cpu : placement.rank_cpus()) pus.push_back(topology.cpu_logical_index(cpu));
    return {"--use-hwthread-cpus", "--cpu-set", affinity::format_cpu_list(pus), "--bind-to",
            "hwthread:overload-allowed"};
}

std::vector<std::string> mpi_shared_slot_options(MpiFlavor flavor, const Placement &placement,
                                                 int ranks) {
    // Open MPI does not count ranks sharing a slot as oversubscribed (its
    // slots are the machine's cores), so a rank waiting in MPI spins through
    // the time slice of the rank it waits for on the same CPU: 8-16 ms per
    // collective measured for 2 ranks on one core. Debian's MPICH 4.0.2
    // (ch4:ucx) has no such switch: it spins through its partner's time
    // slice whatever MPIR_CVAR_POLLS_BEFORE_YIELD says (docs/launch.md).
    if (flavor != MpiFlavor::kOpenMpi || placement.rank_slots.empty() ||
        ranks <= int(placement.rank_slots.size()))
        return {};
    return {"--mca", "mpi_yield_when_idle", "1"};
}

}  // namespace deputy::launch
