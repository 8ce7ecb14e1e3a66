// --load SIZE[,SIZE...]: other teams streaming allreduces through the same
// agent while the measured team runs, to see what they cost it (a small
// operation's latency beside large ones, the engines' shares).
//
// The job's ranks split into 1 + k blocks of consecutive ranks, one per
// team: block 0 is measured and runs everything the benchmark does on its
// own communicator; block i streams allreduces of the i-th size. The
// measured team runs its sizes twice, first with the other teams waiting
// (asleep, costing no CPU), then with them streaming. Between the two and
// at the end, rank 0 of the job tells the other teams' ranks to go and to
// stop with MPI messages; a streaming team stops together because its
// leader's decision travels in its own allreduce (element 0).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/coll/options.h"

namespace deputy::bench::coll {

// This rank's place in the split.
struct LoadSplit {
    int team = 0;                  // 0: measured; i > 0 streams sizes[i - 1]
    int teams = 1;
    int team_size = 0;             // ranks per team
    MPI_Comm comm = MPI_COMM_NULL;  // this rank's team
    std::vector<uint64_t> sizes;   // bytes per streaming team, as --load gave them
};

// Splits MPI_COMM_WORLD for `sizes` (from --load; empty: one team, the
// world). false with the reason when the ranks do not divide into
// 1 + sizes.size() teams of two or more.
bool split_for_load(const std::vector<uint64_t> &sizes, LoadSplit *out, std::string *why);

// A rank of a streaming team: waits asleep for rank 0's go, streams until
// its stop, and reports (its leader) how many operations ran. Returns the
// process's exit code.
int run_load_rank(const LoadSplit &split, const CollOptions &o);

// Rank 0 of the job (the measured team's): starts and stops the streaming
// teams. Whatever way the run ends, the destructor releases them (a stop,
// or a "never mind" before any go), so no rank waits forever.
class LoadControl {
  public:
    // On any rank of the measured team; only rank 0 of the job does anything.
    explicit LoadControl(const LoadSplit &split);
    ~LoadControl();
    LoadControl(const LoadControl &) = delete;
    LoadControl &operator=(const LoadControl &) = delete;

    // Tells every streaming rank to go; returns once each team finished
    // one operation.
    void start();
    // Tells them to stop; each team's report: {"team", "bytes",
    // "operations", "seconds", "busbw_gbs"}.
    nlohmann::json stop();

  private:
    void release(int go);
    const LoadSplit &split_;
    bool root_ = false;
    bool started_ = false, released_ = false;
};

// The engines' work between two `deputy info` answers: "engine 0 52 %
// (1.23 s, 4512 descriptors), engine 1 48 % (...)"; empty when the agent
// said nothing of them.
std::string engine_shares(const nlohmann::json &before, const nlohmann::json &after);

}  // namespace deputy::bench::coll
