#include "bench/mover/runner.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/cpu_relax.h"
#include "common/timing.h"

namespace deputy::bench {
namespace {

using timing::now_ns;

// Latency samples kept per repeat; beyond this the rest are not recorded
// (the medians are stable long before).
constexpr size_t kMaxSamples = 1 << 20;
// A unit that takes this long means the device is stuck: report, don't hang.
constexpr int64_t kUnitTimeoutNs = 10'000'000'000;

struct PassResult {
    uint64_t wall_ns = 0;
    uint64_t cpu_ns = 0;
    uint64_t retries = 0;
    std::vector<uint64_t> latencies;
    std::vector<uint64_t> submit_latencies;  // the submit call itself, retries included
};

class MoverPass {
public:
    MoverPass(dp_mover_t *mover, Workload &w, const RunPlan &plan)
        : mover_(mover), w_(w), plan_(plan),
          depth_(std::max<uint32_t>(1, std::min(plan.queue_depth, w.units()))),
          submitted_at_(w.units(), 0) {}

    PassResult run(uint64_t iterations, bool sample) {
        PassResult r;
        if (sample) {
            r.latencies.reserve(std::min<uint64_t>(iterations * w_.units(), kMaxSamples));
            r.submit_latencies.reserve(r.latencies.capacity());
        }
        const uint64_t total = iterations * w_.units();
        const uint64_t cpu0 = timing::thread_cpu_ns(), t0 = now_ns();
        for (uint64_t k = 0; k < total; ++k) {
            if (k >= depth_) reap(uint32_t((k - depth_) % w_.units()), sample, &r);
            submit(uint32_t(k % w_.units()), sample, &r);
        }
        for (uint64_t k = total > depth_ ? total - depth_ : 0; k < total; ++k)
            reap(uint32_t(k % w_.units()), sample, &r);
        r.wall_ns = now_ns() - t0;
        r.cpu_ns = timing::thread_cpu_ns() - cpu0;
        return r;
    }

private:
    void submit(uint32_t unit, bool sample, PassResult *r) {
        dp_completion_t &record = w_.unit_record(unit);
        record.status = DP_COMP_PENDING;  // published to the engine by the submit
        const uint64_t start = sample ? now_ns() : 0;
        if (sample) submitted_at_[unit] = start;
        const dp_desc_t &desc = w_.unit_desc(unit);
        for (;;) {
            dp_status_t s = dp_mover_submit(mover_, plan_.wq, &desc);
            if (s == DP_OK) {
                // Submission latency (dsa_perf_micros's other figure): what
                // the caller spends handing the descriptor over.
                if (sample && r->submit_latencies.size() < kMaxSamples)
                    r->submit_latencies.push_back(now_ns() - start);
                return;
            }
            if (s != DP_ERR_RETRY) throw std::runtime_error(std::string("submit: ") + dp_strerror(s));
            ++r->retries;
            cpu_relax();
        }
    }

    void reap(uint32_t unit, bool sample, PassResult *r) {
        dp_completion_t &record = w_.unit_record(unit);
        if (dp_mover_wait(mover_, &record, plan_.wait, kUnitTimeoutNs) != DP_OK)
            throw std::runtime_error("unit " + std::to_string(unit) +
                                     " did not complete within 10 s: the device is stuck");
        if (sample && r->latencies.size() < kMaxSamples)
            r->latencies.push_back(now_ns() - submitted_at_[unit]);
    }

