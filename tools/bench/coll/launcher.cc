#include "bench/coll/launcher.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/log.h"

namespace deputy::bench {
namespace {

constexpr const char *kProgram = "deputy-bench-coll";

// The directory of the running deputy binary (not $PATH, not argv[0]: under
// mpirun the command may be relative to another working directory).
std::string self_dir() {
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return ".";
    path[n] = '\0';
    std::string s(path);
    size_t slash = s.rfind('/');
    return slash == std::string::npos ? "." : s.substr(0, slash);
}

[[noreturn]] void exec_bench(const std::vector<std::string> &args) {
    const std::string program = self_dir() + "/" + kProgram;
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(program.c_str()));
    for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    const int err = errno;
    if (err == ENOENT)
        DP_APP_ERROR(
            "deputy bench coll: {} not found: it is built when CMake finds MPI "
            "(Debian: openmpi-bin libopenmpi-dev)",
            program);
    else
        DP_APP_ERROR("deputy bench coll: cannot run {}: {}", program, std::strerror(err));
    throw CLI::RuntimeError(2);
}

}  // namespace

void register_coll(CLI::App &bench) {
    CLI::App *app =
        bench.add_subcommand("coll",
                             "offloaded collectives (OSU overlap, nccl-tests busbw) against MPI; "
                             "an MPI program: mpirun -np N deputy bench coll ...");
    // Every argument, --help included, belongs to deputy-bench-coll.
    app->set_help_flag();
    app->prefix_command();
    app->callback([app] { exec_bench(app->remaining()); });
}

}  // namespace deputy::bench
