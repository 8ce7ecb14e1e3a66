// The machine as placement sees it (hwloc): packages (sockets), their cores,
// and each core's CPUs (hwloc's PUs: hardware threads, numbered as Linux
// numbers them, "OS indexes"). Two CPUs of one core are SMT siblings.
//
// Only the CPUs this process may use are in it (hwloc leaves out those its
// cgroup cpuset forbids), so a Slurm allocation or a container shows as
// the machine it is allowed to use.
//
// DEPUTY_TOPOLOGY set to an hwloc synthetic description ("package:2
// core:16 pu:2", optionally with "pu:2(indexes=2*32:1*2)" for Linux's
// numbering of siblings as N and N+32) replaces this machine: to plan the
// layout of other nodes (`deputy mpirun --dry-run`) and for tests.
#pragma once

#include <deputy/status.h>

#include <string>
#include <vector>

namespace deputy {

struct TopologyCore {
    int package = 0;        // the package's logical index
    int logical_index = 0;  // hwloc's logical core number (Open MPI's --cpu-set counts these)
    std::vector<int> cpus;  // OS indexes of its CPUs, in hwloc's logical order
    std::vector<int> cpu_logical_indexes;  // hwloc's logical PU numbers, the same order
};

struct Topology {
    int packages = 0;
    std::vector<TopologyCore> cores;  // package by package, in hwloc's logical order
    std::string source;  // "this machine", "DEPUTY_TOPOLOGY=...", or the synthetic text

    int cpu_count() const;
    std::vector<int> all_cpus() const;  // ascending
    bool has_smt() const;               // some core has two CPUs or more
    // The core holding `cpu`, or nullptr when it is not in the topology.
    const TopologyCore *core_of(int cpu) const;
    // hwloc's logical PU number of `cpu`, or -1.
    int cpu_logical_index(int cpu) const;
    // "2 packages, 8 cores, 16 CPUs, SMT: 2 per core" / "1 package, 2 cores, 2 CPUs, no SMT".
    std::string summary() const;
};

// This machine, or DEPUTY_TOPOLOGY's description when it is set.
dp_status_t load_machine_topology(Topology *out, std::string *error);

// An hwloc synthetic topology ("package:2 core:4 pu:2"). DP_ERR_INVALID with
// *error naming the description when hwloc refuses it.
dp_status_t load_synthetic_topology(const std::string &description, Topology *out,
                                    std::string *error);

}  // namespace deputy