    dp_mover_t *mover_;
    Workload &w_;
    const RunPlan &plan_;
    uint32_t depth_;
    std::vector<uint64_t> submitted_at_;
};

PassResult cpu_pass(Workload &w, uint64_t iterations, bool per_op_latency) {
    PassResult r;
    const uint32_t buffers = uint32_t(w.ops_per_pass());
    if (per_op_latency) r.latencies.reserve(std::min<uint64_t>(iterations * buffers, kMaxSamples));
    const uint64_t cpu0 = timing::thread_cpu_ns(), t0 = now_ns();
    for (uint64_t it = 0; it < iterations; ++it) {
        for (uint32_t i = 0; i < buffers; ++i) {
            if (!per_op_latency) {
                w.run_cpu(i);
                continue;
            }
            uint64_t start = now_ns();
            w.run_cpu(i);
            if (r.latencies.size() < kMaxSamples) r.latencies.push_back(now_ns() - start);
        }
    }
    r.wall_ns = now_ns() - t0;
    r.cpu_ns = timing::thread_cpu_ns() - cpu0;
    return r;
}

template <typename Pass>
MoverResult measure(const char *mode, Workload &w, const RunPlan &plan, Pass pass) {
    MoverResult result;
    result.mode = mode;
    result.transfer_size = w.bytes_per_pass() / std::max<uint64_t>(1, w.ops_per_pass());
    pass(1, false);  // warm-up: caches, branch predictors, engine wake-up
    uint64_t iterations = plan.iterations;
    if (iterations == 0) {
        // Calibrate with passes timed exactly like the measured ones (latency
        // sampling included) and long enough (>= 20 ms) for the clock and
        // start-up costs to vanish; double until then.
        uint64_t probe = 1, wall = 0;
        for (;;) {
            wall = std::max<uint64_t>(1, pass(probe, true).wall_ns);
            if (wall >= kTargetRepeatNs / 12 || probe >= (1u << 24)) break;
            probe *= 2;
        }
        iterations = std::clamp<uint64_t>(probe * kTargetRepeatNs / wall, 1, 1u << 26);
    }
    result.iterations = iterations;
    result.ops = iterations * w.ops_per_pass();
    result.bytes = iterations * w.bytes_per_pass();
    std::vector<double> kops, cpu_share;
    std::vector<uint64_t> latencies, submit_latencies;
    for (uint32_t rep = 0; rep < plan.repeats; ++rep) {
        if (plan.flush_before_repeat) w.flush_buffers();
        PassResult r = pass(iterations, true);
        double seconds = double(r.wall_ns) * 1e-9;
        result.gbps_per_repeat.push_back(double(result.bytes) / seconds * 1e-9);
        kops.push_back(double(result.ops) / seconds * 1e-3);
        // Clock granularity can make a very short pass read above 100%.
        cpu_share.push_back(std::min(1.0, double(r.cpu_ns) / double(std::max<uint64_t>(1, r.wall_ns))));
        result.retries += r.retries;
        latencies.insert(latencies.end(), r.latencies.begin(), r.latencies.end());
        submit_latencies.insert(submit_latencies.end(), r.submit_latencies.begin(),
                                r.submit_latencies.end());
    }
    result.gbps = timing::median(result.gbps_per_repeat);
    result.kops = timing::median(kops);
    result.cpu_share = timing::median(cpu_share);
    result.latency_ns = timing::median(latencies);
    result.latency_p99_ns = timing::percentile(latencies, 0.99);
    result.submit_ns = timing::median(submit_latencies);
    if (latencies.empty() && result.kops > 0) {
        // Throughput runs on the CPU do not time each op: report the mean.
        result.latency_ns = 1e6 / result.kops;
        result.latency_p99_ns = result.latency_ns;
    }
    result.verified = !plan.verify;
    if (plan.verify) result.verified = w.verify(std::string(mode) == "cpu", &result.verify_error);
    return result;
}

}  // namespace

MoverResult run_on_mover(dp_mover_t *mover, Workload &workload, const RunPlan &plan) {
    MoverPass pass(mover, workload, plan);
    try {
        return measure("mover", workload, plan,
                       [&](uint64_t iterations, bool sample) { return pass.run(iterations, sample); });
    } catch (const std::runtime_error &e) {
        MoverResult failed;
        failed.mode = "mover";
        failed.verify_error = e.what();
        return failed;
    }
}

MoverResult run_on_cpu(Workload &workload, const RunPlan &plan) {
    const bool per_op = plan.queue_depth == 1;
    return measure("cpu", workload, plan, [&](uint64_t iterations, bool sample) {
        return cpu_pass(workload, iterations, sample && per_op);
    });
}

}  // namespace deputy::bench
