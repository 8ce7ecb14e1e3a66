#include "cli/launch/mpi_flavor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/fd.h"
#include "cli/launch/agent_process.h"
#include "cli/launch/spawn.h"

namespace deputy::launch {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `argv` with stdout and stderr into one pipe; its output and exit
// status, or false when it cannot start or outlives `timeout_s` (it is
// killed then).
bool capture(const std::vector<std::string> &argv, double timeout_s, std::string *output,
             int *status, std::string *error) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        *error = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    UniqueFd read_end(p[0]), write_end(p[1]);
    UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    SpawnSpec spec;
    spec.path = argv[0];
    spec.argv = argv;
    spec.env = environment_with({});
    spec.stdin_fd = null_fd.get();
    spec.stdout_fd = write_end.get();
    spec.stderr_fd = write_end.get();
    int code = 0;
    const pid_t pid = spawn(spec, error, &code);
    if (pid < 0) return false;
    write_end.reset();
    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
    bool timed_out = false;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd pf{read_end.get(), POLLIN, 0};
        if (poll(&pf, 1, int(left)) < 0 && errno != EINTR) break;
        char buf[4096];
        const ssize_t n = read(read_end.get(), buf, sizeof buf);
        if (n == 0) break;
        if (n > 0 && output->size() < (1 << 20)) output->append(buf, size_t(n));
    }
    if (timed_out) kill_tree(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        *error = "'" + argv[0] + " --version' did not finish within " +
                 std::to_string(int(timeout_s)) + " s";
        return false;
    }
    return true;
}

}  // namespace

const char *flavor_id(MpiFlavor flavor) {
    return flavor == MpiFlavor::kOpenMpi ? "openmpi" : "mpich";
}

bool identify_mpi_launcher(const std::string &path, double timeout_s, MpiLauncher *out,
                           std::string *error) {
    std::string text;
    int status = 0;
    if (!capture({path, "--version"}, timeout_s, &text, &status, error)) return false;
    out->path = path;
    // Called as mpirun it says "(Open MPI) 4.1.4"; as mpirun.openmpi (Debian's
    // real name of the same orterun), "(OpenRTE) 4.1.4". Plain string search:
    // GCC 12 warns inside std::regex at -O1 with sanitizers (maybe-uninitialized
    // in std::function), which -Werror makes an error in the ASan build.
    for (const char *tag : {"(Open MPI) ", "(OpenRTE) "}) {
        const size_t at = text.find(tag);
        if (at == std::string::npos) continue;
        const size_t from = at + std::strlen(tag);
        const size_t to = text.find_first_of(" \t\r\n", from);
        const std::string version = text.substr(from, to == std::string::npos ? to : to - from);
        if (version.empty() || version[0] < '0' || version[0] > '9') continue;
        out->flavor = MpiFlavor::kOpenMpi;
        out->version = "Open MPI " + version;
        return true;
    }
    if (text.find("HYDRA build details") != std::string::npos) {
        out->flavor = MpiFlavor::kHydra;
        out->version = "MPICH Hydra";
        if (const size_t at = text.find("Version:"); at != std::string::npos) {
            const size_t from = text.find_first_not_of(" \t", at + 8);
            const size_t to = from == std::string::npos ? from : text.find_first_of(" \t\r\n", from);
            if (from != std::string::npos) out->version += " " + text.substr(from, to - from);
        }
        return true;
    }
    // Its first lines say what it is.
    std::string shown;
    for (size_t at = 0, lines = 0; at < text.size() && lines < 3; ++lines) {
        const size_t end = std::min(text.find('\n', at), text.size());
        shown += (lines ? "\n  " : "  ") + text.substr(at, end - at);
        at = end + 1;
    }
    *error = "cannot tell which MPI '" + path + "' belongs to: '" + path + " --version' (" +
             describe_status(status) + ") printed neither \"(Open MPI)\" nor \"HYDRA build " +
             "details\"" + (shown.empty() ? "" : ":\n" + shown) +
             "\n(deputy mpirun knows Open MPI's mpirun and MPICH's Hydra; --mpirun PATH picks "
             "another)";
    return false;
}

}  // namespace deputy::launch
