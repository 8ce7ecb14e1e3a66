// Which MPI an mpirun belongs to, from what `mpirun --version` prints:
// Open MPI ("mpirun (Open MPI) 4.1.4") or MPICH's process manager Hydra
// ("HYDRA build details:"). The two differ in how a rank's environment is
// given (`-x NAME=value` / `-genv NAME value`), in their other options
// (mpirun_args.h), and in the PMPI library a rank preloads
// (libdeputy-mpi-openmpi.so / libdeputy-mpi-mpich.so).
#pragma once

#include <string>

namespace deputy::launch {

enum class MpiFlavor { kOpenMpi, kHydra };

struct MpiLauncher {
    std::string path;  // resolved
    MpiFlavor flavor = MpiFlavor::kOpenMpi;
    std::string version;  // "Open MPI 4.1.4", "MPICH Hydra 4.0.2"
};

// Runs `path --version` (at most `timeout_s`) and tells the flavor. False
// with `*error` set when it cannot run or prints neither signature.
bool identify_mpi_launcher(const std::string &path, double timeout_s, MpiLauncher *out,
                           std::string *error);

// "openmpi" / "mpich": the library's and pkg-config package's suffix.
const char *flavor_id(MpiFlavor flavor);

}  // namespace deputy::launch
