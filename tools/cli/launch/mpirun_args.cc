#include "cli/launch/mpirun_args.h"

#include <charconv>
#include <map>
#include <set>

namespace deputy::launch {
namespace {

enum class HostKind { kNone, kFile, kList };

struct OptionInfo {
    int values;  // how many arguments follow the option
    HostKind host = HostKind::kNone;
};

// Open MPI 4.1 (`mpirun --help all`), without leading dashes: it accepts
// one or two. Everything else is a flag.
const std::map<std::string, OptionInfo> &open_mpi_options() {
    static const std::map<std::string, OptionInfo> table = [] {
        std::map<std::string, OptionInfo> t;
        // clang-format off
        for (const char *name :
             {"am", "app", "bind-to", "c", "np", "cf", "cartofile", "cpu-list", "cpu-set",
              "cpus-per-proc", "cpus-per-rank", "debugger", "hnp", "launch-agent", "map-by",
              "max-restarts", "max-vm-size", "N", "n", "npernode", "npersocket", "ompi-server",
              "output-filename", "path", "personality", "ppr", "prefix", "preload-files",
              "rank-by", "report-events", "report-pid", "report-uri", "rf", "rankfile", "stdin",
              "timeout", "tune", "wd", "wdir", "x", "xml-file", "xterm"})
            t[name] = {1};
        // clang-format on
        for (const char *name : {"mca", "gmca"}) t[name] = {2};
        for (const char *name : {"hostfile", "machinefile", "default-hostfile"})
            t[name] = {1, HostKind::kFile};
        for (const char *name : {"H", "host"}) t[name] = {1, HostKind::kList};
        return t;
    }();
    return table;
}

// MPICH 4's Hydra (`mpiexec -help`), without leading dashes.
const std::map<std::string, OptionInfo> &hydra_options() {
    static const std::map<std::string, OptionInfo> table = [] {
        std::map<std::string, OptionInfo> t;
        // clang-format off
        for (const char *name :
             {"genvlist", "wdir", "configfile", "envlist", "n", "np", "launcher",
              "launcher-exec", "rmk", "topolib", "bind-to", "map-by", "membind", "demux", "iface",
              "ppn", "prepend-pattern", "outfile-pattern", "errfile-pattern", "nameserver",
              "localhost", "usize", "gpus-per-proc"})
            t[name] = {1};
        // clang-format on
        for (const char *name : {"genv", "env"}) t[name] = {2};
        for (const char *name : {"f", "hostfile", "machinefile"}) t[name] = {1, HostKind::kFile};
        for (const char *name : {"hosts", "host"}) t[name] = {1, HostKind::kList};
        return t;
    }();
    return table;
}

// Options that bind the ranks to CPUs (flags or with values): `deputy
// mpirun --agent-cores` binds them itself and refuses to fight these.
bool is_binding_option(MpiFlavor flavor, const std::string &name) {
    static const std::set<std::string> open_mpi = {
        "bind-to", "cpu-set", "cpu-list", "rankfile", "rf", "cpus-per-proc", "cpus-per-rank",
        "bind-to-core", "bind-to-socket", "bind-to-none"};
    static const std::set<std::string> hydra = {"bind-to", "binding"};
    return (flavor == MpiFlavor::kOpenMpi ? open_mpi : hydra).count(name) > 0;
}

// The process count options: -np/-n (and Open MPI's -c).
bool is_count_option(MpiFlavor flavor, const std::string &name) {
    return name == "np" || name == "n" || (flavor == MpiFlavor::kOpenMpi && name == "c");
}

}  // namespace

bool parse_mpirun_args(const std::vector<std::string> &args, MpiFlavor flavor,
                       MpirunCommandLine *out, std::string *error) {
    const auto &table = flavor == MpiFlavor::kOpenMpi ? open_mpi_options() : hydra_options();
    *out = MpirunCommandLine{};
    bool in_program = false;
    bool counted = false;  // this app context gave its process count
    bool every_context_counted = true;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string &a = args[i];
        if (a == ":") {
            if (!in_program) {
                *error = "mpirun arguments: no program before the ':' at argument " +
                         std::to_string(i + 1);
                return false;
            }
            in_program = false;
            continue;
        }
        if (in_program) continue;
        if (a.size() < 2 || a[0] != '-') {
            out->programs.push_back(i);
            in_program = true;
            every_context_counted = every_context_counted && counted;
            counted = false;
            continue;
        }
        std::string name = a.substr(a[1] == '-' ? 2 : 1);
        const size_t eq = name.find('=');
        const bool inline_value = eq != std::string::npos;
        if (inline_value) name.resize(eq);
        if (is_binding_option(flavor, name)) {
            out->binding_as_given.push_back(a);
            if (!inline_value && table.count(name) && i + 1 < args.size())
                out->binding_as_given.push_back(args[i + 1]);
        }
        auto it = table.find(name);
        if (it == table.end()) continue;  // a flag
        const OptionInfo &info = it->second;
        if (!inline_value && i + size_t(info.values) >= args.size()) {
            *error = "mpirun arguments: " + a + " needs " + std::to_string(info.values) +
                     (info.values == 1 ? " value" : " values") + ", and no program follows";
            return false;
        }
        if (info.host != HostKind::kNone) {
            const std::string value = inline_value ? a.substr(a.find('=') + 1) : args[i + 1];
            out->hosts.push_back(info.host == HostKind::kFile ? "--hostfile" : "--host");
            out->hosts.push_back(value);
            out->hosts_as_given.push_back(a);
            if (!inline_value) out->hosts_as_given.push_back(value);
        }
        if (is_count_option(flavor, name)) {
            const std::string value = inline_value ? a.substr(a.find('=') + 1) : args[i + 1];
            int n = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (ec == std::errc() && end == value.data() + value.size() && n > 0) {
                out->ranks += n;
                counted = true;
            }
        }
        if (!inline_value) i += size_t(info.values);
    }
    if (!every_context_counted) out->ranks = 0;
    if (out->programs.empty() || !in_program) {
        *error = out->programs.empty()
                     ? "no program among the mpirun arguments (deputy mpirun [options] [--] "
                       "[mpirun arguments] program [args]; programs from a file, --app or "
                       "-configfile, are not supported)"
                     : "mpirun arguments: no program after the last ':'";
        return false;
    }
    return true;
}

std::vector<std::string> rank_env_option(MpiFlavor flavor, const std::string &name,
                                         const std::string &value) {
    if (flavor == MpiFlavor::kOpenMpi) return {"-x", name + "=" + value};
    return {"-genv", name, value};
}

}  // namespace deputy::launch
