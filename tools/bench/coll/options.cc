#include "bench/coll/options.h"

#include <deputy/coll.h>
#include <fmt/format.h>

#include "common/cli_common.h"
#include "common/units.h"
#include "mover/config.h"
#include "mover/names.h"

namespace deputy::bench::coll {
namespace {

using cli::usage_error;

constexpr uint64_t kDefaultMax = 1ull << 20;
constexpr uint64_t kOsuLarge = 8192;            // OSU's LARGE_MESSAGE_SIZE
constexpr uint64_t kMaxTableSize = 2ull << 30;  // the allreduce table's largest row

}  // namespace

const char *memory_name(Memory m) {
    switch (m) {
        case Memory::mapped:
            return "mapped";
        case Memory::direct:
            return "direct";
        case Memory::heap:
            return "heap";
        case Memory::staged:
            return "staged";
        case Memory::rdma:
            return "rdma";
        case Memory::host:
            return "host";
    }
    return "?";
}

uint64_t Plan::iterations_for(uint64_t bytes) const {
    if (iterations > 0) return uint64_t(iterations);
    return bytes <= kOsuLarge ? 1000 : 100;
}

uint64_t Plan::warmup_for(uint64_t bytes) const {
    if (warmup >= 0) return uint64_t(warmup);
    return bytes <= kOsuLarge ? 200 : 10;
}

std::vector<uint64_t> parse_load(const std::string &text) {
    if (text.empty()) return {};
    const std::vector<uint64_t> sizes = cli::parse_size_list("--load", text);
    for (uint64_t bytes : sizes)
        if (bytes < 4)
            usage_error(fmt::format("--load {}: {} bytes; at least 4 (one float32)", text, bytes));
    return sizes;
}

std::vector<uint64_t> parse_size_range(const std::string &text, uint32_t factor) {
    // OSU's forms: "MAX", "MIN:MAX", "MIN:", ":MAX".
    uint64_t min = 1, max = kDefaultMax;
    const size_t colon = text.find(':');
    if (colon == std::string::npos) {
        max = cli::parse_size("-m", text);
    } else {
        if (text.find(':', colon + 1) != std::string::npos)
            usage_error("-m " + text + ": expected MIN:MAX, MIN: or :MAX (bytes)");
        std::string a = text.substr(0, colon), b = text.substr(colon + 1);
        if (!a.empty()) min = cli::parse_size("-m", a);
        if (!b.empty()) max = cli::parse_size("-m", b);
    }
    if (min == 0) min = 1;
    if (min > max)
        usage_error(fmt::format("-m {}: MIN ({}) is larger than MAX ({})", text, min, max));
    if (factor < 2)
        usage_error(fmt::format("--factor {}: the size step must be 2 or more", factor));
    std::vector<uint64_t> sizes;
    for (uint64_t s = min; s <= max; s *= factor) {
        sizes.push_back(s);
        if (s > max / factor) break;
    }
    return sizes;
}

void add_options(CLI::App &app, CollOptions *o) {
    app.add_option("--op", o->op, "collective: " + op_names())->capture_default_str();
    app.add_option("-m,--message-size", o->sizes,
                   "sizes in bytes MIN:MAX (also MAX, MIN:, :MAX; k/m/g suffixes), x --factor "
                   "steps; the size of the largest buffer a rank passes (nccl-tests)")
        ->capture_default_str();
    app.add_option("--factor", o->factor, "size step factor")->capture_default_str();
    app.add_option("-i,--iterations", o->iterations,
                   "timed iterations per size (0: OSU's 1000 up to 8K, 100 above)")
        ->capture_default_str();
    app.add_option("-x,--warmup", o->warmup,
                   "warm-up iterations per size (-1: OSU's 200 up to 8K, 10 above)")
        ->capture_default_str();
    app.add_option("-d,--dtype", o->dtype, "element type: " + dtype_names())->capture_default_str();
    app.add_option("--redop", o->redop,
                   "reduction: " + redop_names() +
                       " (the logical and bitwise ones on integer types only)")
        ->capture_default_str();
    app.add_option("--memory", o->memory,
                   "deputy buffers: mapped (dp_malloc), direct (malloc + dp_mem_register), "
                   "heap (the shared heap: what malloc gives a program under libdeputy-mpi or "
                   "libdeputy-heap), staged (through the channel), rdma (an agent on another host "
                   "reads and writes them by RMA)")
        ->capture_default_str();
    app.add_option("--compute", o->compute,
                   "non-blocking ops: cpu (OSU's dummy compute loop) or idle (sleep as long)")
        ->capture_default_str();
    app.add_option("-t,--num-test-calls", o->test_calls,
                   "non-blocking ops: dp_test/MPI_Test calls spread over the compute (OSU -t)")
        ->capture_default_str();
    app.add_option("--root", o->root, "root of bcast, reduce, gather, scatter")->capture_default_str();
    app.add_flag("--print-buffers", o->print_buffers,
                 "print every rank's send and receive buffers (rank 0 prints, in rank order)");
    app.add_flag("--check", o->check, "validate every iteration (default: once per size)");
    app.add_option("--compare", o->compare,
                   "also run, on the same buffers: mpi (MPI's own collective; for allreduce also "
                   "a ring allreduce on MPI point-to-point)");
    app.add_flag("--no-deputy", o->no_deputy, "run only the MPI baselines (no agent needed)");
    app.add_flag("--allreduce-table", o->allreduce_table,
                 "a published allreduce table: native vs ring vs deputy allreduce of float, "
                 "128 B to --max in x4 steps, average of 3");
    app.add_option("--max", o->max, "--allreduce-table: largest size (at most 2g)")
        ->capture_default_str();
    app.add_option("--wait", o->wait,
                   "how dp_wait waits: spin, pause, yield, block (default: the library's)");
    app.add_option("--agent-socket", o->agent_socket,
                   "the agent's socket (default: $DEPUTY_AGENT, else the default path)");
    app.add_option("--out", o->out_file, "write results as JSON to this file (rank 0)");
    app.add_option("--load", o->load,
                   "SIZE[,SIZE...]: split the ranks into 1 + N equal teams; the first is "
                   "measured, first alone and then while each other streams allreduces of its "
                   "SIZE through the same agent");
    app.add_flag("--sched", o->sched,
                 "also run deputy's own algorithms (src/coll schedules) on the host ranks over "
                 "MPI point-to-point: the host-driven baseline");
    app.add_option("--host-algorithm", o->host_algorithm,
                   "--sched: this algorithm (ring, recursive_doubling, rabenseifner, pairwise, "
                   "bruck, binomial, chain, dissemination; default: the selector's per size)");
    cli::add_log_flags(app, &o->log);
}

Plan resolve(const CollOptions &o, int ranks) {
    Plan p;
    p.op = find_op(o.op);
    if (p.op == nullptr) usage_error("--op " + o.op + ": not one of " + op_names());
    p.dtype = find_dtype(o.dtype);
    if (p.dtype == nullptr) usage_error("-d " + o.dtype + ": not one of " + dtype_names());
    if (!parse_redop(o.redop, &p.redop))
        usage_error("--redop " + o.redop + ": not one of " + redop_names());
    if (!mover::op_applies(unsigned(p.dtype->dp), unsigned(p.redop)))
        usage_error("--redop " + o.redop + " does not apply to -d " + o.dtype +
                    " (logical and bitwise reductions take integer types)");
    if (o.memory == "mapped")
        p.memory = Memory::mapped;
    else if (o.memory == "direct")
        p.memory = Memory::direct;
    else if (o.memory == "heap")
        p.memory = Memory::heap;
    else if (o.memory == "staged")
        p.memory = Memory::staged;
    else if (o.memory == "rdma")
        p.memory = Memory::rdma;
    else
        usage_error("--memory " + o.memory + ": not one of mapped, direct, heap, staged, rdma");
    if (o.compute != "cpu" && o.compute != "idle")
        usage_error("--compute " + o.compute + ": not one of cpu, idle");
    p.compute_idle = o.compute == "idle";
    if (!o.wait.empty() && !mover::parse_wait_mode(o.wait, &p.wait))
        usage_error("--wait " + o.wait + ": not one of spin, pause, yield, block");
    if (!o.compare.empty() && o.compare != "mpi")
        usage_error("--compare " + o.compare + ": the baseline is 'mpi'");
    p.compare_mpi = o.compare == "mpi";
    p.run_deputy = !o.no_deputy;
    const bool sched = o.sched || !o.host_algorithm.empty();
    if (o.no_deputy && !p.compare_mpi && !o.allreduce_table && !sched)
        usage_error(
            "--no-deputy leaves nothing to run: add --compare mpi, --sched (or "
            "--allreduce-table)");
    if (o.no_deputy) p.memory = Memory::host;
    const bool ring = p.op->coll == Coll::allreduce && !p.op->nonblocking;
    if (o.no_deputy && mpi_type(*p.dtype) == MPI_DATATYPE_NULL && !ring && !o.allreduce_table &&
        !sched)
        usage_error("-d " + o.dtype +
                    ": MPI has no such datatype, and --no-deputy leaves nothing "
                    "else to run (only the ring allreduce handles it)");
    if (o.iterations < 0)
        usage_error(fmt::format("-i {}: iterations must be 1 or more (0: auto)", o.iterations));
    if (o.warmup < -1)
        usage_error(fmt::format("-x {}: warm-up must be 0 or more (-1: auto)", o.warmup));
    p.iterations = o.iterations;
    p.warmup = o.warmup;
    if (o.root < 0 || o.root >= ranks)
        usage_error(fmt::format("--root {}: must be a rank, 0..{}", o.root, ranks - 1));
    if (ranks > DP_TEAM_MAX_SIZE && p.run_deputy)
        usage_error(fmt::format("{} ranks: a deputy team has at most {} members (use --no-deputy)",
                                ranks, DP_TEAM_MAX_SIZE));
    if (!o.load.empty() && !p.run_deputy)
        usage_error("--load streams through the agent: drop --no-deputy");
    if (!o.load.empty() && o.allreduce_table)
        usage_error("--load measures the -m sizes: drop --allreduce-table");

    if (o.allreduce_table) {
        if (p.op->coll != Coll::allreduce || p.op->nonblocking)
            usage_error("--allreduce-table is an allreduce table: --op must be allreduce");
        if (p.dtype->dp != DP_FLOAT32 || p.redop != DP_SUM)
            usage_error("--allreduce-table reduces float32 with sum: drop -d/--redop");
        p.table_max = cli::parse_size("--max", o.max);
        if (p.table_max < 128)
            usage_error("--max " + o.max + ": the allreduce table starts at 128 bytes");
        if (p.table_max > kMaxTableSize)
            usage_error("--max " + o.max + ": at most 2g (the table's largest row)");
        for (uint64_t s = 128; s <= p.table_max; s *= 4) p.sizes.push_back(s);
        p.compare_mpi = true;
    } else {
        p.sizes = parse_size_range(o.sizes, o.factor);
        if (p.op->coll == Coll::barrier) p.sizes = {0};
    }
    return p;
}

}  // namespace deputy::bench::coll
