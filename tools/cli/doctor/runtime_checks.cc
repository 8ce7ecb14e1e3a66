// What deputy itself finds to run with: the MPI launchers and, for each,
// the libdeputy-mpi build an unmodified program preloads; the agent of
// several nodes (deputy-agent-mpi); and whether an agent answers, where
// its threads run.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/socket_dir.h"
#include "channel/agent_address.h"
#include "channel/agent_info.h"
#include "cli/doctor/finding.h"
#include "cli/launch/mpi_flavor.h"
#include "cli/launch/mpi_library.h"

namespace deputy::doctor {
namespace {

std::string on_path(const std::string &name) {
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t at = 0; at <= dirs.size();) {
        const size_t end = std::min(dirs.find(':', at), dirs.size());
        const std::string candidate = dirs.substr(at, end - at) + "/" + name;
        if (end > at && access(candidate.c_str(), X_OK) == 0) return candidate;
        at = end + 1;
    }
    return "";
}

// Where no agent answers yet: whether one could listen at `address`. The
// agent refuses a socket directory others may enter or write.
void socket_directory(const std::string &address, std::vector<Finding> *out) {
    if (address.empty() || address[0] != '/') return;  // (an abstract socket)
    const std::string dir = address.rfind('/') == 0 ? "/" : address.substr(0, address.rfind('/'));
    struct stat st;
    if (dir.empty() || stat(dir.c_str(), &st) != 0) {
        out->push_back({"agent", "socket directory", Status::ok,
                        dir + " does not exist yet: an agent creates it private (0700)", ""});
        return;
    }
    std::string error;
    if (agent::check_socket_dir(dir, &error) != DP_OK) {
        out->push_back({"agent", "socket directory", Status::fail,
                        error + ": an agent refuses to listen there", ""});
        return;
    }
    out->push_back({"agent", "socket directory", Status::ok, dir + " is private", ""});
}

}  // namespace

void check_mpi(const Probe &, std::vector<Finding> *out) {
    int found = 0;
    for (const char *name : {"mpirun.openmpi", "mpirun.mpich"}) {
        const std::string path = on_path(name);
        if (path.empty()) continue;
        launch::MpiLauncher l;
        std::string error;
        if (!launch::identify_mpi_launcher(path, 10.0, &l, &error)) {
            out->push_back({"mpi", name, Status::warn, error, ""});
            continue;
        }
        ++found;
        std::string lib_error;
        const std::string lib = launch::find_mpi_library(l.flavor, &lib_error);
        if (lib.empty())
            out->push_back({"mpi", name, Status::warn,
                            l.version + " at " + path + "; no libdeputy-mpi for it: " + lib_error,
                            fmt::format("build deputy with its development files (Debian: "
                                        "{}), or give deputy mpirun --mpi-lib",
                                        l.flavor == launch::MpiFlavor::kOpenMpi
                                            ? "libopenmpi-dev"
                                            : "libmpich-dev")});
        else
            out->push_back({"mpi", name, Status::ok,
                            l.version + " at " + path + "; unmodified programs preload " + lib,
                            ""});
    }
    if (found == 0)
        out->push_back({"mpi", "launchers", Status::info,
                        "no mpirun.openmpi or mpirun.mpich on PATH: libdeputy-mpi and agents of "
                        "several nodes need one",
                        "Debian: apt install openmpi-bin libopenmpi-dev (or mpich libmpich-dev)"});
    const std::string self = launch::self_path();
    const std::string agent_mpi = self.substr(0, self.rfind('/') + 1) + "deputy-agent-mpi";
    if (access(agent_mpi.c_str(), X_OK) == 0)
        out->push_back({"mpi", "agents of several nodes", Status::ok,
                        agent_mpi + " (mpirun ... deputy agent)", ""});
    else
        out->push_back({"mpi", "agents of several nodes", Status::info,
                        "no deputy-agent-mpi beside " + self + ": one node only",
                        "build deputy where CMake finds MPI"});
}

void check_agent(const Probe &p, std::vector<Finding> *out) {
    const std::string address = channel::resolve_agent_address(p.socket);
    const char *token = std::getenv("DEPUTY_TOKEN");
    std::string text, error;
    const dp_status_t s = channel::request_agent_info(address, token ? token : "",
                                                      int64_t(p.agent_timeout_s * 1e9), &text,
                                                      &error);
    if (s != DP_OK) {
        socket_directory(address, out);
        out->push_back({"agent", "reachable", Status::warn,
                        fmt::format("no agent answers: {} ({})", error, dp_status_name(s)),
                        "deputy agent --daemon (deputy mpirun and the Python package start one "
                        "by themselves)"});
        return;
    }
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        out->push_back({"agent", "reachable", Status::warn,
                        "the agent at " + address + " sent unreadable info", ""});
        return;
    }
    out->push_back({"agent", "reachable", Status::ok,
                    fmt::format("pid {} at {}, version {}, {} engine(s), {} client(s)",
                                j.value("pid", 0), address, j.value("version", "?"),
                                j.value("engines", 0u), j.value("clients", nlohmann::json::array()).size()),
                    ""});
    if (!j.contains("placement")) return;
    const nlohmann::json &pl = j["placement"];
    std::string threads;
    for (const auto &t : pl.value("threads", nlohmann::json::array()))
        threads += fmt::format("{}{} on {}", threads.empty() ? "" : ", ", t.value("name", "?"),
                               t.value("allowed_cpus", std::string("any")));
    const std::string layout = pl.value("layout", "?");
    out->push_back({"agent", "placement", Status::info,
                    "layout " + layout + ": " + threads +
                        (pl.contains("warning") ? "; " + pl["warning"].get<std::string>() : ""),
                    layout == "shared" ? "deputy agent --agent-cores N gives it cores of its own"
                                       : ""});
}

}  // namespace deputy::doctor
