#include "bench/channel/report.h"

#include <deputy/log.h>
#include <fmt/format.h>

#include <cstdio>

#include "channel/key_file.h"
#include "common/affinity.h"
#include "common/result_document.h"
#include "common/log.h"
#include "common/units.h"

namespace deputy::bench::channel {
namespace {

Rate rate_of(uint64_t messages, uint64_t bytes_each, uint64_t start_ns, uint64_t end_ns) {
    Rate r;
    if (end_ns <= start_ns) return r;
    r.seconds = double(end_ns - start_ns) / 1e9;
    if (messages == 0) return r;
    r.avg_us = r.seconds * 1e6 / double(messages);
    r.mb_per_s = double(messages) * double(bytes_each) / r.seconds / 1e6;
    r.mpps = double(messages) / r.seconds / 1e6;
    return r;
}

nlohmann::json rate_json(const Rate &r) {
    return {{"seconds", r.seconds},
            {"avg_us", r.avg_us},
            {"mb_per_s", r.mb_per_s},
            {"msg_rate_mpps", r.mpps}};
}

}  // namespace

Rate send_rate(const SideResult &r) {
    return rate_of(r.sent, r.msg_size, r.send_start_ns, r.send_end_ns);
}

Rate recv_rate(const SideResult &r) {
    // Bytes received are the peer's message size (pingpong echoes ours).
    uint64_t size = r.peer_msg_size ? r.peer_msg_size : r.msg_size;
    if (r.latency.samples > 0) size = r.msg_size;
    return rate_of(r.received, size, r.recv_start_ns, r.recv_end_ns);
}

void print_header(const Plan &plan, const std::vector<SideResult> &sides) {
    const SideResult &s = sides.front();
    std::string direction = plan.mode == Mode::kPingpong ? "round trips"
                            : plan.one_way               ? "one way (connect -> listen)"
                                                         : "both directions at once";
    std::printf(
        "# deputy bench channel: %s, %s %s, %s B x %llu, buffer %s, max message %s\n",
        s.transport.c_str(), mode_name(plan.mode), direction.c_str(),
        units::format_size(plan.msg_size).c_str(), (unsigned long long)plan.num_msgs,
        s.buffer_bytes ? units::format_size(s.buffer_bytes).c_str() : "default",
        units::format_size(s.max_message ? s.max_message : plan.endpoint.options.max_message)
            .c_str());
    const int busy = busy_threads(plan), cpus = affinity::cpu_count();
    if (busy > cpus)
        std::printf(
            "# note: %d busy threads on %d CPUs: figures are contention-bound%s\n", busy, cpus,
            plan.mode == Mode::kStream && !plan.one_way ? " (--one-way streams with 2)" : "");
    std::fflush(stdout);
}

void print_rows(const Plan &plan, const std::vector<SideResult> &sides) {
    if (plan.mode == Mode::kStream) {
        std::printf("%-8s %-4s %8s %12s %12s %10s %19s %14s\n", "role", "dir", "#bytes",
                    "#iterations", "time[usec]", "avg[usec]", "BW average[MB/sec]",
                    "MsgRate[Mpps]");
        for (const SideResult &r : sides) {
            const Rate tx = send_rate(r), rx = recv_rate(r);
            std::printf("%-8s %-4s %8llu %12llu %12.1f %10.3f %19.2f %14.4f\n", r.role.c_str(),
                        "send", (unsigned long long)r.msg_size, (unsigned long long)r.sent,
                        tx.seconds * 1e6, tx.avg_us, tx.mb_per_s, tx.mpps);
            std::printf(
                "%-8s %-4s %8llu %12llu %12.1f %10.3f %19.2f %14.4f\n", r.role.c_str(), "recv",
                (unsigned long long)(r.peer_msg_size ? r.peer_msg_size : r.msg_size),
                (unsigned long long)r.received, rx.seconds * 1e6, rx.avg_us, rx.mb_per_s, rx.mpps);
        }
    } else {
        std::printf("%-8s %8s %12s %12s %12s %12s %12s %12s %14s\n", "role", "#bytes",
                    "#iterations", "t_min[usec]", "t_p50[usec]", "t_avg[usec]", "t_p99[usec]",
                    "t_max[usec]", "MsgRate[Mpps]");
        for (const SideResult &r : sides) {
            if (r.latency.samples == 0) continue;
            const Latency &l = r.latency;
            const Rate rt = recv_rate(r);
            std::printf("%-8s %8llu %12llu %12.3f %12.3f %12.3f %12.3f %12.3f %14.4f\n",
                        r.role.c_str(), (unsigned long long)r.msg_size,
                        (unsigned long long)r.received, l.min / 1e3, l.p50 / 1e3, l.avg / 1e3,
                        l.p99 / 1e3, l.max / 1e3, rt.mpps);
        }
        std::printf(
            "# latency is one-way: half the round trip, %llu warm-up round trip(s) "
            "left out\n",
            (unsigned long long)plan.warmup);
    }
    for (const SideResult &r : sides) {
        const std::string dropped =
            r.dropped > 0 ? fmt::format(", dropped {} beyond -n", r.dropped) : std::string();
        std::printf("# %s: messages sent %llu (planned %llu), received %llu (expected %llu)"
                    "%s: %s\n",
                    r.role.c_str(), (unsigned long long)r.sent, (unsigned long long)r.planned_send,
                    (unsigned long long)r.received, (unsigned long long)r.expected,
                    dropped.c_str(), r.verdict.c_str());
        if (r.status != DP_OK)
            std::printf("# %s: error: %s (%s)\n", r.role.c_str(), r.error.c_str(),
                        dp_status_name(r.status));
    }
    std::fflush(stdout);
}

nlohmann::json to_json(const SideResult &r) {
    return {{"role", r.role},
            {"transport", r.transport},
            {"peer", r.peer},
            {"buffer_bytes", r.buffer_bytes},
            {"max_message", r.max_message},
            {"connected", r.connected},
            {"msg_size", r.msg_size},
            {"peer_msg_size", r.peer_msg_size},
            {"planned_send", r.planned_send},
            {"sent", r.sent},
            {"expected", r.expected},
            {"received", r.received},
            {"dropped", r.dropped},
            {"peer_planned", r.peer_planned},
            {"peer_sent", r.peer_sent},
            {"wrong", r.wrong},
            {"send_start_ns", r.send_start_ns},
            {"send_end_ns", r.send_end_ns},
            {"recv_start_ns", r.recv_start_ns},
            {"recv_first_ns", r.recv_first_ns},
            {"recv_end_ns", r.recv_end_ns},
            {"send_cpu_ns", r.send_cpu_ns},
            {"recv_cpu_ns", r.recv_cpu_ns},
            {"send", rate_json(send_rate(r))},
            {"recv", rate_json(recv_rate(r))},
            {"latency_ns",
             {{"samples", r.latency.samples},
              {"min", r.latency.min},
              {"p50", r.latency.p50},
              {"avg", r.latency.avg},
              {"p99", r.latency.p99},
              {"max", r.latency.max}}},
            {"status", dp_status_name(r.status)},
            {"status_code", int(r.status)},
            {"error", r.error},
            {"verdict", r.verdict},
            {"exit_code", r.exit_code()}};
}

SideResult from_json(const nlohmann::json &j) {
    SideResult r;
    r.role = j.at("role");
    r.transport = j.at("transport");
    r.peer = j.at("peer");
    r.buffer_bytes = j.at("buffer_bytes");
    r.max_message = j.at("max_message");
    r.connected = j.at("connected");
    r.msg_size = j.at("msg_size");
    r.peer_msg_size = j.at("peer_msg_size");
    r.planned_send = j.at("planned_send");
    r.sent = j.at("sent");
    r.expected = j.at("expected");
    r.received = j.at("received");
    r.dropped = j.at("dropped");
    r.peer_planned = j.at("peer_planned");
    r.peer_sent = j.at("peer_sent");
    r.wrong = j.at("wrong");
    r.send_start_ns = j.at("send_start_ns");
    r.send_end_ns = j.at("send_end_ns");
    r.recv_start_ns = j.at("recv_start_ns");
    r.recv_first_ns = j.at("recv_first_ns");
    r.recv_end_ns = j.at("recv_end_ns");
    r.send_cpu_ns = j.at("send_cpu_ns");
    r.recv_cpu_ns = j.at("recv_cpu_ns");
    const auto &l = j.at("latency_ns");
    r.latency.samples = l.at("samples");
    r.latency.min = l.at("min");
    r.latency.p50 = l.at("p50");
    r.latency.avg = l.at("avg");
    r.latency.p99 = l.at("p99");
    r.latency.max = l.at("max");
    r.status = dp_status_t(j.at("status_code").get<int>());
    r.error = j.at("error");
    r.verdict = j.at("verdict");
    return r;
}

bool write_json(const std::string &path, const ChannelOptions &o, const Plan &plan,
                const std::vector<SideResult> &sides, const std::vector<SideResult> *baseline) {
    nlohmann::json results = nlohmann::json::array();
    for (const SideResult &r : sides) results.push_back(to_json(r));
    nlohmann::json compare = nullptr;
    if (baseline != nullptr) {
        compare = {{"transport", deputy::channel::transport_kind_name(plan.compare_kind)},
                   {"results", nlohmann::json::array()}};
        for (const SideResult &r : *baseline) compare["results"].push_back(to_json(r));
    }
    const nlohmann::json config = {{"msg_size", plan.msg_size},
          {"num_msgs", o.num_msgs},
          {"transport", o.transport},
          {"secure", o.secure},
          {"key_file", o.key_file},
          {"buffer_size", o.buffer_size},
          {"buffer_bytes", plan.endpoint.options.buffer_bytes},
          {"mode", o.mode},
          {"one_way", o.one_way},
          {"peer", o.peer},
          {"loopback", o.loopback},
          {"insecure_tcp", o.insecure_tcp},
          {"max_msg_size", plan.endpoint.options.max_message},
          {"timeout_s", o.timeout_s},
          {"warmup", o.warmup},
          {"spin_us", o.spin_us},
          {"verify", !o.no_verify},
          {"cpus", o.cpus},
          {"compare", o.compare}};
    nlohmann::json doc = cli::result_document(
        "channel", config, {{"libsodium", deputy::channel::secure::sodium_version()}}, results);
    doc["busy_threads"] = busy_threads(plan);
    doc["compare"] = compare;
    std::string error;
    if (!cli::write_json_file("--out", path, doc, &error)) {
        DP_APP_ERROR("{}", error);
        return false;
    }
    return true;
}

}  // namespace deputy::bench::channel
