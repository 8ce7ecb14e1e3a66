// deputy-bench-coll: the MPI program behind `deputy bench coll`.
//
//   mpirun -np 2 deputy bench coll --op iallreduce -m 8:1m --compare mpi
//
// Ranks and size come from MPI; the deputy team is keyed by a random key of
// rank 0's, broadcast with MPI_Bcast. Every rank parses the same flags, so
// a usage error stops every rank with the same message (printed once).
#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/coll/allreduce_table.h"
#include "bench/coll/compute.h"
#include "bench/coll/impl.h"
#include "bench/coll/load.h"
#include "bench/coll/options.h"
#include "bench/coll/pattern.h"
#include "bench/coll/print_buffers.h"
#include "bench/coll/report.h"
#include "bench/coll/runner.h"
#include "bench/coll/session.h"
#include "bench/coll/world.h"
#include "common/affinity.h"
#include "common/cli_json.h"
#include "common/log.h"
#include "common/result_document.h"
#include "common/units.h"

namespace deputy::bench::coll {
namespace {

// The rank before MPI_Init, from the launcher's environment: only rank 0
// prints usage errors and help.
int launcher_rank() {
    for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
        if (const char *v = std::getenv(name)) return std::atoi(v);
    return 0;
}

uint64_t mem_available_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kb = 0;
    std::string unit;
    while (in >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    return 0;
}

std::string gib(uint64_t bytes) {
    return fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30));
}

struct SizePoint {
    uint64_t size;
    size_t count;
};

