// The host's checks: the CPU and its SIMD level, cores and NUMA nodes, and
// the kernel features every deputy path needs (memfd with seals) or that
// ordinary memory in direct mode needs (cross-memory attach, Yama).
#include <fmt/format.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/fd.h"
#include "common/topology.h"
#include "cli/doctor/finding.h"
#include "mover/kernels.h"

namespace deputy::doctor {
namespace {

void cpu(const Probe &p, std::vector<Finding> *out) {
    std::ifstream in(p.at("/proc/cpuinfo"));
    std::string line, model;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
            model = line.substr(line.find(':') + 2);
            break;
        }
    out->push_back({"cpu", "model", Status::info,
                    model.empty() ? "not named in /proc/cpuinfo" : model, ""});
    const mover::kernels::Isa isa = mover::kernels::detected_isa();
    const std::string name = mover::kernels::isa_name(isa);
    if (isa == mover::kernels::Isa::avx512)
        out->push_back({"cpu", "simd", Status::ok,
                        "AVX-512 (F, BW, VL, DQ): reductions and copies at their widest", ""});
    else
        out->push_back({"cpu", "simd", Status::info,
                        fmt::format("{}: deputy's kernels run at this level (AVX-512 is its widest)",
                                    name),
                        ""});
}

void cores(const Probe &p, std::vector<Finding> *out) {
    Topology t;
    std::string error;
    if (load_machine_topology(&t, &error) != DP_OK) {
        out->push_back({"cpu", "cores", Status::warn, "hwloc: " + error,
                        "check that hwloc can read /sys (a container may hide it)"});
    } else if (t.cpu_count() < 3) {
        out->push_back({"cpu", "cores", Status::info,
                        t.summary() + " usable; with 2 ranks or more the agent shares their cores "
                                      "(the shared placement; deputy never loses there, wins little)",
                        "give the agent a core of its own where one is spare: deputy mpirun "
                        "--agent-cores N"});
    } else {
        out->push_back({"cpu", "cores", Status::ok, t.summary() + " usable", ""});
    }
    std::string list_error;
    int nodes = 0;
    for (const std::string &n : p.list("/sys/devices/system/node", &list_error))
        if (n.rfind("node", 0) == 0 && n.size() > 4 && std::isdigit(static_cast<unsigned char>(n[4])))
            ++nodes;
    if (nodes == 0)
        out->push_back({"cpu", "numa", Status::info,
                        "NUMA nodes not shown (" + list_error + "): taken as one", ""});
    else
        out->push_back({"cpu", "numa", Status::info,
                        fmt::format("{} NUMA node{}{}", nodes, nodes == 1 ? "" : "s",
                                    nodes == 1 ? "" : ": place the agent on the ranks' node"),
                        ""});
}

void memfd(std::vector<Finding> *out) {
    UniqueFd fd(int(memfd_create("deputy-doctor", MFD_CLOEXEC | MFD_ALLOW_SEALING)));
    if (!fd) {
        out->push_back({"memory", "memfd", Status::fail,
                        std::string("memfd_create: ") + std::strerror(errno) +
                            ": deputy's pools and shared heap are memfd segments",
                        "Linux 3.17 or later; in a container, a seccomp profile that allows "
                        "memfd_create"});
        return;
    }
    if (ftruncate(fd.get(), 4096) != 0 ||
        fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        out->push_back({"memory", "memfd", Status::fail,
                        std::string("sealing a memfd: ") + std::strerror(errno) +
                            ": the agent refuses segments it cannot seal against shrinking",
                        "a kernel with memfd seals (Linux 3.17 or later)"});
        return;
    }
    out->push_back({"memory", "memfd", Status::ok, "memfd segments with seals", ""});
}

void cross_memory(const Probe &p, std::vector<Finding> *out) {
    // The agent reads and writes ordinary (registered) memory of its
    // clients with process_vm_readv/writev, which the kernel allows to a
    // process the client named as its ptracer (deputy's clients do: Yama
    // scope 1) or to anyone with the same uid (scope 0).
    int value = 42, copy = 0;
    iovec local{&copy, sizeof copy}, remote{&value, sizeof value};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(sizeof value)) {
        out->push_back({"memory", "cross_memory_attach", Status::warn,
                        std::string("process_vm_readv: ") + std::strerror(errno) +
                            ": the agent cannot reach ordinary memory of its clients",
                        "a kernel with CONFIG_CROSS_MEMORY_ATTACH, or a seccomp profile allowing "
                        "process_vm_readv/writev; otherwise memory_mode staged, or deputy's "
                        "memory (dp_malloc, the shared heap)"});
        return;
    }
    out->push_back({"memory", "cross_memory_attach", Status::ok,
                    "process_vm_readv/writev available", ""});
    std::string scope, error;
    if (!p.exists("/proc/sys/kernel/yama")) {
        out->push_back({"memory", "ptrace_scope", Status::ok,
                        "no Yama: a process of the same uid may reach another's memory", ""});
    } else if (!p.read_line("/proc/sys/kernel/yama/ptrace_scope", &scope, &error)) {
        out->push_back({"memory", "ptrace_scope", Status::warn, error,
                        "make it readable, or check by hand: cat "
                        "/proc/sys/kernel/yama/ptrace_scope"});
    } else if (scope == "0" || scope == "1") {
        out->push_back({"memory", "ptrace_scope", Status::ok,
                        "Yama ptrace_scope " + scope +
                            (scope == "1" ? ": clients name their agent as ptracer, as deputy's do"
                                          : ": any process of the uid"),
                        ""});
    } else {
        out->push_back({"memory", "ptrace_scope", Status::warn,
                        "Yama ptrace_scope " + scope +
                            ": only privileged processes may reach another's memory, so the agent "
                            "refuses clients' ordinary memory in direct mode",
                        "sysctl -w kernel.yama.ptrace_scope=1 (3 needs a reboot); or memory_mode "
                        "staged, or deputy's memory (dp_malloc, the shared heap)"});
    }
}

}  // namespace

void check_host(const Probe &p, std::vector<Finding> *out) {
    cpu(p, out);
    cores(p, out);
    memfd(out);
    cross_memory(p, out);
}

}  // namespace deputy::doctor
