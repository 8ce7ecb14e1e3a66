#include "bench/mover/report.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <chrono>
#include <thread>

#include <deputy/log.h>
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/affinity.h"
#include "common/result_document.h"
#include "common/log.h"
#include "common/units.h"
#include "mover/config.h"
#include "mover/device.h"
#include "mover/idxd/hw_queue.h"
#include "mover/kernels.h"

namespace deputy::bench {

ReportHeader describe(const MoverOptions &o, dp_opcode_t op, dp_wait_mode_t wait, dp_mover_t *mover) {
    ReportHeader h;
    h.op = dp_opcode_name(op);
    h.wait = mover::wait_mode_name(wait);
    h.wq_mode = o.shared_wq ? "shared" : "dedicated";
    h.engines = o.engines;
    h.wq_size = o.wq_size;
    h.nt_threshold = mover::kDefaultNtThreshold;
    if (mover != nullptr) {
        dp_mover_stats_t stats{};
        stats.size = sizeof(stats);
        dp_mover_get_stats(mover, &stats);
        h.engines = stats.num_engines;
        if (const mover::Device *device = mover::local_device(mover))
            h.backend = device->backend_description();
    }
    h.stores = o.cached ? "cached" : o.nontemporal ? "nontemporal" : "auto";
    h.isa = mover::kernels::isa_name(mover::kernels::active_isa());
    h.cpus = affinity::cpu_count();
    // The caller is busy unless it sleeps; engines are busy while work flows.
    h.busy_threads = o.cpu_mode ? 1 : int(h.engines) + (wait == DP_WAIT_BLOCK ? 0 : 1);
    return h;
}

void print_header(const ReportHeader &h) {
    std::printf("# deputy bench mover: op %s, %u engine(s), %s wq (size %u), wait %s, stores %s "
                "(auto: non-temporal from %s), kernels %s\n",
                h.op.c_str(), h.engines, h.wq_mode.c_str(), h.wq_size, h.wait.c_str(),
                h.stores.c_str(), units::format_size(h.nt_threshold).c_str(), h.isa.c_str());
    if (!h.backend.empty()) std::printf("# run by %s\n", h.backend.c_str());
    if (h.busy_threads > h.cpus)
        std::printf("# note: %d busy threads on %d CPUs: figures are contention-bound\n",
                    h.busy_threads, h.cpus);
    std::printf("%8s %6s %9s %9s %12s %12s %10s %6s %10s %7s %s\n", "size", "mode", "iters", "GB/s",
                "lat_med(ns)", "lat_p99(ns)", "submit(ns)", "cpu%", "kops/s", "vs_cpu", "verified");
    std::fflush(stdout);
}

void print_row(const MoverResult &row, const MoverResult *baseline) {
    std::string ratio = baseline && baseline->gbps > 0 ? fmt::format("{:.2f}x", row.gbps / baseline->gbps)
                                                       : "-";
    const std::string submit = row.mode == "cpu" ? "-" : fmt::format("{:.0f}", row.submit_ns);
    std::printf("%8s %6s %9llu %9.3f %12.0f %12.0f %10s %6.1f %10.1f %7s %s\n",
                units::format_size(row.transfer_size).c_str(), row.mode.c_str(),
                (unsigned long long)row.iterations, row.gbps, row.latency_ns, row.latency_p99_ns,
                submit.c_str(), row.cpu_share * 100.0, row.kops, ratio.c_str(),
                row.verified ? "yes" : "NO");
    std::fflush(stdout);
}

// dsa_perf_micros's "cycles" are the TSC's; an Arm core's nearest
// counterpart is the generic timer's virtual count.
uint64_t cycle_count() {
#if defined(__x86_64__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t count;
    asm volatile("mrs %0, cntvct_el0" : "=r"(count));
    return count;
#else
    return timing::now_ns();
#endif
}

uint64_t cycles_per_second() {
    static const uint64_t hz = [] {
        const uint64_t t0 = timing::now_ns(), c0 = cycle_count();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const uint64_t t1 = timing::now_ns(), c1 = cycle_count();
        return uint64_t(double(c1 - c0) * 1e9 / double(std::max<uint64_t>(1, t1 - t0)));
    }();
    return hz;
}

void print_gb_lines(const std::vector<MoverResult> &rows, const MoverOptions &o) {
    // dsa_perf_micros's words and order: the latency part only where it
    // measures one (queue depth 1 or one buffer), so that its users'
    // scripts, which take the numbers of this line by position, read ours.
    const bool latency = o.queue_depth == 1 || o.buffers == 1;
    const uint64_t hz = latency ? cycles_per_second() : 0;
    for (const MoverResult &row : rows) {
        std::printf("GB per sec = %f", row.gbps);
        if (latency)
            std::printf(" latency(cycles) = %f, %f ns, cycles/sec =%ld",
                        row.latency_ns * double(hz) * 1e-9, row.latency_ns, long(hz));
        std::printf(" cpu %f kopsrate = %d\n", row.cpu_share, int(row.kops));
    }
    std::fflush(stdout);
}

bool write_json(const std::string &path, const ReportHeader &h, const MoverOptions &o,
                const std::vector<MoverResult> &rows, const nlohmann::json &idxd) {
    nlohmann::json results = nlohmann::json::array();
    for (const MoverResult &r : rows) {
        results.push_back({{"mode", r.mode},
                           {"transfer_size", r.transfer_size},
                           {"iterations", r.iterations},
                           {"ops_per_repeat", r.ops},
                           {"bytes_per_repeat", r.bytes},
                           {"gbps", r.gbps},
                           {"gbps_per_repeat", r.gbps_per_repeat},
                           {"latency_ns_median", r.latency_ns},
                           {"latency_ns_p99", r.latency_p99_ns},
                           {"submit_ns_median", r.submit_ns},
                           {"cpu_share", r.cpu_share},
                           {"kops", r.kops},
                           {"retries", r.retries},
                           {"verified", r.verified},
                           {"verify_error", r.verify_error}});
    }
    const nlohmann::json config = {
          {"op", h.op}, {"sizes", o.sizes}, {"buffers", o.buffers}, {"iterations", o.iterations},
          {"batch", o.batch}, {"queue_depth", o.queue_depth}, {"wq_mode", h.wq_mode},
          {"wq_size", o.wq_size}, {"engines", h.engines}, {"wait", h.wait}, {"cpu_mode", o.cpu_mode},
          {"compare", o.compare}, {"caller_cpus", o.caller_cpus}, {"engine_cpus", o.engine_cpus},
          {"stores", h.stores}, {"nt_threshold", h.nt_threshold}, {"repeats", o.repeats},
          {"dtype", o.dtype}, {"redop", o.redop}, {"dif_block", o.dif_block},
          {"placement", o.placement},
          {"config_file", o.config_file}, {"verify", o.verify}, {"device", o.device},
          {"agent", o.agent},
          {"wq", o.wq}, {"backend", h.backend}, {"numa_nodes", o.numa_nodes}};
    nlohmann::json doc = cli::result_document("mover", config, {{"kernels_isa", h.isa}}, results);
    doc["busy_threads"] = h.busy_threads;
    if (!idxd.is_null()) doc["idxd"] = idxd;
    std::string error;
    if (!cli::write_json_file("--out", path, doc, &error)) {
        DP_APP_ERROR("{}", error);
        return false;
    }
    return true;
}

nlohmann::json idxd_counters(dp_mover_t *mover) {
    const mover::Device *device = mover ? mover::local_device(mover) : nullptr;
    const mover::idxd::HwQueue *hw = device ? device->hw_queue() : nullptr;
    if (hw == nullptr) return nullptr;
    const auto &c = hw->counters();
    nlohmann::json j = {{"queue", hw->description()},
                        {"submitted", c.submitted.load()},
                        {"retries", c.retries.load()},
                        {"faults", c.faults.load()},
                        {"fallbacks", c.fallbacks.load()}};
    return j;
}

void print_idxd_counters(const nlohmann::json &c) {
    if (c.is_null()) return;
    std::printf("# idxd %s: %llu descriptors submitted, %llu refused and retried, %llu page faults "
                "resumed, %llu operations the device failed run on the CPU\n",
                c["queue"].get<std::string>().c_str(), c["submitted"].get<unsigned long long>(),
                c["retries"].get<unsigned long long>(), c["faults"].get<unsigned long long>(),
                c["fallbacks"].get<unsigned long long>());
}

}  // namespace deputy::bench