int run(const CollOptions &o, CLI::App &app) {
    cli::apply_log_flags(o.log);
    // --load: this rank may belong to a team that only streams (load.h).
    LoadSplit split;
    std::string split_error;
    try {
        if (!split_for_load(parse_load(o.load), &split, &split_error)) {
            if (launcher_rank() == 0) DP_APP_ERROR("{}", split_error);
            return 2;
        }
    } catch (const CLI::Error &e) {
        return launcher_rank() == 0 ? app.exit(e) : e.get_exit_code();
    }
    if (split.team != 0) return run_load_rank(split, o);
    World world(split.comm);
    LoadControl load(split);  // (releases the streaming ranks however this returns)
    const bool root_rank = world.rank() == 0;
    // Under `deputy launch -n N` each process is an MPI singleton: the ranks
    // would run N separate one-rank benchmarks. Say so instead.
    if (const char *launched = std::getenv("DEPUTY_SIZE");
        launched && world.size() == 1 && std::atoi(launched) > 1) {
        DP_APP_ERROR(
            "started as one of {} deputy launch ranks, but MPI sees 1 rank: deputy bench "
            "coll times and synchronises with MPI; run it under mpirun -np {}",
            launched, launched);
        return 2;
    }
    Plan plan;
    try {
        if (app.count("--max") > 0 && !o.allreduce_table)
            throw CLI::ValidationError(
                "--max applies to --allreduce-table (use -m MIN:MAX for sizes)");
        plan = resolve(o, world.size());
    } catch (const CLI::Error &e) {
        return root_rank ? app.exit(e) : e.get_exit_code();
    }
    const OpInfo &op = *plan.op;
    const Dtype &dt = *plan.dtype;
    const int n = world.size();

    // Counts per size; sizes too small for one element (or block) are dropped.
    std::vector<SizePoint> points;
    std::vector<uint64_t> dropped;
    for (uint64_t s : plan.sizes) {
        size_t count =
            o.allreduce_table ? size_t(s / dt.bytes) : count_for_size(op.coll, s, dt.bytes, n);
        uint64_t eff = o.allreduce_table ? s : size_of(op.coll, count, dt.bytes, n);
        if (op.coll != Coll::barrier && count == 0) {
            dropped.push_back(s);
            continue;
        }
        if (!points.empty() && points.back().count == count && op.coll != Coll::barrier) continue;
        points.push_back({eff, count});
    }
    if (points.empty()) {
        if (root_rank)
            DP_APP_ERROR(
                "-m {}: no size holds one {} element{} per rank", o.sizes, dt.name,
                blocked(op.coll) ? " per block" : "");
        return 2;
    }
    uint64_t send_max = 0, recv_max = 0;
    for (const SizePoint &p : points) {
        send_max = std::max<uint64_t>(send_max, send_elems(op.coll, p.count, n) * dt.bytes);
        recv_max = std::max<uint64_t>(recv_max, recv_elems(op.coll, p.count, n) * dt.bytes);
    }
    const bool ring = plan.compare_mpi && op.coll == Coll::allreduce && !op.nonblocking;
    const uint64_t ring_bytes = ring ? (points.back().count / size_t(n) + 1) * dt.bytes : 0;

    // Refuse before allocating what this node does not have.
    const uint64_t per_rank = send_max + recv_max + ring_bytes;
    const uint64_t need = per_rank * uint64_t(world.local_size());
    bool fits = true;
    if (root_rank) {
        const uint64_t avail = mem_available_bytes();
        if (avail != 0 && need > avail / 10 * 9) {
            DP_APP_ERROR(
                "{} needs {} on this node ({} ranks x (send {} + receive {}{})) but "
                "MemAvailable is {}: lower {}",
                o.allreduce_table ? "--allreduce-table --max " + o.max : "-m " + o.sizes, gib(need),
                world.local_size(), units::format_size(send_max), units::format_size(recv_max),
                ring ? " + ring segment " + units::format_size(ring_bytes) : "", gib(avail),
                o.allreduce_table ? "--max" : "-m MAX");
            fits = false;
        }
    }
    if (!world.all(fits)) return 2;

    DeputySession deputy;
    if (plan.run_deputy && !deputy.open(world, plan.memory, plan.wait, o.agent_socket,
                                        pool_bytes_for(send_max, recv_max)))
        return 2;
    Buffers buffers;
    std::string error;
    bool allocated = buffers.allocate(plan.memory, deputy.context(), send_max, recv_max, &error);
    if (!allocated) DP_APP_ERROR("rank {}: {}", world.rank(), error);
    if (!world.all(allocated)) return 2;
    if (plan.run_deputy && !deputy.probe(world, plan.memory, buffers.send(), buffers.recv()))
        return 2;

    std::vector<std::unique_ptr<Impl>> impls;
    if (plan.run_deputy) impls.push_back(make_deputy_impl(deputy.team()));
    if (plan.compare_mpi) impls.push_back(make_mpi_impl(world.comm()));
    if (ring) impls.push_back(make_ring_impl(world.comm()));
    if (o.sched || !o.host_algorithm.empty())
        impls.push_back(make_schedule_impl(world.comm(), o.host_algorithm));

    RunInfo info;
    info.plan = &plan;
    info.options = &o;
    info.ranks = n;
    info.local_ranks = world.local_size();
    info.cpus = affinity::cpu_count();
    for (const auto &impl : impls) info.impls.push_back(impl->name());
    info.mpi_version = World::library_version();
    if (plan.run_deputy) info.placement = deputy.placement(world);
    info.cpu_clock_cost_ns = calibrate_cpu_clock();
    Compute compute(plan.compute_idle);  // (sets the timer slack an idle phase sleeps with)
    if (plan.compute_idle && op.nonblocking && !o.allreduce_table) {
        const bench_sleep_cost mine = bench_measure_sleep_cost(5.0, 1000);
        const std::vector<double> worst = world.maximum({mine.wall_us, mine.cpu_us});
        info.sleep = {mine.asked_us, worst[0], worst[1]};
    }

    nlohmann::json results = nlohmann::json::array();
    nlohmann::json load_document;  // --load: the streaming teams' reports
    uint64_t wrong = 0;
    if (root_rank) {
        print_banner(info);
        if (!dropped.empty())
            std::printf(
                "# sizes below one %s element%s: %zu size(s) from %llu B skipped\n", dt.name,
                blocked(op.coll) ? " per block and rank" : "",
                dropped.size(), (unsigned long long)dropped.front());
        if (plan.compare_mpi && mpi_type(dt) == MPI_DATATYPE_NULL)
            std::printf("# note: MPI has no %s datatype: the MPI comparison is skipped for it\n",
                        dt.name);
    }

    // DOCA's DPA all-to-all sample logs its job size before the buffers.
    if (o.print_buffers && root_rank) DP_APP_INFO("Number of processes = {},", n);
    if (o.allreduce_table) {
        wrong = run_allreduce_table(world, info, buffers, *impls[plan.run_deputy ? 1 : 0],
                                    *impls[plan.run_deputy ? 2 : 1],
                                    plan.run_deputy ? impls[0].get() : nullptr, &results);
    } else {
        // The sizes, once; with --load, once alone and once beside the
        // streaming teams (each row says which). Returns the rows.
        auto sweep = [&](const std::string &load_label) {
            if (root_rank) print_table_header(info);
            std::vector<Row> all_rows;
            // A team spanning nodes: which algorithm(s) the agents ran between
            // them, per size (from rank 0's agent, before and after the size).
            std::map<std::string, uint64_t> inter_before;
            if (plan.run_deputy && root_rank) inter_before = deputy.inter_node_steps();
            for (const SizePoint &point : points) {
                SizeJob job;
                job.world = &world;
                job.pattern = Pattern{op.coll, &dt, plan.redop, n, o.root, point.count};
                job.args =
                    CallArgs{buffers.send(), buffers.recv(), point.count, &dt, plan.redop, o.root};
                job.size = point.size;
                job.iterations = plan.iterations_for(point.size);
                job.warmup = plan.warmup_for(point.size);
                job.check_every = o.check;
                job.test_calls = o.test_calls;
                job.compute = &compute;
                fill_send(job.pattern, world.rank(), buffers.send());
                std::vector<Row> rows;
                for (auto &impl : impls) {
                    rows.push_back(measure(*impl, job, op.nonblocking));
                    rows.back().load = load_label;
                    rows.back().algorithm = impl->detail();
                    if (o.print_buffers && rows.back().skipped.empty())
                        print_buffers(
                            world, job.pattern, buffers.send(), buffers.recv(),
                            fmt::format("buffers after {} {}, {} B ({} {} per {})", impl->name(),
                                        op.name, point.size, point.count, dt.name,
                                        send_elems(op.coll, 1, n) > 1 ||
                                                recv_elems(op.coll, 1, n) > 1
                                            ? "block"
                                            : "rank"));
                }
                if (plan.run_deputy && root_rank) {
                    std::map<std::string, uint64_t> now = deputy.inter_node_steps();
                    for (const auto &[name, count] : now)
                        if (count > inter_before[name])
                            rows.front().inter_node +=
                                (rows.front().inter_node.empty() ? "" : "+") + name;
                    inter_before = std::move(now);
                }
                const Row *mpi = nullptr;
                for (const Row &r : rows)
                    if (r.impl == "mpi" && r.skipped.empty()) mpi = &r;
                for (const Row &r : rows) {
                    wrong += r.wrong;
                    if (root_rank) results.push_back(row_json(info, r, mpi));
                }
                if (root_rank) print_size_rows(info, rows);
                if (root_rank && !rows.front().inter_node.empty())
                    std::printf("#   %llu B: between nodes the agents ran %s\n",
                                (unsigned long long)point.size, rows.front().inter_node.c_str());
                all_rows.insert(all_rows.end(), rows.begin(), rows.end());
            }
            if (root_rank) print_skip_notes(all_rows);
            return all_rows;
        };
        if (split.teams == 1) {
            sweep("");
        } else {
            if (root_rank)
                std::printf("# --load %s: %d team(s) of %d rank(s) stream allreduces through the "
                            "same agent during the second table\n# alone:\n",
                            o.load.c_str(), split.teams - 1, split.team_size);
            const std::vector<Row> alone = sweep("alone");
            nlohmann::json before;
            if (root_rank) {
                before = deputy.agent_info();
                load.start();
                std::printf("# beside the streaming teams:\n");
            }
            world.barrier();
            const std::vector<Row> beside = sweep(o.load);
            world.barrier();
            if (root_rank) {
                const nlohmann::json reports = load.stop();
                print_load_summary(alone, beside, reports,
                                   engine_shares(before, deputy.agent_info()));
                load_document = {{"sizes", o.load}, {"teams", reports}};
            }
        }
    }

    int rc = 0;
    if (root_rank) {
        if (wrong != 0)
            std::printf("# validation FAILED: %llu wrong element(s)\n", (unsigned long long)wrong);
        else
            std::printf("# validation: every checked result is correct\n");
        std::fflush(stdout);
        nlohmann::json doc = results_document(info, results);
        if (!load_document.is_null()) doc["load"] = load_document;
        std::string error;
        if (!o.out_file.empty() && !cli::write_json_file("--out", o.out_file, doc, &error)) {
            DP_APP_ERROR("{}", error);
            rc = 2;
        }
    }
    if (wrong != 0) rc = 1;
    return rc;
}

}  // namespace
}  // namespace deputy::bench::coll

int main(int argc, char **argv) {
    using namespace deputy::bench::coll;
    CollOptions options;
    CLI::App app{
        "deputy bench coll: offloaded collectives against MPI's, with the OSU overlap "
        "method and nccl-tests bandwidths. An MPI program: mpirun -np N deputy bench coll ...",
        "deputy bench coll"};
    add_options(app, &options);
    deputy::cli::add_json_config(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::Error &e) {
        // Before MPI_Init: --help and usage errors print once, from rank 0.
        return launcher_rank() == 0 ? app.exit(e) : e.get_exit_code();
    }
    MPI_Init(&argc, &argv);
    int rc = run(options, app);
    MPI_Finalize();
    return rc;
}
