#include "bench/channel/agent_peer.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "bench/channel/report.h"
#include "bench/channel/session.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/log.h"

namespace deputy::bench::channel {
namespace {

namespace ch = deputy::channel;
namespace control = deputy::channel::control;
using nlohmann::json;

constexpr int64_t kSetupTimeoutNs = 5'000'000'000;
constexpr int64_t kResultGraceNs = 5'000'000'000;

json options_to_json(const ChannelOptions &o) {
    return {{"msg_size", o.msg_size},         {"num_msgs", o.num_msgs},
            {"transport", o.transport},       {"secure", o.secure},
            {"key_file", o.key_file},         {"buffer_size", o.buffer_size},
            {"mode", o.mode},                 {"one_way", o.one_way},
            {"insecure_tcp", o.insecure_tcp}, {"max_msg_size", o.max_msg_size},
            {"timeout_s", o.timeout_s},       {"warmup", o.warmup},
            {"spin_us", o.spin_us},           {"no_verify", o.no_verify}};
}

ChannelOptions options_from_json(const json &j) {
    ChannelOptions o;
    o.msg_size = j.at("msg_size").get<std::string>();
    o.num_msgs = j.at("num_msgs").get<uint64_t>();
    o.transport = j.at("transport").get<std::string>();
    o.secure = j.at("secure").get<bool>();
    o.key_file = j.at("key_file").get<std::string>();
    o.buffer_size = j.at("buffer_size").get<std::string>();
    o.mode = j.at("mode").get<std::string>();
    o.one_way = j.at("one_way").get<bool>();
    o.insecure_tcp = j.at("insecure_tcp").get<bool>();
    o.max_msg_size = j.at("max_msg_size").get<std::string>();
    o.timeout_s = j.at("timeout_s").get<double>();
    o.warmup = j.at("warmup").get<uint64_t>();
    o.spin_us = j.at("spin_us").get<double>();
    o.no_verify = j.at("no_verify").get<bool>();
    return o;
}

dp_status_t send_json(int fd, const json &j, const char *where) {
    std::string text = j.dump();
    return control::send_message(fd, ch::MsgType::kData,
                                 std::vector<uint8_t>(text.begin(), text.end()), nullptr, 0,
                                 kSetupTimeoutNs, where);
}

dp_status_t recv_json(int fd, int64_t timeout_ns, json *out, const char *where) {
    ch::MsgType type;
    std::vector<uint8_t> payload;
    dp_status_t s = control::recv_message(fd, control::kMaxControlMessage, &type, &payload,
                                          nullptr, 0, nullptr, timeout_ns, where);
    if (s != DP_OK) return s;
    if (type == ch::MsgType::kReply) {
        control::Reply reply;
        std::string error;
        control::decode(payload.data(), payload.size(), &reply, &error);
        *out = {{"error", reply.reason}, {"status", int(reply.status)}};
        return DP_OK;
    }
    if (type != ch::MsgType::kData) return DP_ERR_INVALID;
    *out = json::parse(payload.begin(), payload.end(), nullptr, false);
    return out->is_discarded() ? DP_ERR_INVALID : DP_OK;
}

SideResult failed_side(const Plan &plan, Role role, dp_status_t status, std::string error) {
    SideResult r;
    r.role = role_name(role);
    r.transport = ch::transport_kind_name(plan.endpoint.kind);
    r.peer = plan.agent_address;
    r.msg_size = plan.msg_size;
    r.status = status;
    r.error = std::move(error);
    r.verdict = "no result";
    DP_APP_ERROR("[{}] {}", r.role, r.error);
    return r;
}

std::string run_address(const std::string &agent_address, ch::TransportKind kind) {
    static std::atomic<uint32_t> runs{0};
    const uint32_t n = runs.fetch_add(1);
    if (kind == ch::TransportKind::kTcp) return "127.0.0.1:0";
    if (!agent_address.empty() && agent_address[0] == '@')
        return fmt::format("{}-bench-{}", agent_address, n);
    return fmt::format("{}/bench-{}.sock", agent_address.substr(0, agent_address.rfind('/')), n);
}

}  // namespace

std::vector<SideResult> run_via_agent(const Plan &plan, const ChannelOptions &options) {
    UniqueFd fd;
    if (ch::uds::connect_fd(plan.agent_address, kSetupTimeoutNs, &fd) != DP_OK)
        return {failed_side(plan, Role::kConnect, DP_ERR_NO_AGENT,
                            fmt::format("no agent answers at {} (start one: deputy agent)",
                                        plan.agent_address))};
    control::Attach attach;
    attach.purpose = control::Purpose::kService;
    if (const char *token = std::getenv("DEPUTY_TOKEN")) attach.token = token;
    std::vector<uint8_t> payload;
    control::encode(attach, &payload);
    json answer;
    if (control::send_message(fd.get(), ch::MsgType::kAttach, payload, nullptr, 0,
                              kSetupTimeoutNs, "bench --agent") != DP_OK ||
        recv_json(fd.get(), kSetupTimeoutNs, &answer, "bench --agent") != DP_OK)
        return {failed_side(plan, Role::kConnect, DP_ERR_AGENT_LOST,
                            "the agent did not answer the service request")};
    if (answer.value("status", 0) != 0)
        return {failed_side(plan, Role::kConnect, dp_status_t(answer.value("status", -11)),
                            "the agent refused: " + answer.value("error", std::string()))};
    if (send_json(fd.get(), {{"service", "bench-channel"}, {"options", options_to_json(options)}},
                  "bench --agent") != DP_OK ||
        recv_json(fd.get(), kSetupTimeoutNs, &answer, "bench --agent") != DP_OK)
        return {failed_side(plan, Role::kConnect, DP_ERR_AGENT_LOST,
                            "the agent did not open a listener")};
    if (answer.contains("error"))
        return {failed_side(plan, Role::kConnect, DP_ERR_INVALID,
                            "the agent could not run the listening side: " +
                                answer["error"].get<std::string>())};
    Plan mine = plan;
    mine.endpoint.address = answer.value("address", std::string());
    std::vector<SideResult> sides;
    SideResult connect = run_side(mine, Role::kConnect, nullptr, plan.cpus);
    json theirs;
    // A side result always names its role; a failure message does not.
    if (recv_json(fd.get(), plan.timeout_ns + kResultGraceNs, &theirs, "bench --agent") == DP_OK &&
        theirs.contains("role")) {
        sides.push_back(from_json(theirs));
    } else {
        sides.push_back(failed_side(mine, Role::kListen, DP_ERR_AGENT_LOST,
                                    "the agent's side sent no result"));
    }
    sides.push_back(std::move(connect));
    return sides;
}

void serve_agent_peer(UniqueFd socket, const std::string &agent_address) {
    json request;
    if (recv_json(socket.get(), kSetupTimeoutNs, &request, "agent bench service") != DP_OK) return;
    if (request.value("service", std::string()) != "bench-channel") {
        send_json(socket.get(), {{"error", "unknown service (this agent has: bench-channel)"}},
                  "agent bench service");
        return;
    }
    ChannelOptions o;
    try {
        o = options_from_json(request.at("options"));
    } catch (const std::exception &e) {
        send_json(socket.get(), {{"error", std::string("malformed options: ") + e.what()}},
                  "agent bench service");
        return;
    }
    ch::TransportKind kind = ch::TransportKind::kUds;
    ch::parse_transport_kind(o.transport, &kind);
    o.peer = {"listen", run_address(agent_address, kind)};
    Plan plan;
    std::string error;
    if (!resolve(o, &plan, &error)) {
        send_json(socket.get(), {{"error", error}}, "agent bench service");
        return;
    }
    std::unique_ptr<ch::EndpointListener> listener;
    if (ch::EndpointListener::open(plan.endpoint, &listener) != DP_OK) {
        send_json(socket.get(), {{"error", "cannot listen on " + plan.endpoint.address}},
                  "agent bench service");
        return;
    }
    send_json(socket.get(), {{"address", listener->address()}}, "agent bench service");
    DP_APP_INFO("bench-channel: serving a {} run on {}", o.transport, listener->address());
    SideResult r = run_side(plan, Role::kListen, listener.get(), {});
    send_json(socket.get(), to_json(r), "agent bench service");
}

}  // namespace deputy::bench::channel
