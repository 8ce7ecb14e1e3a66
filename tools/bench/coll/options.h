// Flags of `deputy bench coll` and what they resolve to. Flag letters follow
// the OSU micro-benchmarks (-m MIN:MAX, -i, -x, -t) and nccl-tests (-d,
// --check, #wrong) so their users' scripts port.
#pragma once

#include <deputy/mover.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/coll/collective.h"
#include "bench/coll/dtype.h"
#include "common/cli_common.h"

namespace deputy::bench::coll {

struct CollOptions {
    std::string op = "allreduce";   // --op
    std::string sizes = ":1m";      // -m MIN:MAX (bytes, k/m/g suffixes)
    uint32_t factor = 2;            // --factor: size step
    int64_t iterations = 0;         // -i: 0 = OSU's 1000 up to 8K, 100 above
    int64_t warmup = -1;            // -x: -1 = OSU's 200 up to 8K, 10 above
    std::string dtype = "float32";  // -d
    std::string redop = "sum";      // --redop
    std::string memory = "mapped";  // --memory mapped|direct|heap|staged|rdma
    std::string compute = "cpu";    // --compute cpu|idle
    uint32_t test_calls = 0;        // -t: dp_test/MPI_Test calls during the compute
    int root = 0;                   // --root (bcast)
    bool print_buffers = false;     // --print-buffers
    bool check = false;             // --check: validate every iteration
    std::string compare;            // --compare mpi
    bool no_deputy = false;         // --no-deputy: only the MPI baselines
    bool allreduce_table = false;   // --allreduce-table
    std::string max = "512m";       // --max (--allreduce-table)
    std::string wait;               // --wait: dp_wait's mode (empty: the library's)
    std::string agent_socket;       // --agent-socket
    bool sched = false;             // --sched: src/coll's schedules run by the host ranks
    std::string host_algorithm;     // --host-algorithm (with --sched)
    std::string out_file;           // --out
    std::string load;               // --load SIZE[,SIZE...]: streaming teams beside (load.h)
    cli::LogFlags log;              // -l, --sdk-log-level
};

enum class Memory { mapped, direct, heap, staged, rdma, host };
const char *memory_name(Memory m);

struct Plan {
    const OpInfo *op = nullptr;
    std::vector<uint64_t> sizes;  // bytes, before rounding to counts
    const Dtype *dtype = nullptr;
    dp_op_t redop = DP_SUM;
    Memory memory = Memory::mapped;
    bool compute_idle = false;
    dp_wait_mode_t wait = DP_WAIT_DEFAULT;
    bool run_deputy = true;
    bool compare_mpi = false;
    uint64_t table_max = 0;  // --allreduce-table: largest size
    int64_t iterations = 0;  // as given (0: auto)
    int64_t warmup = -1;     // as given (-1: auto)

    // OSU's defaults: 1000 iterations and 200 warm-up up to 8 KiB, then 100/10.
    uint64_t iterations_for(uint64_t bytes) const;
    uint64_t warmup_for(uint64_t bytes) const;
};

void add_options(CLI::App &app, CollOptions *o);
// Checks every flag (errors name the flag, as CLI::ValidationError) for a
// job of `ranks` ranks.
Plan resolve(const CollOptions &o, int ranks);
// The size list of -m and --factor (also used for the banner).
std::vector<uint64_t> parse_size_range(const std::string &text, uint32_t factor);
// --load's sizes, one streaming team each (empty text: none).
std::vector<uint64_t> parse_load(const std::string &text);

}  // namespace deputy::bench::coll
