#include "bench/coll/load.h"

#include <deputy/coll.h>
#include <deputy/context.h>
#include <fmt/format.h>
#include <time.h>

#include <cstring>

#include "bench/coll/collective.h"
#include "bench/coll/session.h"
#include "bench/coll/world.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::bench::coll {
namespace {

// Rank 0 and the streaming ranks talk on MPI_COMM_WORLD with these tags
// (the measured team's own messages use its communicator).
constexpr int kGoTag = 9101;       // rank 0 -> every streaming rank: int 1 go, 0 never mind
constexpr int kStartedTag = 9102;  // leader -> rank 0: int 1 its first operation ran, 0 failed
constexpr int kStopTag = 9103;     // rank 0 -> leader
constexpr int kReportTag = 9104;   // leader -> rank 0: double operations, seconds

// Waits asleep (1 ms naps: no CPU taken from the measured team) for a
// message from rank 0 with `tag`; its int.
int sleep_until_told(int tag) {
    for (;;) {
        int flag = 0;
        MPI_Iprobe(0, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (flag) break;
        const timespec nap{0, 1'000'000};
        nanosleep(&nap, nullptr);
    }
    int value = 0;
    MPI_Recv(&value, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return value;
}

int leader_of(const LoadSplit &s, int team) { return team * s.team_size; }

}  // namespace

bool split_for_load(const std::vector<uint64_t> &sizes, LoadSplit *out, std::string *why) {
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    LoadSplit s;
    s.sizes = sizes;
    s.teams = 1 + int(sizes.size());
    if (n % s.teams != 0) {
        *why = fmt::format("--load gives {} streaming team(s): the {} ranks must split into {} "
                           "teams of equal size (run a multiple of {} ranks)",
                           sizes.size(), n, s.teams, s.teams);
        return false;
    }
    s.team_size = n / s.teams;
    s.team = rank / s.team_size;
    if (sizes.empty()) s.comm = MPI_COMM_WORLD;
    else MPI_Comm_split(MPI_COMM_WORLD, s.team, rank, &s.comm);
    *out = std::move(s);
    return true;
}

int run_load_rank(const LoadSplit &split, const CollOptions &o) {
    const World world(split.comm);
    const bool leader = world.rank() == 0;
    if (sleep_until_told(kGoTag) == 0) return 0;
    const uint64_t bytes = std::max<uint64_t>(split.sizes[size_t(split.team - 1)], 4);
    const size_t count = size_t(bytes / 4);
    DeputySession session;
    float *send = nullptr, *recv = nullptr;
    bool ok = session.open(world, Memory::mapped, DP_WAIT_DEFAULT, o.agent_socket,
                           pool_bytes_for(count * 4, count * 4));
    if (ok) {
        send = static_cast<float *>(dp_malloc(session.context(), count * 4));
        recv = static_cast<float *>(dp_malloc(session.context(), count * 4));
        ok = send && recv;
        if (!ok) DP_APP_ERROR("load team {}: dp_malloc of 2 x {} B failed", split.team, bytes);
    }
    ok = world.all(ok);
    if (!ok) {
        if (leader) {
            const int started = 0;
            MPI_Send(&started, 1, MPI_INT, 0, kStartedTag, MPI_COMM_WORLD);
        }
        return 2;
    }
    std::memset(send, 0, count * 4);  // (faults the pages in before anything is timed)
    std::memset(recv, 0, count * 4);
    uint64_t ops = 0;
    const uint64_t t0 = timing::now_ns();
    for (;;) {
        if (leader) {
            int stop = 0;
            MPI_Iprobe(0, kStopTag, MPI_COMM_WORLD, &stop, MPI_STATUS_IGNORE);
            if (stop) {
                MPI_Recv(nullptr, 0, MPI_INT, 0, kStopTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                send[0] = 1.0f;  // the sum tells every member: this is the last one
            }
        }
        const dp_status_t st =
            dp_allreduce(send, recv, count, DP_FLOAT32, DP_SUM, session.team());
        if (st != DP_OK) {
            DP_APP_CRITICAL("load team {}: allreduce of {} B failed: {}", split.team, bytes,
                            dp_status_name(st));
            world.abort(3);
        }
        if (++ops == 1 && leader) {
            const int started = 1;
            MPI_Send(&started, 1, MPI_INT, 0, kStartedTag, MPI_COMM_WORLD);
        }
        if (recv[0] > 0.5f) break;
    }
    const double report[2] = {double(ops), double(timing::now_ns() - t0) / 1e9};
    if (leader) MPI_Send(report, 2, MPI_DOUBLE, 0, kReportTag, MPI_COMM_WORLD);
    return 0;
}

LoadControl::LoadControl(const LoadSplit &split) : split_(split) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    root_ = rank == 0;
}

LoadControl::~LoadControl() {
    if (!root_ || released_ || split_.teams == 1) return;
    if (started_) stop();
    else release(0);
}

void LoadControl::release(int go) {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int r = split_.team_size; r < n; ++r) MPI_Send(&go, 1, MPI_INT, r, kGoTag, MPI_COMM_WORLD);
    released_ = go == 0;
}

void LoadControl::start() {
    release(1);
    started_ = true;
    for (int t = 1; t < split_.teams; ++t) {
        int started = 0;
        MPI_Recv(&started, 1, MPI_INT, leader_of(split_, t), kStartedTag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        if (!started) {
            DP_APP_CRITICAL("load team {} could not start (see its ranks' messages)", t);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
}

nlohmann::json LoadControl::stop() {
    nlohmann::json reports = nlohmann::json::array();
    released_ = true;
    for (int t = 1; t < split_.teams; ++t)
        MPI_Send(nullptr, 0, MPI_INT, leader_of(split_, t), kStopTag, MPI_COMM_WORLD);
    for (int t = 1; t < split_.teams; ++t) {
        double report[2] = {0, 0};
        MPI_Recv(report, 2, MPI_DOUBLE, leader_of(split_, t), kReportTag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        const uint64_t bytes = split_.sizes[size_t(t - 1)];
        const double algbw = report[1] > 0 ? report[0] * double(bytes) / report[1] / 1e9 : 0;
        reports.push_back({{"team", t},
                           {"bytes", bytes},
                           {"operations", uint64_t(report[0])},
                           {"seconds", report[1]},
                           {"busbw_gbs", algbw * bus_factor(Coll::allreduce, split_.team_size)}});
    }
    return reports;
}

std::string engine_shares(const nlohmann::json &before, const nlohmann::json &after) {
    auto engines = [](const nlohmann::json &info) {
        std::vector<std::pair<uint64_t, uint64_t>> out;  // work_ns, descriptors by engine
        if (!info.contains("placement")) return out;
        for (const auto &t : info["placement"]["threads"])
            if (t.contains("engine") && t.contains("work_ns"))
                out.emplace_back(t["work_ns"].get<uint64_t>(), t["descriptors"].get<uint64_t>());
        return out;
    };
    const auto b = engines(before), a = engines(after);
    if (a.empty() || a.size() != b.size()) return "";
    uint64_t all = 0;
    for (size_t e = 0; e < a.size(); ++e) all += a[e].first - b[e].first;
    std::string out;
    for (size_t e = 0; e < a.size(); ++e) {
        const uint64_t work = a[e].first - b[e].first;
        out += fmt::format("{}engine {} {:.0f} % ({:.2f} s, {} descriptors)", e ? ", " : "", e,
                           all ? 100.0 * double(work) / double(all) : 0.0, double(work) / 1e9,
                           a[e].second - b[e].second);
    }
    return out;
}

}  // namespace deputy::bench::coll
