#include "bench/channel/options.h"

#include "channel/agent_address.h"

#include <fmt/format.h>

#include "channel/transport/shm/transport.h"
#include "common/affinity.h"
#include "common/cli_common.h"
#include "common/units.h"

namespace deputy::bench::channel {
namespace ch = deputy::channel;

const char *mode_name(Mode mode) {
    return mode == Mode::kStream ? "stream" : "pingpong";
}
const char *role_name(Role role) {
    return role == Role::kListen ? "listen" : "connect";
}

bool resolve(const ChannelOptions &o, Plan *plan, std::string *error) {
    auto fail = [&](std::string message) {
        *error = std::move(message);
        return false;
    };
    Plan p;
    if (o.mode == "stream")
        p.mode = Mode::kStream;
    else if (o.mode == "pingpong")
        p.mode = Mode::kPingpong;
    else
        return fail("--mode " + o.mode + ": expected stream or pingpong");
    p.one_way = o.one_way;
    if (p.one_way && p.mode != Mode::kStream)
        return fail("--one-way applies to --mode stream (pingpong is two-way by nature)");

    auto size = units::parse_size(o.msg_size);
    if (!size) return fail(cli::not_a_size("-s", o.msg_size));
    auto limit = units::parse_size(o.max_msg_size);
    if (!limit || *limit == 0 || *limit > ch::kMaxMessageCeiling)
        return fail(fmt::format("--max-msg-size {}: expected 1..{} bytes", o.max_msg_size,
                                ch::kMaxMessageCeiling));
    if (*size > *limit)
        return fail(
            fmt::format("-s {}: a message of {} bytes exceeds the channel maximum of {} "
                        "bytes (DP_ERR_TOO_LARGE); nothing was sent. Raise "
                        "--max-msg-size (at most {})",
                        o.msg_size, *size, *limit, units::format_size(ch::kMaxMessageCeiling)));
    if (p.mode == Mode::kPingpong && *size < 8)
        return fail("-s " + o.msg_size + ": pingpong needs at least 8 bytes (the sequence number)");
    p.msg_size = *size;
    p.num_msgs = o.num_msgs;
    p.warmup = o.warmup;
    p.verify = !o.no_verify;
    if (!(o.timeout_s > 0)) return fail("--timeout must be > 0 seconds");
    p.timeout_ns = int64_t(o.timeout_s * 1e9);

    ch::EndpointConfig &e = p.endpoint;
    if (!ch::parse_transport_kind(o.transport, &e.kind))
        return fail("--transport " + o.transport + ": expected shm, uds or tcp");
    auto buffer = units::parse_size(o.buffer_size);
    if (!buffer) return fail(cli::not_a_size("--buffer-size", o.buffer_size));
    if (e.kind == ch::TransportKind::kShm && *buffer != 0 &&
        ((*buffer & (*buffer - 1)) != 0 || *buffer < ch::shm::kMinRingBytes ||
         *buffer > ch::shm::kMaxRingBytes))
        return fail(fmt::format(
            "--buffer-size {}: the shm ring size must be a power of two "
            "from {} to {}",
            o.buffer_size, ch::shm::kMinRingBytes, units::format_size(ch::shm::kMaxRingBytes)));
    e.options.buffer_bytes = *buffer;
    e.options.max_message = *limit;
    e.options.spin_ns = int64_t(o.spin_us * 1000);
    e.secure = o.secure;
    e.allow_insecure_tcp = o.insecure_tcp;
    if (o.secure) {
        if (o.key_file.empty())
            return fail("--secure needs --key FILE (make one with --keygen FILE)");
        auto key = std::make_shared<ch::secure::Key>();
        if (ch::secure::load_key_file(o.key_file, key.get()) != DP_OK)
            return fail("--key " + o.key_file + ": unusable key file (the error above says why)");
        e.key = std::move(key);
    } else if (!o.key_file.empty()) {
        return fail("--key given without --secure");
    }
    if (e.kind == ch::TransportKind::kTcp && !o.secure && !o.insecure_tcp)
        return fail(
            "--transport tcp without --secure would send every message in clear: add "
            "--secure --key FILE, or --insecure-tcp to accept that");

    std::vector<int> cpus;
    if (!o.cpus.empty()) {
        std::string why;
        if (affinity::parse_cpu_list(o.cpus, &cpus, &why) != DP_OK) return fail("--cpus: " + why);
        for (int cpu : cpus)
            if (cpu >= affinity::cpu_count())
                return fail(fmt::format("--cpus {}: this machine has CPUs 0..{}", cpu,
                                        affinity::cpu_count() - 1));
    }

    if (int(o.loopback) + int(!o.peer.empty()) + int(o.agent) != 1)
        return fail("give exactly one of --loopback, --agent or --peer listen|connect ADDR");
    if (o.agent) {
        p.via_agent = true;
        p.role = Role::kConnect;
        p.agent_address = ch::resolve_agent_address(o.agent_socket);
        // A placeholder: the agent answers with the address of its listener.
        e.address = e.kind == ch::TransportKind::kTcp ? "127.0.0.1:0" : "/pending";
        p.cpus = cpus;
    } else if (o.loopback) {
        p.loopback = true;
        p.role = Role::kListen;
        // uds/shm: a placeholder; the runner makes a private directory for it.
        e.address = e.kind == ch::TransportKind::kTcp ? "127.0.0.1:0" : "/pending";
        // The listener takes the first half of --cpus, the peer the rest.
        size_t half = (cpus.size() + 1) / 2;
        p.cpus.assign(cpus.begin(), cpus.begin() + half);
        p.peer_cpus.assign(cpus.begin() + (cpus.size() > 1 ? half : 0), cpus.end());
    } else {
        if (o.peer.size() != 2 || (o.peer[0] != "listen" && o.peer[0] != "connect"))
            return fail("--peer expects 'listen ADDR' or 'connect ADDR'");
        p.role = o.peer[0] == "listen" ? Role::kListen : Role::kConnect;
        e.address = o.peer[1];
        p.cpus = cpus;
    }
    if (ch::check_config(e) != DP_OK) return fail("the channel configuration is refused (above)");
    if (!o.compare.empty()) {
        if (!p.loopback) return fail("--compare needs --loopback (both sides in one run)");
        if (!ch::parse_transport_kind(o.compare, &p.compare_kind))
            return fail("--compare " + o.compare + ": expected shm, uds or tcp");
        if (p.compare_kind == ch::TransportKind::kTcp && !o.secure && !o.insecure_tcp)
            return fail("--compare tcp without --secure needs --insecure-tcp");
        p.compare = true;
    }
    *plan = std::move(p);
    return true;
}

int busy_threads(const Plan &plan) {
    // Per side: pingpong has one thread; stream has a sender and a receiver,
    // of which only the ones with traffic stay busy.
    int per_side = plan.mode == Mode::kPingpong ? 1 : plan.one_way ? 1 : 2;
    return plan.loopback ? 2 * per_side : per_side;
}

}  // namespace deputy::bench::channel
