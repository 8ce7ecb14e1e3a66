#include "mpi/runtime.h"

#include "common/fnv.h"
#include "mpi/comm_teams.h"
#include "mpi/datatypes.h"
#include "mpi/offload_requests.h"
#include "mpi/tuning.h"

#include <deputy/status.h>
#include <fmt/format.h>
#include <mpi.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace deputy::mpi {
namespace {

bool env_flag(const char *name) {
    const char *v = std::getenv(name);
    return v && *v && std::strcmp(v, "0") != 0;
}

// 32 random bytes as hex, the job's secret when the launcher gave none:
// made by rank 0 and broadcast, so only this job's ranks meet in its teams.
void job_secret(char (&secret)[65]) {
    std::memset(secret, 0, sizeof secret);
    if (const char *given = std::getenv("DEPUTY_JOB_SECRET"); given && *given) {
        std::snprintf(secret, sizeof secret, "%s", given);
    } else {
        unsigned char bytes[32];
        if (getrandom(bytes, sizeof bytes, 0) != ssize_t(sizeof bytes))
            fatal("getrandom failed making the job's secret");
        for (size_t i = 0; i < sizeof bytes; ++i)
            std::snprintf(secret + 2 * i, 3, "%02x", bytes[i]);
    }
}

void print_report() {
    Runtime &rt = runtime();
    const std::string_view mode = rt.report;
    if (mode.empty() || mode == "0") return;
    if (mode.starts_with("json:")) {
        const std::string path =
            fmt::format("{}/deputy-mpi-rank{}.json", mode.substr(5), rt.world_rank);
        std::string json = fmt::format(
            "{{\"rank\":{},\"size\":{},\"agent\":{},\"placement\":\"{}\",\"placement_given\":{},"
            "\"waits_yield_at_once\":{},\"operations\":{{",
            rt.world_rank, rt.world_size, rt.context ? fmt::format("\"{}\"", rt.agent) : "null",
            placement_name(rt.placement), rt.placement_given ? "true" : "false",
            rt.crowded ? "true" : "false");
        for (int i = 0; i < kOperationCount; ++i) {
            const OperationCounters &c = rt.counters[size_t(i)];
            json += fmt::format("{}\"{}\":{{\"offloaded\":{},\"passed\":{{", i ? "," : "",
                                operation_info(Operation(i)).mpi_name, c.offloaded.load());
            bool first = true;
            for (int r = 0; r < kPassReasonCount; ++r) {
                if (const uint64_t n = c.passed[size_t(r)].load()) {
                    json += fmt::format("{}\"{}\":{}", first ? "" : ",",
                                        pass_reason_name(PassReason(r)), n);
                    first = false;
                }
            }
            json += "}}";
        }
        json += "},\"p2p\":{";
        for (int i = 0; i < kP2pCallCount; ++i)
            json += fmt::format("{}\"{}\":{}", i ? "," : "", p2p_call_name(P2pCall(i)),
                                rt.p2p_offloaded[size_t(i)].load());
        json += "},\"tuned\":" + tuning_report_json() + "}\n";
        FILE *f = std::fopen(path.c_str(), "w");
        if (!f) {
            warn(fmt::format("DEPUTY_MPI_REPORT: cannot write {}: {}", path, std::strerror(errno)));
            return;
        }
        std::fputs(json.c_str(), f);
        std::fclose(f);
        return;
    }
    std::string text = fmt::format(
        "deputy-mpi: rank {}: placement {} ({}): thresholds of that column\n", rt.world_rank,
        placement_name(rt.placement),
        rt.placement_given ? "DEPUTY_MPI_PLACEMENT"
        : rt.placement == Placement::shared
            ? "an agent may run on a CPU of a rank"
            : "every agent runs on CPUs no rank of its node may use");
    if (rt.crowded)
        text += fmt::format("deputy-mpi: rank {}: its waits yield at once (more of its node's ranks "
                            "may run on its CPUs than there are CPUs)\n",
                            rt.world_rank);
    for (int i = 0; i < kOperationCount; ++i) {
        const OperationCounters &c = rt.counters[size_t(i)];
        std::string passed;
        uint64_t passed_total = 0;
        for (int r = 0; r < kPassReasonCount; ++r) {
            if (const uint64_t n = c.passed[size_t(r)].load()) {
                passed += fmt::format("{}{} {}", passed.empty() ? "" : ", ",
                                      pass_reason_name(PassReason(r)), n);
                passed_total += n;
            }
        }
        if (c.offloaded.load() == 0 && passed_total == 0) continue;
        text += fmt::format("deputy-mpi: rank {}: {:<26} offloaded {:>8}  passed to MPI {:>8}{}\n",
                            rt.world_rank, operation_info(Operation(i)).mpi_name,
                            c.offloaded.load(), passed_total,
                            passed.empty() ? "" : "  (" + passed + ")");
    }
    if (text.find("offloaded") == std::string::npos)
        text += fmt::format("deputy-mpi: rank {}: no collective was called\n", rt.world_rank);
    for (int i = 0; i < kP2pCallCount; ++i)
        if (const uint64_t n = rt.p2p_offloaded[size_t(i)].load())
            text += fmt::format("deputy-mpi: rank {}: {:<26} offloaded {:>8}  (point-to-point)\n",
                                rt.world_rank, p2p_call_name(P2pCall(i)), n);
    text += tuning_report_text(rt.world_rank);
    std::fputs(text.c_str(), stderr);
}

// Every rank must decide alike whether a call goes to deputy
// (intercept_collectives.cc): thresholds that differ between ranks (an
// environment mpirun did not pass to every node) would have one rank offload
// a call another passes to MPI, and both wait for ever. Compared at MPI_Init
// as a hash; when they differ, or the library is disabled on some ranks
// only, every rank passes everything to MPI and rank 0 says why. (Not MPI_Abort:
// with every rank aborting at once, MPICH's Hydra dropped their messages.)
void agree_on_thresholds() {
    Runtime &rt = runtime();
    uint64_t hash = kFnvOffset;  // over the thresholds
    for (const size_t t : rt.thresholds) hash = fnv1a_u64(t, hash);
    const int64_t mine = int64_t(hash >> 1);
    // [2]: some rank has the library disabled. Then every rank must be: an
    // enabled rank forms teams (collectives over the communicator) that a
    // disabled one never joins.
    int64_t extremes[3] = {rt.disabled ? INT64_MIN : mine, rt.disabled ? INT64_MIN : -mine,
                           rt.disabled ? 1 : 0};
    PMPI_Allreduce(MPI_IN_PLACE, extremes, 3, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (extremes[0] == INT64_MIN) return;  // disabled everywhere
    if (extremes[2] != 0) {
        if (rt.world_rank == 0)
            warn("DEPUTY_MPI_DISABLE=1 is set on some ranks only: every collective goes to MPI "
                 "unchanged on every rank");
    } else if (extremes[0] == -extremes[1]) {
        return;
    } else if (rt.world_rank == 0) {
        warn("the ranks' thresholds differ: DEPUTY_MPI_THRESHOLDS, DEPUTY_MPI_TUNE or "
             "DEPUTY_MPI_PLACEMENT is not the same on every rank (Open MPI's mpirun passes an "
             "environment variable to other nodes only with -x; deputy mpirun passes every "
             "DEPUTY_MPI_*): every collective goes to MPI unchanged");
    }
    rt.disabled = true;
}

}  // namespace

Runtime g_runtime;

void warn(const std::string &message) {
    std::fprintf(stderr, "deputy-mpi: rank %d: %s\n", runtime().world_rank, message.c_str());
}

void fatal(const std::string &message) {
    warn(message);
    PMPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}

bool parse_thresholds(const char *text, std::array<size_t, kOperationCount> *thresholds,
                      std::string *error) {
    std::string_view rest = text;
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
            *error = fmt::format("'{}' is not op=bytes", item);
            return false;
        }
        const std::string_view key = item.substr(0, eq);
        std::string value(item.substr(eq + 1));
        // "all": every operation of the table (items after it still win).
        const bool all = key == "all";
        const auto op = all ? std::optional<Operation>(Operation(0)) : operation_from_key(key);
        if (!op) {
            *error = fmt::format("unknown operation '{}' (names: iallreduce, allreduce, ..., "
                                 "all; `deputy mpirun --operations` lists them)",
                                 key);
            return false;
        }
        auto set = [&](size_t bytes) {
            if (!all) {
                (*thresholds)[size_t(*op)] = bytes;
                return;
            }
            for (size_t &t : *thresholds) t = bytes;
        };
        if (value == "never") {
            set(kNever);
            continue;
        }
        if (value == "tune") {
            if (all) {
                *error = fmt::format("'{}': DEPUTY_MPI_TUNE=1 tunes every blocking form that can "
                                     "be tuned",
                                     item);
                return false;
            }
            if (!tunable(*op)) {
                *error = fmt::format("'{}': only the blocking forms but alltoallv can be tuned "
                                     "(a nonblocking operation is worth its overlap, which the "
                                     "library cannot time; alltoallv's ranks share no size)",
                                     item);
                return false;
            }
            (*thresholds)[size_t(*op)] = kTune;
            continue;
        }
        size_t scale = 1;
        if (!value.empty()) {
            switch (value.back()) {
                case 'k': case 'K': scale = size_t(1) << 10; break;
                case 'm': case 'M': scale = size_t(1) << 20; break;
                case 'g': case 'G': scale = size_t(1) << 30; break;
                default: break;
            }
            if (scale != 1) value.pop_back();
        }
        char *end = nullptr;
        errno = 0;
        const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
        if (value.empty() || *end || errno || value[0] == '-') {
            *error = fmt::format("'{}': the bytes must be a number (with k, m or g), 'never' or "
                                 "'tune'",
                                 item);
            return false;
        }
        if (n > (kTune - 1) / scale) {  // above: kTune, kNever or a wrap-around
            *error = fmt::format("'{}': too large (at most {} bytes; 'never' offloads nothing)",
                                 item, kTune - 1);
            return false;
        }
        set(size_t(n) * scale);
    }
    return true;
}

