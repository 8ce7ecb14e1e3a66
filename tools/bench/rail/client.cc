// The client role: exposes --buffers zeroed buffers per device, each
// registered on each of the device's rails, asks the server to fill them, drives progress until
// every rail's end-of-stream signal arrived, then checks every byte against
// the seeded pattern.
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
#include "bench/rail/target.h"
#include "bench/rail/writer.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::rail {
namespace {

inline constexpr size_t kMaxReportedMismatches = 16;

struct DeviceWait {
    std::unique_ptr<DeviceTarget> target;
    std::string error;
    std::thread thread;
};

int run(const RailOptions &o, Socket &conn, Catalog &catalog, const SessionOutput &output) {
    sockaddr_storage route = conn.local_address();
    const DomainChoice domains =
        choose_domains(o.domain, o.devices, o.rails_per_device(), catalog.domains());
    if (output.summary) print_groups(stdout, domains);
    std::vector<const fi_info *> infos = catalog.pick(domains.spec, &route, o.rails);
    std::vector<std::unique_ptr<Rail>> rails;
    for (int r = 0; r < o.rails; ++r) rails.push_back(std::make_unique<Rail>(infos[size_t(r)], "client", r));
    // Device d's buffer b is buffers[d * --buffers + b]: zeroed, pre-faulted,
    // and registered on its own on each of the device's rails.
    std::vector<Buffer> buffers;
    for (uint64_t i = 0; i < uint64_t(o.devices) * o.buffers; ++i)
        buffers.emplace_back(o.buffer_bytes());

    const int rpd = o.rails_per_device();
    std::vector<std::unique_ptr<Registration>> regs;
    Hello hello;
    hello.workload = o;
    hello.provider = catalog.provider_name();
    hello.cq_data = true;
    for (int r = 0; r < o.rails; ++r) {
        Rail &rail = *rails[size_t(r)];
        RailAdvert advert{rail.address(), rail.domain_name(), {}};
        for (uint64_t b = 0; b < o.buffers; ++b) {
            Buffer &buffer = buffers[size_t(uint64_t(r / rpd) * o.buffers + b)];
            regs.push_back(std::make_unique<Registration>(rail, buffer.data(), o.buffer_bytes(),
                                                          FI_REMOTE_WRITE, 1 + 2 * b));
            advert.buffers.push_back(
                {regs.back()->remote_base(), regs.back()->key(), o.buffer_bytes()});
        }
        hello.rails.push_back(std::move(advert));
        hello.cq_data = hello.cq_data && rail.remote_cq_data();
        if (o.end_signal == "data" && !rail.remote_cq_data())
            throw RailError(rail.where() + ": --end-signal data, but the provider's cq_data_size is " +
                            std::to_string(rail.info()->domain_attr->cq_data_size) +
                            " (4 bytes needed)");
    }
    if (o.end_signal == "message") hello.cq_data = false;
    conn.send(MsgType::kHello, encode_hello(hello), o.timeout_s);
    // The server fills its pages before READY: allow for that beyond --timeout.
    double setup_budget = o.timeout_s + double(o.device_bytes() * uint64_t(o.devices)) / 100e6;
    Ready ready = decode_ready(conn.expect(MsgType::kReady, "server", setup_budget).body);
    if (ready.rails.size() != size_t(o.rails))
        throw RailError("READY lists " + std::to_string(ready.rails.size()) + " server rails, expected " +
                        std::to_string(o.rails));
    for (int r = 0; r < o.rails; ++r)
        rails[size_t(r)]->insert_peer(ready.rails[size_t(r)].address, "server rail " + std::to_string(r));
    bool signals = ready.signal == "remote_cq_data";
    if (o.end_signal == "data" && !signals)
        throw RailError("--end-signal data, but the server's provider cannot send immediate data");

    // One thread per device drives progress and waits for the signals.
    TargetControl control;
    std::vector<DeviceWait> waits(size_t(o.devices));
    std::atomic<int> running{o.devices};
    for (int d = 0; d < o.devices; ++d) {
        std::vector<TargetRail> bindings;
        for (int k = 0; k < rpd; ++k)
            bindings.push_back({rails[size_t(d * rpd + k)].get(), end_signal(d * rpd + k)});
        waits[size_t(d)].target = std::make_unique<DeviceTarget>(
            std::move(bindings), signals, o.timeout_s,
            rx_poll_us_for(catalog.provider_name(), o.rx_poll_us));
    }
    for (int d = 0; d < o.devices; ++d) {
        DeviceWait &w = waits[size_t(d)];
        w.thread = std::thread([&, d, &w = w] {
            try {
                pin_thread(o, output.cpu_offset + d, "client device thread");
                w.target->run(control);
            } catch (const std::exception &e) {
                w.error = e.what();
                control.cancel = true;
            }
            running.fetch_sub(1);
        });
    }
    auto stop_threads = [&] {
        control.cancel = true;
        for (auto &w : waits)
            if (w.thread.joinable()) w.thread.join();
    };

    RunResult result;
    try {
        conn.send(MsgType::kGo, nlohmann::json::object(), o.timeout_s);
        LiveLine live(output.live, output.tty);
        double quiet_since = double(timing::now_ns()) * 1e-9;
        for (;;) {
            if (control.cancel.load()) break;  // a device thread failed
            auto f = conn.poll_frame(0.05, "PROGRESS or RESULT");
            double now = double(timing::now_ns()) * 1e-9;
            if (!f) {
                // The server sends PROGRESS every 250 ms while it writes.
                if (now - quiet_since > o.timeout_s + (o.warmup ? o.timeout_s : 0))
                    throw RailError("no word from " + conn.peer() + " for " +
                                    std::to_string(int(now - quiet_since)) + " s during the run (--timeout)");
                continue;
            }
            quiet_since = now;
            if (f->type == MsgType::kProgress) {
                live.show(Sample::from_json(f->body));
            } else if (f->type == MsgType::kResult) {
                result = RunResult::from_json(f->body);
                break;
            } else if (f->type == MsgType::kError) {
                throw RailError("the server reported: " + f->body.value("message", std::string("?")));
            } else {
                throw RailError(conn.peer() + " sent " + msg_name(f->type) + " during the run");
            }
        }
        live.finish();
        control.server_done_ns = timing::now_ns();
        control.server_done.store(true, std::memory_order_release);
        for (auto &w : waits) w.thread.join();
    } catch (...) {
        stop_threads();
        throw;
    }
    for (auto &w : waits)
        if (!w.error.empty()) throw RailError(w.error);

    VerifySummary verify;
    verify.enabled = o.verify;
    if (o.verify)
        for (int d = 0; d < o.devices; ++d)
            for (uint64_t b = 0; b < o.buffers; ++b)  // buffer b holds pages b*pages...
                verify.report.merge(
                    verify_pages(buffers[size_t(uint64_t(d) * o.buffers + b)].data(), o.page_size,
                                 o.pages, b * o.pages, o.seed, uint32_t(d),
                                 kMaxReportedMismatches),
                    kMaxReportedMismatches);
    conn.send(MsgType::kVerdict, verify.to_json(), o.timeout_s);
    if (output.summary) print_summary(stdout, o, result, verify);
    if (output.write_out) write_results(o, result, verify, domains.groups);
    if (verify.report.bad_pages != 0) {
        DP_APP_ERROR("verification failed: {} pages ({} bytes) differ; first: {}",
                     verify.report.bad_pages, verify.report.bad_bytes,
                     verify.report.first.front().describe());
        return kExitMismatch;
    }
    return kExitOk;
}

}  // namespace

int run_client(const RailOptions &o, const HostPort &server, const SessionOutput &output) {
    // Resolve the provider first: a missing provider is reported before any
    // connection is made.
    Catalog catalog = Catalog::query(o.provider);
    Socket conn = connect_to(server, o.timeout_s);
    DP_APP_DEBUG("client: connected to {}", conn.peer());
    try {
        return run(o, conn, catalog, output);
    } catch (const RailError &e) {
        try {
            conn.send(MsgType::kError, {{"message", e.what()}}, 2.0);
        } catch (const RailError &) {
        }
        throw;
    }
}

}  // namespace deputy::rail
