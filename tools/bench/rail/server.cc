// The server role: receives the client's HELLO, opens its rails, fills its
// source pages from the seeded PRNG, and writes them into the client's
// buffers (device threads running DeviceWriter), reporting as it goes.
#include <deputy/version.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "bench/rail/buffer.h"
#include "bench/rail/fabric.h"
#include "bench/rail/handshake.h"
#include "bench/rail/pattern.h"
#include "bench/rail/pcie_groups.h"
#include "bench/rail/rail_error.h"
#include "bench/rail/reporter.h"
#include "bench/rail/session.h"
#include "bench/rail/summary.h"
#include "bench/rail/writer.h"
#include "common/affinity.h"
#include "common/host_info.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::rail {
namespace {

struct DeviceRun {
    std::unique_ptr<DeviceWriter> writer;
    DeviceStats stats;
    std::string error;
    std::thread thread;
};

int serve(const RailOptions &server_options, Socket &conn, const std::atomic<bool> *outer_cancel,
          const SessionOutput &output) {
    Hello hello =
        decode_hello(conn.expect(MsgType::kHello, "client", server_options.timeout_s).body);
    RailOptions o = merge_workload(server_options, hello);
    DP_APP_DEBUG("server: {} asks for {} rails over {} devices, {} pages x {} B", conn.peer(),
                 o.rails, o.devices, o.pages, o.page_size);

    Catalog catalog = Catalog::query(o.provider);
    if (catalog.provider_name() != hello.provider)
        throw RailError("provider mismatch: the server uses '" + catalog.provider_name() +
                        "' (--provider " + o.provider + "), the client '" + hello.provider + "'");
    sockaddr_storage route = conn.local_address();
    const DomainChoice domains =
        choose_domains(o.domain, o.devices, o.rails_per_device(), catalog.domains());
    if (output.summary) print_groups(stdout, domains);
    std::vector<const fi_info *> infos = catalog.pick(domains.spec, &route, o.rails);

    // Rails, then source pages, then registrations (destroyed in reverse).
    std::vector<std::unique_ptr<Rail>> rails;
    for (int r = 0; r < o.rails; ++r) rails.push_back(std::make_unique<Rail>(infos[size_t(r)], "server", r));
    std::vector<Buffer> sources;  // per device: every page of all its buffers, in order
    for (int d = 0; d < o.devices; ++d) {
        sources.emplace_back(o.device_bytes());
        for (uint64_t p = 0; p < o.device_pages(); ++p)
            fill_page(sources.back().data() + p * o.page_size, o.page_size, o.seed, uint32_t(d), p);
    }
    const int rpd = o.rails_per_device();
    std::vector<std::unique_ptr<Registration>> regs;
    std::vector<std::vector<RemoteBuffer>> remotes;  // per rail, per buffer
    bool cq_data = hello.cq_data;
    for (int r = 0; r < o.rails; ++r) {
        Rail &rail = *rails[size_t(r)];
        regs.push_back(std::make_unique<Registration>(rail, sources[size_t(r / rpd)].data(),
                                                      o.device_bytes(), FI_WRITE, 2));
        const RailAdvert &peer = hello.rails[size_t(r)];
        const fi_addr_t address =
            rail.insert_peer(peer.address, "client rail " + std::to_string(r));
        remotes.emplace_back();
        for (const BufferAdvert &buffer : peer.buffers)
            remotes.back().push_back({address, buffer.base, buffer.key});
        cq_data = cq_data && rail.remote_cq_data();
    }

    Ready ready;
    ready.provider = catalog.provider_name();
    ready.signal = cq_data ? "remote_cq_data" : "delivery_complete";
    for (auto &rail : rails) ready.rails.push_back({rail->address(), rail->domain_name(), {}});
    conn.send(MsgType::kReady, encode_ready(ready), o.timeout_s);
    conn.expect(MsgType::kGo, "client", o.timeout_s);

    // One thread per device.
    WritePlan plan;
    plan.page_size = o.page_size;
    plan.pages = o.device_pages();
    plan.pages_per_buffer = o.pages;
    plan.repeat = o.repeat;
    plan.duration_s = o.duration_s;
    plan.batch = o.batch;
    plan.tx_depth = o.tx_depth;
    plan.warmup = o.warmup;
    plan.signal_with_data = cq_data;
    plan.timeout_s = o.timeout_s;
    std::vector<RailCounters> counters(size_t(o.rails));
    std::vector<DeviceRun> devices(size_t(o.devices));
    for (int d = 0; d < o.devices; ++d) {
        std::vector<WriterRail> bindings;
        for (int k = 0; k < rpd; ++k) {
            int r = d * rpd + k;
            bindings.push_back({rails[size_t(r)].get(), regs[size_t(r)]->desc(), remotes[size_t(r)],
                                &counters[size_t(r)], end_signal(r)});
        }
        devices[size_t(d)].writer = std::make_unique<DeviceWriter>(
            d, sources[size_t(d)].data(), std::move(bindings), plan);
    }
    std::atomic<bool> cancel{false};
    std::atomic<int> running{o.devices};
    // The multi-rail article's server prints these two lines between its
    // warm-up and its timed writes; so does this one.
    StartGate gate(o.devices, [&o] {
        if (o.warmup) std::printf("Warmup completed.\n");
        std::printf("Started RDMA WRITE to the remote memory: %d device(s), %d rail(s).\n",
                    o.devices, o.rails);
        std::fflush(stdout);
    });
    for (int d = 0; d < o.devices; ++d) {
        DeviceRun &run = devices[size_t(d)];
        run.thread = std::thread([&, d, &run = run] {
            try {
                pin_thread(o, output.cpu_offset + d, "server device thread");
                run.stats = run.writer->run(gate, cancel);
            } catch (const std::exception &e) {
                run.error = e.what();
                cancel = true;
            }
            running.fetch_sub(1);
        });
    }

    // Live numbers until the device threads finish; a message from the
    // client (an ERROR, or the connection closing) cancels the run.
    Sampler sampler(&counters, o.link_gbps * o.rails, o.sample_interval_s);
    LiveLine live(output.live, output.tty);
    sampler.take(timing::now_ns());
    std::string peer_error;
    const uint64_t interval_ns = uint64_t(o.sample_interval_s * 1e9);
    uint64_t next_ns = timing::now_ns() + interval_ns;
    while (running.load() > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (outer_cancel != nullptr && outer_cancel->load()) cancel = true;
        uint64_t now = timing::now_ns();
        if (now < next_ns) continue;
        next_ns += interval_ns;
        Sample sample = sampler.take(now);
        if (running.load() == 0) break;
        live.show(sample);
        try {
            // Always sent: besides the client's live line it is the
            // heartbeat that tells the client the run is still going.
            conn.send(MsgType::kProgress, sample.to_json(), o.timeout_s);
            if (auto f = conn.poll_frame(0, "ERROR")) {
                peer_error = f->type == MsgType::kError
                                 ? "the client reported: " + f->body.value("message", std::string("?"))
                                 : std::string("the client sent ") + msg_name(f->type) + " during the run";
                cancel = true;
            }
        } catch (const RailError &e) {
            peer_error = e.what();
            cancel = true;
        }
    }
    for (auto &run : devices) run.thread.join();
    live.finish();
    for (auto &run : devices)
        if (!run.error.empty()) throw RailError(run.error);
    if (!peer_error.empty()) throw RailError(peer_error);
    if (cancel.load()) throw RailError("server cancelled");

    RunResult result;
    result.provider = catalog.provider_name();
    result.provider_version = std::to_string(FI_MAJOR(infos[0]->fabric_attr->prov_version)) + "." +
                              std::to_string(FI_MINOR(infos[0]->fabric_attr->prov_version));
    result.signal = ready.signal;
    uint64_t start = UINT64_MAX, end = 0;
    for (int d = 0; d < o.devices; ++d) {
        const DeviceStats &s = devices[size_t(d)].stats;
        start = std::min(start, s.start_ns);
        end = std::max(end, s.end_ns);
        result.warmup_ms = std::max(result.warmup_ms, double(s.warmup_ns) * 1e-6);
        result.warmup_writes += s.warmup_writes;
        for (int k = 0; k < rpd; ++k) {
            const RailStats &rs = s.rails[size_t(k)];
            int r = d * rpd + k;
            result.rails.push_back({r, d, rails[size_t(r)]->domain_name(), hello.rails[size_t(r)].domain,
                                    rs.writes, rs.bytes, rs.eagain,
                                    double(rs.first_completion_ns) * 1e-6});
            result.bytes += rs.bytes;
            result.writes += rs.writes;
        }
    }
    result.seconds = double(end - start) * 1e-9;
    result.peak_gbps = sampler.peak_gbps();
    result.samples_gbps = sampler.rates();
    result.server_host = host_info();
    conn.send(MsgType::kResult, result.to_json(), o.timeout_s);

    // The client verifies every byte; allow time for that beyond --timeout.
    double verify_budget = o.timeout_s + double(o.device_bytes() * uint64_t(o.devices)) / 100e6;
    VerifySummary verify =
        VerifySummary::from_json(conn.expect(MsgType::kVerdict, "client", verify_budget).body);
    if (output.summary) print_summary(stdout, o, result, verify);
    if (output.write_out) write_results(o, result, verify, domains.groups);
    return verify.report.bad_pages == 0 ? kExitOk : kExitMismatch;
}

}  // namespace

void pin_thread(const RailOptions &options, int index, const char *who) {
    if (options.cpus.empty()) return;
    int cpu = options.cpus[size_t(index) % options.cpus.size()];
    if (affinity::pin_current_thread(cpu) != DP_OK)
        throw RailError(std::string("--pin: cannot pin the ") + who + " to CPU " + std::to_string(cpu));
}

int run_server(const RailOptions &options, Listener &listener, const std::atomic<bool> *cancel,
               const SessionOutput &output) {
    Socket conn = listener.accept(options.accept_timeout_s, cancel);
    // Standalone servers announce the client; inside --loopback it is noise.
    SPDLOG_LOGGER_CALL(&log::app(), output.summary ? spdlog::level::info : spdlog::level::debug,
                       "server: {} connected", conn.peer());
    try {
        return serve(options, conn, cancel, output);
    } catch (const RailError &e) {
        // Tell the client why, so both sides print the cause.
        try {
            conn.send(MsgType::kError, {{"message", e.what()}}, 2.0);
        } catch (const RailError &) {
        }
        throw;
    }
}

}  // namespace deputy::rail
