// The mpirun options that bind the ranks to a layout's slots
// (common/placement.h), in each MPI's own terms:
//
//  Open MPI 4.1: --cpu-set counts hwloc *logical* cores (orterun(1):
//    "logical cpus"; opal_hwloc_base_filter_cpus looks them up with
//    hwloc_get_obj_by_type), or logical PUs with --use-hwthread-cpus.
//    Slots that are whole cores: --cpu-set <logical cores> --bind-to
//    core:overload-allowed; slots of single CPUs (smt, or a cpus: list that
//    splits a core): --use-hwthread-cpus --cpu-set <logical PUs> --bind-to
//    hwthread:overload-allowed. overload-allowed: more ranks than slots share
//    them, as under `deputy launch`, instead of failing (and then
//    mpi_shared_slot_options makes them yield while they wait).
//  MPICH Hydra: -bind-to user:<slot>,<slot>,... with a slot's CPUs (OS
//    numbers) joined by '+'. Rank r gets entry r, and a rank beyond the
//    list is not bound at all (Hydra 4.0.2 does not wrap around), so the
//    list repeats the slots up to the number of ranks when it is known.
//
// Numbers come from this machine's topology: with a hostfile the other
// hosts are taken to be alike.
#pragma once

#include <string>
#include <vector>

#include "common/placement.h"
#include "common/topology.h"
#include "cli/launch/mpi_flavor.h"

namespace deputy::launch {

// Empty when the placement binds no rank (shared). `ranks`: the processes
// on this machine, 0 when unknown.
std::vector<std::string> mpi_binding_options(MpiFlavor flavor, const Topology &topology,
                                             const Placement &placement, int ranks);

// More ranks than the placement's slots (`ranks` known): the options that
// make ranks sharing a CPU yield it while they wait in MPI (Open MPI:
// --mca mpi_yield_when_idle 1); empty otherwise.
std::vector<std::string> mpi_shared_slot_options(MpiFlavor flavor, const Placement &placement,
                                                 int ranks);

}  // namespace deputy::launch
