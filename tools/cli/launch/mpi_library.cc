#include "cli/launch/mpi_library.h"

#include <unistd.h>

#include <filesystem>

// Both set by tools/CMakeLists.txt from GNUInstallDirs.
#if !defined(DEPUTY_INSTALL_LIBDIR) || !defined(DEPUTY_INSTALL_FULL_LIBDIR)
#error "DEPUTY_INSTALL_LIBDIR and DEPUTY_INSTALL_FULL_LIBDIR come from tools/CMakeLists.txt"
#endif

namespace deputy::launch {

namespace fs = std::filesystem;

std::string self_path() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

std::vector<std::string> mpi_library_candidates(MpiFlavor flavor) {
    const std::string name = std::string("libdeputy-mpi-") + flavor_id(flavor) + ".so";
    const fs::path bin_dir = fs::path(self_path()).parent_path();
    std::vector<std::string> out;
    auto add = [&](const fs::path &p) {
        const std::string s = p.lexically_normal().string();
        for (const std::string &o : out)
            if (o == s) return;
        out.push_back(s);
    };
    add(bin_dir / ".." / "src" / "mpi" / name);
    add(bin_dir / ".." / DEPUTY_INSTALL_LIBDIR / name);
    add(fs::path(DEPUTY_INSTALL_FULL_LIBDIR) / name);
    return out;
}

std::string find_mpi_library(MpiFlavor flavor, std::string *error) {
    const std::vector<std::string> candidates = mpi_library_candidates(flavor);
    for (const std::string &c : candidates) {
        std::error_code ec;
        if (fs::is_regular_file(c, ec)) return c;
    }
    *error = std::string("no PMPI library for ") +
             (flavor == MpiFlavor::kOpenMpi ? "Open MPI" : "MPICH") + " (libdeputy-mpi-" +
             flavor_id(flavor) + ".so); looked at:";
    for (const std::string &c : candidates) *error += "\n  " + c;
    *error +=
        "\nbuild it (CMake builds it when that MPI is installed) or give its path with "
        "--mpi-lib PATH";
    return {};
}

}  // namespace deputy::launch
