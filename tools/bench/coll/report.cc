#include "bench/coll/report.h"

#include <deputy/log.h>
#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "common/result_document.h"
#include "common/log.h"
#include "common/units.h"

namespace deputy::bench::coll {
namespace {

const Row *find(const std::vector<Row> &rows, const std::string &impl) {
    for (const Row &r : rows)
        if (r.impl == impl && r.skipped.empty()) return &r;
    return nullptr;
}

// Prints without trailing blanks.
void put_line(std::string line) {
    line.erase(line.find_last_not_of(' ') + 1);
    std::printf("%s\n", line.c_str());
}

}  // namespace

std::string ratio_text(double a, double b) {
    if (a <= 0 || b <= 0) return "-";
    return fmt::format("{:.2f}x", a / b);
}

void print_banner(const RunInfo &info) {
    const Plan &p = *info.plan;
    const OpInfo &op = *p.op;
    std::string impls;
    for (const std::string &i : info.impls) impls += (impls.empty() ? "" : ", ") + i;
    std::string type = op.coll == Coll::barrier
                           ? "no data"
                           : std::string(p.dtype->name) +
                                 (reduces(op.coll) ? std::string(" ") + dp_op_name(p.redop) : "");
    std::printf(
        "# deputy bench coll: %s, %s, %d ranks (%d on this node, %d CPUs), memory %s, "
        "implementations: %s\n",
        op.name.c_str(), type.c_str(), info.ranks, info.local_ranks, info.cpus, memory_name(p.memory),
        impls.c_str());
    std::printf("# %s; validation %s\n", info.mpi_version.c_str(),
                info.options->check ? "every iteration (--check)" : "once per size");
    if (info.options->allreduce_table) {
        std::printf(
            "# the allreduce table: barrier, then 3 x (allreduce; barrier), elapsed / 3 on "
            "rank 0; one untimed call first; Native = MPI_Allreduce, Ring = a ring allreduce "
            "on MPI point-to-point\n");
    } else if (op.nonblocking) {
        std::printf(
            "# Overall = Coll. Init + Compute + Test + Wait (OSU method); compute = each "
            "rank's own Pure Comm. time, %s, %u test call(s); averages over iterations "
            "and ranks\n",
            p.compute_idle ? "idle (sleeping)" : "cpu (dummy compute loop)",
            info.options->test_calls);
        if (info.sleep.asked_us > 0) bench_print_sleep_cost(stdout, &info.sleep);
        std::printf(
            "# Overlap(%%) = max(0, 100 - 100 (Overall - Compute) / Pure Comm.); Host CPU = "
            "thread CPU time inside post + the completing test (no wait) per op; Poll CPU = "
            "per test that found it not done; Wait CPU = inside the wait of the Overall loop; "
            "algbw = size / Pure Comm., busbw = algbw x %s\n",
            bus_formula(op.coll));
    } else {
        std::printf(
            "# time: average per call over iterations and ranks (barrier between "
            "iterations, OSU); algbw = size / time; busbw = algbw x %s (nccl-tests)\n",
            bus_formula(op.coll));
    }
    const bool deputy =
        std::find(info.impls.begin(), info.impls.end(), "deputy") != info.impls.end();
    const int busy = info.local_ranks + (deputy ? 1 : 0);
    if (busy > info.cpus)
        std::printf(
            "# note: %d rank(s)%s on %d CPUs: more busy processes than cores, figures are "
            "contention-bound\n",
            info.local_ranks, deputy ? " + the agent's engine(s)" : "", info.cpus);
    std::fflush(stdout);
}

void print_table_header(const RunInfo &info) {
    if (info.plan->op->nonblocking) {
        constexpr const char *kFormat =
            "#{:>9} {:>10} {:<7} {:>12} {:>12} {:>14} {:>10} {:>10} {:>14} {:>10} {:>12} {:>12} "
            "{:>12} {:>9} {:>9} {:>7} {:>12}";
        put_line(fmt::format(kFormat, "size", "count", "impl", "Overall(us)", "Compute(us)",
                             "Coll. Init(us)", "Test(us)", "Wait(us)", "Pure Comm.(us)",
                             "Overlap(%)", "Host CPU(us)", "Poll CPU(us)", "Wait CPU(us)",
                             "algbw", "busbw", "#wrong", "Overall/mpi"));
        put_line(fmt::format(kFormat, "(B)", "(elements)", "", "", "", "", "", "", "", "", "",
                             "", "", "(GB/s)", "(GB/s)", "", ""));
    } else {
        std::string top = fmt::format("{:<21}", "#");
        std::string names = fmt::format("#{:>9} {:>10}", "size", "count");
        std::string units = fmt::format("#{:>9} {:>10}", "(B)", "(elements)");
        for (const std::string &impl : info.impls) {
            top += fmt::format(" {:^39}", impl);
            names += fmt::format(" {:>10} {:>9} {:>9} {:>8}", "time", "algbw", "busbw", "#wrong");
            units += fmt::format(" {:>10} {:>9} {:>9} {:>8}", "(us)", "(GB/s)", "(GB/s)", "");
        }
        for (const std::string &impl : info.impls)
            if (impl != "mpi" && info.plan->compare_mpi)
                names += fmt::format(" {:>11}", impl + "/mpi");
        put_line(top);
        put_line(names);
        put_line(units);
    }
    std::fflush(stdout);
}

void print_size_rows(const RunInfo &info, const std::vector<Row> &rows) {
    if (rows.empty()) return;
    const Row *mpi = find(rows, "mpi");
    if (info.plan->op->nonblocking) {
        for (const Row &r : rows) {
            if (!r.skipped.empty()) {
                std::printf("%10llu %10zu %-7s %12s  (skipped: %s)\n", (unsigned long long)r.size,
                            r.count, r.impl.c_str(), "-", r.skipped.c_str());
                continue;
            }
            std::string ratio =
                r.impl != "mpi" && mpi ? ratio_text(r.overall_us, mpi->overall_us) : "";
            put_line(
                fmt::format("{:>10} {:>10} {:<7} {:>12.2f} {:>12.2f} {:>14.2f} {:>10.2f} {:>10.2f} "
                            "{:>14.2f} {:>10.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>9.3f} {:>9.3f} "
                            "{:>7} {:>12}",
                            r.size, r.count, r.impl, r.overall_us, r.compute_us, r.init_us,
                            r.test_us, r.wait_us, r.time_us, r.overlap_pct, r.host_cpu_us,
                            r.poll_cpu_us, r.wait_cpu_us, r.algbw, r.busbw, r.wrong, ratio));
        }
    } else {
        std::string line = fmt::format("{:>10} {:>10}", rows[0].size, rows[0].count);
        for (const Row &r : rows) {
            if (!r.skipped.empty())
                line += fmt::format(" {:>10} {:>9} {:>9} {:>8}", "-", "-", "-", "-");
            else
                line += fmt::format(" {:>10.2f} {:>9.3f} {:>9.3f} {:>8}", r.time_us, r.algbw,
                                    r.busbw, r.wrong);
        }
        for (const Row &r : rows)
            if (r.impl != "mpi" && info.plan->compare_mpi)
                line += fmt::format(" {:>11}", r.skipped.empty() && mpi
                                                   ? ratio_text(r.time_us, mpi->time_us)
                                                   : "-");
        put_line(line);
    }
    std::fflush(stdout);
}

void print_skip_notes(const std::vector<Row> &rows) {
    std::set<std::string> seen;
    for (const Row &r : rows) {
        if (r.skipped.empty()) continue;
        std::string note = r.impl + ": " + r.skipped;
        if (seen.insert(note).second) std::printf("# skipped %s\n", note.c_str());
    }
    std::fflush(stdout);
}

void print_load_summary(const std::vector<Row> &alone, const std::vector<Row> &beside,
                        const nlohmann::json &reports, const std::string &engine_shares) {
    for (const Row &b : beside) {
        if (!b.skipped.empty()) continue;
        for (const Row &a : alone) {
            if (a.impl != b.impl || a.size != b.size || !a.skipped.empty()) continue;
            // Blocking rows have single calls' tails; non-blocking ones the mean.
            const bool tails = !b.nonblocking && a.time_p99_us > 0;
            const double was = tails ? a.time_p99_us : a.time_us;
            const double is = tails ? b.time_p99_us : b.time_us;
            std::printf("# beside the load / alone, %s %s, %llu B: %.2fx (%.1f / %.1f us)\n",
                        b.impl.c_str(), tails ? "p99" : "time", (unsigned long long)b.size,
                        was > 0 ? is / was : 0.0, is, was);
        }
    }
    for (const auto &t : reports)
        std::printf("# load team %d: %llu allreduce(s) of %s in %.2f s, bus bandwidth %.2f GB/s\n",
                    t["team"].get<int>(), (unsigned long long)t["operations"].get<uint64_t>(),
                    units::format_size(t["bytes"].get<uint64_t>()).c_str(),
                    t["seconds"].get<double>(), t["busbw_gbs"].get<double>());
    if (!engine_shares.empty())
        std::printf("# the agent's engines beside the load: %s\n", engine_shares.c_str());
    std::fflush(stdout);
}

nlohmann::json row_json(const RunInfo &info, const Row &r, const Row *mpi) {
    const Plan &p = *info.plan;
    nlohmann::json j = {{"impl", r.impl},
                        {"op", p.op->name},
                        {"nonblocking", r.nonblocking},
                        {"size", r.size},
                        {"count", r.count},
                        {"dtype", p.dtype->name},
                        {"redop", reduces(p.op->coll) ? dp_op_name(p.redop) : ""},
                        {"iterations", r.iterations},
                        {"warmup", r.warmup}};
    if (!r.inter_node.empty()) j["inter_node"] = r.inter_node;
    if (!r.algorithm.empty()) j["algorithm"] = r.algorithm;
    if (!r.load.empty()) j["load"] = r.load;
    if (!r.skipped.empty()) {
        j["skipped"] = r.skipped;
        return j;
    }
    j["time_us"] = r.time_us;
    j["time_max_us"] = r.time_max_us;
    if (!r.nonblocking) {
        j["time_p50_us"] = r.time_p50_us;
        j["time_p99_us"] = r.time_p99_us;
    }
    j["algbw_gbps"] = r.algbw;
    j["busbw_gbps"] = r.busbw;
    j["wrong"] = r.wrong;
    if (r.nonblocking) {
        j["overall_us"] = r.overall_us;
        j["compute_us"] = r.compute_us;
        j["coll_init_us"] = r.init_us;
        j["test_us"] = r.test_us;
        j["wait_us"] = r.wait_us;
        j["pure_comm_us"] = r.time_us;
        j["overlap_pct"] = r.overlap_pct;
        j["host_cpu_us"] = r.host_cpu_us;
        j["poll_cpu_us"] = r.poll_cpu_us;
        j["polls_per_op"] = r.polls;
        j["wait_cpu_us"] = r.wait_cpu_us;
    }
    if (mpi != nullptr && r.impl != "mpi") {
        j["time_vs_mpi"] = mpi->time_us > 0 ? r.time_us / mpi->time_us : 0.0;
        if (r.nonblocking)
            j["overall_vs_mpi"] = mpi->overall_us > 0 ? r.overall_us / mpi->overall_us : 0.0;
    }
    return j;
}

nlohmann::json results_document(const RunInfo &info, const nlohmann::json &results) {
    const CollOptions &o = *info.options;
    const Plan &p = *info.plan;
    nlohmann::json config = {{"op", o.op},
                             {"message_size", o.sizes},
                             {"sizes", p.sizes},
                             {"factor", o.factor},
                             {"iterations", o.iterations},
                             {"warmup", o.warmup},
                             {"dtype", o.dtype},
                             {"redop", o.redop},
                             {"memory", memory_name(p.memory)},
                             {"compute", o.compute},
                             {"num_test_calls", o.test_calls},
                             {"root", o.root},
                             {"print_buffers", o.print_buffers},
                             {"check", o.check},
                             {"compare", o.compare},
                             {"no_deputy", o.no_deputy},
                             {"allreduce_table", o.allreduce_table},
                             {"max", o.max},
                             {"load", o.load},
                             {"agent_socket", o.agent_socket},
                             {"wait", o.wait},
                             {"log_level", o.log.log_level},
                             {"implementations", info.impls},
                             {"ranks", info.ranks},
                             {"local_ranks", info.local_ranks}};
    if (!info.placement.empty()) config["placement"] = info.placement;
    if (info.sleep.asked_us > 0)
        config["sleep"] = {{"asked_us", info.sleep.asked_us},
                           {"wall_us", info.sleep.wall_us},
                           {"cpu_us", info.sleep.cpu_us}};
    nlohmann::json doc =
        cli::result_document("coll", config, {{"mpi", info.mpi_version}}, results);
    doc["averaging"] = "mean over iterations, then mean over ranks (OSU, nccl-tests)";
    doc["cpu_clock_cost_ns"] = info.cpu_clock_cost_ns;
    return doc;
}

}  // namespace deputy::bench::coll
