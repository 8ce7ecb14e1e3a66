#include "bench/coll/runner.h"

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "common/timing.h"

namespace deputy::bench::coll {
namespace {

uint64_t g_cpu_clock_cost_ns = 0;

[[noreturn]] void failed(const Impl &impl, const SizeJob &job, const char *what) {
    DP_APP_CRITICAL("rank {}: {} {} of {} B failed in {}: {}", job.world->rank(), impl.name(),
                    collective_name(job.pattern.coll), job.size, what, impl.error());
    job.world->abort(3);
}

void finish_row(Row &row, const SizeJob &job) {
    if (row.time_us > 0) {
        row.algbw = double(job.size) / (row.time_us * 1e3);
        row.busbw = row.algbw * bus_factor(job.pattern.coll, job.pattern.ranks);
    }
}

Row measure_blocking(Impl &impl, const SizeJob &job, Row row) {
    const World &w = *job.world;
    void *recv = job.args.recv;
    const int rank = w.rank();
    reset_recv(job.pattern, rank, recv);
    for (uint64_t i = 0; i < job.warmup; ++i)
        if (!impl.run(job.pattern.coll, job.args)) failed(impl, job, "a warm-up call");
    w.barrier();
    uint64_t total_ns = 0, wrong = 0;
    std::vector<uint64_t> call_ns(job.iterations);
    for (uint64_t i = 0; i < job.iterations; ++i) {
        if (job.check_every) reset_recv(job.pattern, rank, recv);
        const uint64_t t0 = timing::now_ns();
        if (!impl.run(job.pattern.coll, job.args)) failed(impl, job, "a timed call");
        call_ns[i] = timing::now_ns() - t0;
        total_ns += call_ns[i];
        if (job.check_every) wrong += count_wrong(job.pattern, rank, recv);
        w.barrier();
    }
    if (!job.check_every) wrong = count_wrong(job.pattern, rank, recv);
    const double mine_us = double(total_ns) / double(job.iterations) / 1e3;
    row.time_us = w.average({mine_us})[0];
    row.time_max_us = w.maximum({mine_us})[0];
    // Latency under load is a distribution: the slower rank's median and
    // 99th percentile of single calls.
    const auto percentile_us = [&](double q) {
        if (call_ns.empty()) return 0.0;
        const size_t k = std::min(call_ns.size() - 1, size_t(q * double(call_ns.size())));
        std::nth_element(call_ns.begin(), call_ns.begin() + long(k), call_ns.end());
        return double(call_ns[k]) / 1e3;
    };
    const std::vector<double> tails = w.maximum({percentile_us(0.5), percentile_us(0.99)});
    row.time_p50_us = tails[0];
    row.time_p99_us = tails[1];
    row.wrong = w.sum(wrong);
    finish_row(row, job);
    return row;
}

Row measure_nonblocking(Impl &impl, const SizeJob &job, Row row) {
    const World &w = *job.world;
    const Coll coll = job.pattern.coll;
    void *recv = job.args.recv;
    const int rank = w.rank();
    auto post = [&] {
        if (!impl.post(coll, job.args)) failed(impl, job, "the post");
    };
    auto wait = [&] {
        if (!impl.wait()) failed(impl, job, "the wait");
    };
    auto test = [&] {
        bool done = false;
        if (!impl.test(&done)) failed(impl, job, "a test");
    };

    reset_recv(job.pattern, rank, recv);
    for (uint64_t i = 0; i < job.warmup; ++i) post(), wait();
    w.barrier();

    // 1. Pure communication time.
    uint64_t wrong = 0, pure_ns = 0;
    for (uint64_t i = 0; i < job.iterations; ++i) {
        if (job.check_every) reset_recv(job.pattern, rank, recv);
        const uint64_t t0 = timing::now_ns();
        post();
        wait();
        pure_ns += timing::now_ns() - t0;
        if (job.check_every) wrong += count_wrong(job.pattern, rank, recv);
    }
    const uint64_t latency_ns = pure_ns / job.iterations;  // this rank's own, as OSU
    w.barrier();

    // 2. Overlap with compute as long as the pure communication.
    uint64_t overall = 0, comp = 0, tests = 0, init = 0, waits = 0;
    for (uint64_t i = 0; i < job.warmup + job.iterations; ++i) {
        if (job.check_every) reset_recv(job.pattern, rank, recv);
        uint64_t test_ns = 0;
        const uint64_t start = timing::now_ns();
        post();
        const uint64_t posted = timing::now_ns();
        job.compute->run(latency_ns, job.test_calls, [&] {
            const uint64_t t = timing::now_ns();
            test();
            test_ns += timing::now_ns() - t;
        });
        const uint64_t computed = timing::now_ns();
        wait();
        const uint64_t stop = timing::now_ns();
        if (i >= job.warmup) {
            overall += stop - start;
            init += posted - start;
            comp += computed - posted;
            tests += test_ns;
            waits += stop - computed;
        }
        if (job.check_every) wrong += count_wrong(job.pattern, rank, recv);
        w.barrier();
    }

    // 3. Host CPU time inside the calls, as an application that never
    // blocks sees it: post, compute as in pass 2 with its test calls, then
    // test between short compute slices until the operation is done. The
    // issue's "post + completed test" (with the request's release) is one
    // figure per operation; the tests that found it not done yet are
    // another, per call: how many there are is the application's choice of
    // polling period, and after a sleep each one finds its lines cold. A pass
    // of its own: the clock is slow, and its calibrated cost is subtracted
    // per call.
    const uint64_t slice_ns = std::max<uint64_t>(latency_ns / 32, 1000);
    uint64_t cpu_ns = 0, cpu_calls = 0, poll_ns = 0, poll_calls = 0;
    bool finished = false;
    auto timed_test = [&] {
        bool done = false;
        const uint64_t t = timing::thread_cpu_ns();
        if (!impl.test(&done)) failed(impl, job, "a test");
        const uint64_t spent = timing::thread_cpu_ns() - t;
        // A test after the completing one (an OSU -t call late in the
        // compute) finds no request: neither figure counts it.
        if (done && !finished) {
            cpu_ns += spent;
            ++cpu_calls;
            finished = true;
        } else if (!done) {
            poll_ns += spent;
            ++poll_calls;
        }
        return done;
    };
    for (uint64_t i = 0; i < job.iterations; ++i) {
        finished = false;
        const uint64_t c = timing::thread_cpu_ns();
        post();
        cpu_ns += timing::thread_cpu_ns() - c;
        ++cpu_calls;
        job.compute->run(latency_ns, job.test_calls, [&] { timed_test(); });
        while (!finished && !timed_test()) job.compute->spend(slice_ns);
        w.barrier();
    }
    // 4. CPU time inside the wait of pass 2's loop: what blocking costs
    // when the result is not there yet (a sleep and a wake-up by the OS).
    uint64_t wait_cpu_ns = 0;
    for (uint64_t i = 0; i < job.iterations; ++i) {
        post();
        job.compute->run(latency_ns, job.test_calls, test);
        const uint64_t c = timing::thread_cpu_ns();
        wait();
        wait_cpu_ns += timing::thread_cpu_ns() - c;
        w.barrier();
    }
    if (!job.check_every) wrong = count_wrong(job.pattern, rank, recv);

    const double n = double(job.iterations) * 1e3;  // ns totals -> us per iteration
    const double clock_ns = double(g_cpu_clock_cost_ns);
    const double cpu_us = std::max(0.0, (double(cpu_ns) - double(cpu_calls) * clock_ns) / n);
    const double wait_cpu_us = std::max(0.0, double(wait_cpu_ns) / n - clock_ns / 1e3);
    const double poll_cpu_us =
        poll_calls ? std::max(0.0, (double(poll_ns) / double(poll_calls) - clock_ns) / 1e3) : 0.0;
    const std::vector<double> avg =
        w.average({double(overall) / n, double(comp) / n, double(tests) / n, double(init) / n,
                   double(waits) / n, double(pure_ns) / n, cpu_us, wait_cpu_us, poll_cpu_us,
                   double(poll_calls) / double(job.iterations)});
    row.overall_us = avg[0];
    row.test_us = avg[2];
    row.compute_us = avg[1] - avg[2];  // OSU: the test calls are overhead, not compute
    row.init_us = avg[3];
    row.wait_us = avg[4];
    row.time_us = avg[5];
    row.time_max_us = w.maximum({double(pure_ns) / n})[0];
    row.host_cpu_us = avg[6];
    row.wait_cpu_us = avg[7];
    row.poll_cpu_us = avg[8];
    row.polls = avg[9];
    row.overlap_pct =
        row.time_us > 0
            ? std::max(0.0, 100.0 - 100.0 * (row.overall_us - row.compute_us) / row.time_us)
            : 0.0;
    row.wrong = w.sum(wrong);
    finish_row(row, job);
    return row;
}

}  // namespace

uint64_t calibrate_cpu_clock() {
    constexpr int kReps = 2000;
    uint64_t total = 0;
    for (int i = 0; i < kReps; ++i) {
        const uint64_t a = timing::thread_cpu_ns();
        total += timing::thread_cpu_ns() - a;
    }
    g_cpu_clock_cost_ns = total / kReps;
    return g_cpu_clock_cost_ns;
}

Row measure(Impl &impl, const SizeJob &job, bool nonblocking) {
    Row row;
    row.impl = impl.name();
    row.size = job.size;
    row.count = job.args.count;
    row.iterations = job.iterations;
    row.warmup = job.warmup;
    row.nonblocking = nonblocking;
    row.skipped = impl.unsupported(job.pattern.coll, nonblocking, job.args);
    if (!row.skipped.empty()) return row;
    return nonblocking ? measure_nonblocking(impl, job, row) : measure_blocking(impl, job, row);
}

}  // namespace deputy::bench::coll