void runtime_start(int provided) {
    Runtime &rt = runtime();
    rt.initialized = true;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rt.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &rt.world_size);
    rt.thread_multiple = provided == MPI_THREAD_MULTIPLE;
    rt.require = env_flag("DEPUTY_MPI_REQUIRE");
    rt.disabled = env_flag("DEPUTY_MPI_DISABLE");
    if (const char *r = std::getenv("DEPUTY_MPI_REPORT")) rt.report = r;
    std::string error;
    const std::optional<Placement> given = placement_from_environment(&error);
    if (!error.empty()) fatal(error);
    datatypes_start();
    comm_teams_start();

    // Collective over MPI_COMM_WORLD whatever this rank's settings, so that
    // ranks started with different environments still call the same.
    char secret[65];
    if (rt.world_rank == 0) job_secret(secret);
    PMPI_Bcast(secret, sizeof secret, MPI_CHAR, 0, MPI_COMM_WORLD);
    secret[64] = '\0';
    rt.crowded = ranks_crowd_my_cpus();

    dp_status_t st = DP_ERR_NO_AGENT;
    if (!rt.disabled) {
        dp_config_t config = DP_CONFIG_INITIALIZER;
        config.job_secret = secret;
        config.wq_mode = rt.thread_multiple ? DP_WQ_SHARED : DP_WQ_DEDICATED;
        config.cpu_shared = rt.crowded ? 1 : 0;
        st = dp_init(&config, &rt.context);
        if (st != DP_OK) rt.context = nullptr;
        if (!requests_start() && rt.context) {
            dp_finalize(rt.context);
            rt.context = nullptr;
        }
    }
    const char *agent = std::getenv("DEPUTY_AGENT");
    rt.agent = agent ? agent : "the default socket";
    // How many ranks have no agent, and how many share their cores with it.
    // And how many asked for point-to-point offload, which all must.
    rt.p2p = env_flag("DEPUTY_MPI_P2P");
    int counts[3] = {rt.disabled || rt.context ? 0 : 1,
                     rt.context && local_placement(rt.context) == Placement::shared ? 1 : 0,
                     rt.p2p ? 1 : 0};
    PMPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const int missing = counts[0];
    if (counts[2] != 0 && counts[2] != rt.world_size)
        fatal(fmt::format("DEPUTY_MPI_P2P=1 on {} of {} ranks: every rank must say the same (a "
                          "message deputy carries is never seen by MPI's receive)",
                          counts[2], rt.world_size));
    rt.placement_given = given.has_value();
    rt.placement = given ? *given : counts[1] > 0 ? Placement::shared : Placement::own_core;
    for (int i = 0; i < kOperationCount; ++i) {
        const OperationInfo &info = operation_info(Operation(i));
        rt.thresholds[size_t(i)] = rt.placement == Placement::own_core ? info.own_core_threshold
                                                                       : info.shared_threshold;
    }
    if (env_flag("DEPUTY_MPI_TUNE")) {  // every tunable form; DEPUTY_MPI_THRESHOLDS still wins
        for (int i = 0; i < kOperationCount; ++i)
            if (tunable(Operation(i))) rt.thresholds[size_t(i)] = kTune;
    }
    if (const char *t = std::getenv("DEPUTY_MPI_THRESHOLDS")) {
        if (!parse_thresholds(t, &rt.thresholds, &error)) fatal("DEPUTY_MPI_THRESHOLDS: " + error);
    }
    agree_on_thresholds();
    if (!rt.disabled && !rt.context && rt.require)
        fatal(fmt::format("DEPUTY_MPI_REQUIRE=1 and no deputy agent at {}: {}", rt.agent,
                          dp_strerror(st)));
    if (missing && rt.world_rank == 0)
        warn(fmt::format("{} of {} ranks reached no deputy agent ({}; DEPUTY_AGENT={}): their "
                         "communicators' collectives go to MPI unchanged",
                         missing, rt.world_size, dp_strerror(st), rt.agent));
    // The world's team now, so that the first collective does not pay for it.
    world_team_start();
}

void runtime_stop() {
    Runtime &rt = runtime();
    if (!rt.initialized) return;
    requests_stop();
    comm_teams_stop();
    print_report();
    if (rt.context) dp_finalize(rt.context);
    rt.context = nullptr;
    rt.initialized = false;
}

}  // namespace deputy::mpi
