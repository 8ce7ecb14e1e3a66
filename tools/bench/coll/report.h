// What `deputy bench coll` prints (rank 0) and writes with --out.
//
// Blocking ops: one line per size, the implementations side by side in
// nccl-tests' columns (time, algbw, busbw, #wrong), then the time ratios
// against MPI. Non-blocking ops: OSU's columns (Overall, Compute, Coll.
// Init, Test, Wait, Pure Comm., Overlap(%)), the host CPU time inside the
// calls, nccl-tests' algbw/busbw from the pure comm. time and #wrong, one
// line per implementation.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/coll/options.h"
#include "bench/coll/runner.h"
#include "bench/common/sleep_cost.h"

namespace deputy::bench::coll {

struct RunInfo {
    const Plan *plan = nullptr;
    const CollOptions *options = nullptr;
    int ranks = 1;
    int local_ranks = 1;
    int cpus = 1;
    std::vector<std::string> impls;  // in column order
    std::string mpi_version;
    std::string placement;  // "shared", "own-core", or "" (no agent, or it did not say)
    uint64_t cpu_clock_cost_ns = 0;
    // Idle compute: what one short sleep costs here (the slowest rank's;
    // bench_common/sleep_cost.h); asked_us 0 when the compute is cpu.
    bench_sleep_cost sleep{0, 0, 0};
};

void print_banner(const RunInfo &info);
void print_table_header(const RunInfo &info);
// All rows of one size (one per implementation, in info.impls order).
void print_size_rows(const RunInfo &info, const std::vector<Row> &rows);
// Reasons rows were skipped, once each, at the end.
void print_skip_notes(const std::vector<Row> &rows);
// --load: per size and implementation, the tail latency beside the
// streaming teams against alone; what each streaming team ran; the
// engines' shares (load.h's engine_shares()).
void print_load_summary(const std::vector<Row> &alone, const std::vector<Row> &beside,
                        const nlohmann::json &reports, const std::string &engine_shares);

nlohmann::json results_document(const RunInfo &info, const nlohmann::json &results);
nlohmann::json row_json(const RunInfo &info, const Row &row, const Row *mpi);

// Ratio of a to b as "1.23x", or "-" when either is missing.
std::string ratio_text(double a, double b);

}  // namespace deputy::bench::coll
