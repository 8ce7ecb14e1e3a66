#include "mpi/tuning.h"

#include "mpi/runtime.h"

#include "common/units.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <bit>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

namespace deputy::mpi {
namespace {

// Timed calls per path. 7 medians out a call or two that the scheduler
// delays (this machine's single calls spread 3x). The paths take turns by
// pairs of calls, the second of each pair timed: a program calls the same
// collective again and again, and deputy's call right after one of MPI's
// finds the agent's engines asleep (4 MiB allgather: timed one call each,
// the trial chose MPI in 2 of 3 runs where deputy takes 0.86x MPI's time).
// Rounds of two pairs, the order swapped every round; round 0 warms up.
// 4 x (7 + 1) calls per size class, ~0.1 s at 16 MiB here.
constexpr uint32_t kTimedPerPath = 7;
constexpr uint32_t kTrialCalls = 4 * (kTimedPerPath + 1);
constexpr int kClasses = 65;  // bit widths of a size_t: 0 (0 bytes) .. 64

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// What the report says of one decision; kept until MPI_Finalize, after
// the communicator may have been freed.
struct Decision {
    Operation op;
    int ranks;
    int size_class;
    double deputy_us, mpi_us;  // the slowest rank's medians
    bool deputy;
    uint64_t calls_after = 0;  // calls of the class after the decision (its
                               // communicator's count added when that goes)
};

std::mutex g_mutex;               // g_decisions
std::deque<Decision> g_decisions; // stable addresses: SizeClass points here

// The class's bytes, "64K-128K" (its upper bound excluded).
std::string class_text(int k) {
    if (k == 0) return "0";
    const uint64_t lo = uint64_t(1) << (k - 1);
    return k == 64 ? "from " + units::format_size(lo)
                   : units::format_size(lo) + "-" + units::format_size(lo << 1);
}

// Of the first n (calls that failed were not timed); none: never chosen.
double median_us(std::array<double, kTimedPerPath> v, uint32_t n) {
    if (n == 0) return std::numeric_limits<double>::infinity();
    std::nth_element(v.begin(), v.begin() + n / 2, v.begin() + n);
    return v[n / 2];
}

}  // namespace

enum class Choice : uint8_t { undecided, deputy, mpi };

struct SizeClass {
    Choice choice = Choice::undecided;  // read first on every call
    uint64_t calls_after = 0;           // since the decision, not yet in *decision
    Decision *decision = nullptr;
    uint32_t calls = 0;                 // trial calls so far
    uint32_t timed[2] = {0, 0};         // [0] deputy, [1] MPI
    std::array<double, kTimedPerPath> us[2]{};
};

struct Tuning {
    // Per operation, allocated on its first tuned call.
    std::array<std::unique_ptr<std::array<SizeClass, kClasses>>, kOperationCount> classes;
};

void destroy_tuning(Tuning *tuning) {
    if (!tuning) return;
    std::lock_guard lock(g_mutex);
    for (auto &per_op : tuning->classes)
        if (per_op)
            for (SizeClass &c : *per_op)
                if (c.decision) c.decision->calls_after += c.calls_after;
    delete tuning;
}

TunedCall::TunedCall(Operation op, CommTeam *ct, MPI_Comm comm, size_t bytes) {
    if (runtime().thresholds[size_t(op)] != kTune) return;
    // Calls on one communicator are ordered by the program (MPI requires it
    // of collectives), so its tuning needs no lock.
    if (!ct->tuning) ct->tuning = new Tuning;
    auto &per_op = ct->tuning->classes[size_t(op)];
    if (!per_op) per_op = std::make_unique<std::array<SizeClass, kClasses>>();
    const int k = std::bit_width(bytes);
    SizeClass &c = (*per_op)[size_t(k)];
    class_ = &c;
    if (c.choice == Choice::undecided && c.calls == kTrialCalls) {
        double slowest[2] = {median_us(c.us[0], c.timed[0]), median_us(c.us[1], c.timed[1])};
        // Every member must learn the same: without it they could part ways.
        if (PMPI_Allreduce(MPI_IN_PLACE, slowest, 2, MPI_DOUBLE, MPI_MAX, comm) != MPI_SUCCESS)
            fatal("tuning: the MPI_Allreduce that agrees on a size class's path failed");
        const bool deputy = slowest[0] < slowest[1];
        c.choice = deputy ? Choice::deputy : Choice::mpi;
        std::lock_guard lock(g_mutex);
        c.decision = &g_decisions.emplace_back(
            Decision{op, ct->size, k, slowest[0], slowest[1], deputy});
    }
    if (c.choice != Choice::undecided) {
        ++c.calls_after;
        to_mpi_ = c.choice == Choice::mpi;
        if (to_mpi_) count_passed(op, PassReason::measured_slower);
        return;
    }
    const uint32_t pair = c.calls / 2, round = pair / 2;
    // rounds: deputy's pair first, then MPI's first, ...
    to_mpi_ = (round % 2 == 0) == (pair % 2 == 1);
    timed_ = round > 0 && c.calls % 2 == 1;
    ++c.calls;
    if (to_mpi_) count_passed(op, PassReason::tuning);
    if (timed_) start_ns_ = now_ns();
}

int TunedCall::done(int rc) {
    if (!timed_ || rc != MPI_SUCCESS) return rc;
    const int path = to_mpi_ ? 1 : 0;
    uint32_t &n = class_->timed[path];
    if (n < kTimedPerPath) class_->us[path][n++] = double(now_ns() - start_ns_) / 1000.0;
    return rc;
}

std::string tuning_report_text(int world_rank) {
    std::lock_guard lock(g_mutex);
    std::string text;
    for (const Decision &d : g_decisions) {
        text += fmt::format(
            "deputy-mpi: rank {}: tuned {} on {} rank(s), {}: deputy {:.1f} us, MPI {:.1f} us "
            "(slowest rank's median of {}): {} for the {} call(s) after\n",
            world_rank, operation_info(d.op).mpi_name, d.ranks, class_text(d.size_class),
            d.deputy_us, d.mpi_us, kTimedPerPath, d.deputy ? "deputy" : "MPI", d.calls_after);
    }
    return text;
}

std::string tuning_report_json() {
    std::lock_guard lock(g_mutex);
    std::string json = "[";
    for (const Decision &d : g_decisions) {
        const uint64_t lo = d.size_class ? uint64_t(1) << (d.size_class - 1) : 0;
        json += fmt::format(
            "{}{{\"operation\":\"{}\",\"ranks\":{},\"min_bytes\":{},\"class\":\"{}\","
            "\"deputy_us\":{:.3f},\"mpi_us\":{:.3f},\"timed_per_path\":{},\"trial_calls\":{},"
            "\"choice\":\"{}\",\"calls_after\":{}}}",
            json.size() > 1 ? "," : "", operation_info(d.op).mpi_name, d.ranks, lo,
            class_text(d.size_class), d.deputy_us, d.mpi_us, kTimedPerPath, kTrialCalls,
            d.deputy ? "deputy" : "mpi", d.calls_after);
    }
    return json + "]";
}

}  // namespace deputy::mpi
