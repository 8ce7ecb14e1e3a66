// `deputy info`: is an agent reachable, which version, engines, queues,
// clients, where its threads run (placement) and counters. Exit 0 when an
// agent answered, 1 otherwise.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/agent/agent_command.h"
#include "channel/agent_address.h"
#include "channel/agent_info.h"
#include "channel/control.h"
#include "channel/socket_io.h"
#include "channel/transport/uds/transport.h"
#include "common/cli_common.h"
#include "common/cli_json.h"
#include "common/result_document.h"
#include "common/log.h"
#include "common/units.h"

namespace deputy::tools {
namespace {

namespace control = channel::control;

struct InfoFlags {
    std::string socket;
    std::string token_file;
    std::string format = "text";
    std::string save_config;  // --save-config FILE
    double timeout_s = 1.0;
    cli::LogFlags log;
};

// The "placement" section: where the agent's threads may run and did run,
// how long each ran and how long it waited for a CPU while runnable.
void print_placement(const nlohmann::json &p) {
    const std::string layout = p.value("layout", "?");
    auto cpus = [&](const char *key) {
        const std::string list = p.value(key, "");
        return list.empty() ? std::string("any") : list;
    };
    std::string what;
    if (layout == "shared") what = "nothing pinned";
    else if (layout == "cpus") what = "engines pinned by cpus, the service thread not";
    else what = "agent CPUs " + cpus("agent_cpus") + ", ranks' CPUs " + cpus("rank_cpus");
    std::printf("  placement %s (%s): %s\n", layout.c_str(), p.value("topology", "?").c_str(),
                what.c_str());
    std::printf("    %-10s %8s %-12s %5s %12s %12s %10s\n", "thread", "tid", "allowed", "last",
                "busy(ms)", "waiting(ms)", "timeslices");
    for (const auto &t : p["threads"]) {
        const bool stats = t.contains("busy_ns");
        std::printf("    %-10s %8d %-12s %5d %12s %12s %10s\n", t.value("name", "?").c_str(),
                    t.value("tid", 0), t.value("allowed_cpus", "").c_str(), t.value("last_cpu", -1),
                    stats ? fmt::format("{:.2f}", t["busy_ns"].get<uint64_t>() / 1e6).c_str() : "-",
                    stats ? fmt::format("{:.2f}", t["wait_ns"].get<uint64_t>() / 1e6).c_str() : "-",
                    stats ? std::to_string(t["timeslices"].get<uint64_t>()).c_str() : "-");
    }
    // What each engine did (busy above counts its idle polling too).
    for (const auto &t : p["threads"])
        if (t.contains("work_ns"))
            std::printf("    engine %u: %.0f %% of the engines' work (%.2f s), %llu descriptors, "
                        "%s moved, %llu queued\n",
                        t["engine"].get<unsigned>(), 100.0 * t["work_share"].get<double>(),
                        double(t["work_ns"].get<uint64_t>()) / 1e9,
                        (unsigned long long)t["descriptors"].get<uint64_t>(),
                        units::format_size(t["bytes"].get<uint64_t>()).c_str(),
                        (unsigned long long)t["queued"].get<uint64_t>());
    const std::string clients = p.value("client_cpus", "");
    std::printf("  engines' CPUs %s; clients' CPUs %s\n", p.value("engine_cpus", "?").c_str(),
                clients.empty() ? "(no client)" : clients.c_str());
    if (p.contains("warning"))
        std::printf("  warning: %s\n", p["warning"].get<std::string>().c_str());
}

// The device as `accel-config list` shows one: groups, their engines and
// queues with each queue's attributes.
void print_device(const nlohmann::json &d) {
    std::printf("  device %s: wait %s, NT stores from %s bytes%s%s\n",
                d.value("dev", std::string("?")).c_str(), d.value("wait_mode", std::string("?")).c_str(),
                d.contains("nt_threshold") && d["nt_threshold"].get<uint64_t>() != 0
                    ? std::to_string(d["nt_threshold"].get<uint64_t>()).c_str()
                    : "the default",
                d.contains("cpu_list") ? ", engines on CPUs " : "",
                d.value("cpu_list", std::string()).c_str());
    for (const auto &g : d["groups"]) {
        std::string engines;
        for (const auto &e : g["grouped_engines"])
            engines += (engines.empty() ? "" : ", ") + e["dev"].get<std::string>();
        std::printf("    %s: engines %s\n", g["dev"].get<std::string>().c_str(), engines.c_str());
        for (const auto &q : g["grouped_workqueues"])
            std::printf("      %s %s, size %u, priority %u, threshold %u, max_batch_size %u, "
                        "max_transfer_size %llu, block_on_fault %d\n",
                        q["dev"].get<std::string>().c_str(), q["mode"].get<std::string>().c_str(),
                        q["size"].get<unsigned>(), q["priority"].get<unsigned>(),
                        q["threshold"].get<unsigned>(), q["max_batch_size"].get<unsigned>(),
                        (unsigned long long)q["max_transfer_size"].get<uint64_t>(),
                        q["block_on_fault"].get<int>());
    }
}

// --save-config: the agent's device as accel-config JSON, as `accel-config
// save-config` writes one; `deputy agent --config FILE` loads it back.
bool save_device(const nlohmann::json &j, const std::string &path) {
    if (!j.contains("device")) {
        std::fprintf(stderr, "--save-config: this agent's answer has no device (an older agent?)\n");
        return false;
    }
    std::string error;
    if (!cli::write_json_file("--save-config", path, nlohmann::json::array({j["device"]}),
                              &error)) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return false;
    }
    std::printf("saved the agent's device to %s (deputy agent --config %s loads it)\n",
                path.c_str(), path.c_str());
    return true;
}

int ask(const InfoFlags &f) {
    const std::string address = channel::resolve_agent_address(f.socket);
    const int64_t timeout = int64_t(f.timeout_s * 1e9);
    std::string token;
    if (!f.token_file.empty()) {
        std::ifstream in(f.token_file);
        std::getline(in, token);
    } else if (const char *env = std::getenv("DEPUTY_TOKEN")) {
        token = env;
    }
    std::string text, error;
    const dp_status_t s = channel::request_agent_info(address, token, timeout, &text, &error);
    if (s == DP_ERR_NO_AGENT || s == DP_ERR_IO) {
        std::printf("agent: %s\n", error.c_str());
        return 1;
    }
    if (s != DP_OK) {
        std::printf("agent: %s refused: %s (%s)\n", address.c_str(), error.c_str(),
                    dp_status_name(s));
        return 1;
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!f.save_config.empty()) {
        if (j.is_discarded()) {
            std::fprintf(stderr, "--save-config: %s sent unreadable info\n", address.c_str());
            return 1;
        }
        return save_device(j, f.save_config) ? 0 : 1;
    }
    if (f.format == "json") {
        std::printf("%s\n", text.c_str());
        return 0;
    }
    if (j.is_discarded()) {
        std::printf("agent: %s sent unreadable info\n", address.c_str());
        return 1;
    }
    std::printf("agent: reachable at %s\n", address.c_str());
    std::printf("  version %s, pid %d, up %.1f s, token %s\n",
                j["version"].get<std::string>().c_str(), j["pid"].get<int>(),
                j["uptime_s"].get<double>(), j["token_required"].get<bool>() ? "required" : "not required");
    std::printf("  engines %u, queues %u, run by %s\n", j["engines"].get<unsigned>(),
                j["queues"].get<unsigned>(), j.value("backend", std::string("?")).c_str());
    if (j.contains("idxd"))
        std::printf("  idxd %s: %llu descriptors submitted, %llu refused and retried, %llu page "
                    "faults resumed, %llu run on the CPU\n",
                    j["idxd"]["queue"].get<std::string>().c_str(),
                    j["idxd"]["submitted"].get<unsigned long long>(),
                    j["idxd"]["retries"].get<unsigned long long>(),
                    j["idxd"]["faults"].get<unsigned long long>(),
                    j["idxd"]["fallbacks"].get<unsigned long long>());
    if (j.contains("device")) print_device(j["device"]);
    if (j.contains("listen")) {
        const auto &l = j["listen"];
        std::printf("  remote clients at %s (%s): %llu connections, %llu admitted, %llu failed and "
                    "%llu cut handshakes\n",
                    l["address"].get<std::string>().c_str(),
                    l["secure"].get<bool>() ? "secure session" : "IN CLEAR",
                    (unsigned long long)l["connections"].get<uint64_t>(),
                    (unsigned long long)l["admitted"].get<uint64_t>(),
                    (unsigned long long)l["failed_handshakes"].get<uint64_t>(),
                    (unsigned long long)l["evicted_handshakes"].get<uint64_t>());
    }
    const auto &clients = j["clients"];
    std::printf("  clients %zu\n", clients.size());
    if (!clients.empty())
        std::printf("    %4s %8s %6s %10s %6s %8s %12s %8s %8s %7s  %s\n", "id", "pid", "uid",
                    "pool(KiB)", "ring", "ranges", "descriptors", "direct", "staged", "denied",
                    "cpus");
    for (const auto &c : clients)
        std::printf("    %4u %8d %6u %10llu %6u %8zu %12llu %8llu %8llu %7llu  %s\n",
                    c["id"].get<unsigned>(), c["pid"].get<int>(), c["uid"].get<unsigned>(),
                    (unsigned long long)(c["pool_bytes"].get<uint64_t>() >> 10),
                    c["ring_size"].get<unsigned>(), c["registered_ranges"].get<size_t>(),
                    (unsigned long long)c["descriptors"].get<uint64_t>(),
                    (unsigned long long)c["direct"].get<uint64_t>(),
                    (unsigned long long)c["staged"].get<uint64_t>(),
                    (unsigned long long)c["denied"].get<uint64_t>(),
                    c.value("remote", std::string()).empty()
                        ? c.value("cpus", std::string("?")).c_str()
                        : ("remote " + c["remote"].get<std::string>()).c_str());
    if (j.contains("placement")) print_placement(j["placement"]);
    if (j.contains("internode")) std::printf("  %s\n", j["internode"].get<std::string>().c_str());
    if (j.contains("teams") && !j["teams"].empty()) {
        std::printf("  teams %zu\n", j["teams"].size());
        for (const auto &t : j["teams"]) {
            std::string steps;
            if (t.contains("inter_node_steps"))
                for (const auto &[name, n] : t["inter_node_steps"].items())
                    steps += " " + name + "=" + std::to_string(n.get<uint64_t>());
            std::printf("    %u '%s' size %u (%zu here)%s%s, %llu operation(s), %zu post(s) "
                        "queued%s%s%s\n",
                        t["id"].get<unsigned>(), t["key"].get<std::string>().c_str(),
                        t["size"].get<unsigned>(), t.value("local_ranks", size_t(0)),
                        t.value("spans_nodes", false) ? ", spans nodes" : "",
                        t["broken"].get<bool>() ? ", broken" : "",
                        (unsigned long long)t["operations"].get<uint64_t>(),
                        t.value("queued_posts", size_t(0)),
                        t.value("running", false) ? ", one running" : "",
                        steps.empty() ? "" : "; inter-node steps:", steps.c_str());
        }
    }
    std::printf("  counters:");
    for (const auto &[key, value] : j["counters"].items())
        std::printf(" %s=%llu", key.c_str(), (unsigned long long)value.get<uint64_t>());
    std::printf("\n");
    return 0;
}

}  // namespace

void register_info(CLI::App &app) {
    auto f = std::make_shared<InfoFlags>();
    CLI::App *cmd = app.add_subcommand(
        "info", "is an agent reachable? version, engines, clients, placement (where its threads "
                "run, busy and waiting time), counters");
    cmd->add_option("--socket", f->socket, "the agent's socket (default as for `deputy agent`)");
    cmd->add_option("--token-file", f->token_file, "token for an agent that requires one (or DEPUTY_TOKEN)");
    cmd->add_option("--format", f->format, "text or json (the agent's answer as is)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    cmd->add_option("--timeout", f->timeout_s, "seconds to wait for the agent")->capture_default_str();
    cmd->add_option("--save-config", f->save_config,
                    "write the agent's device as accel-config JSON to this file (as accel-config "
                    "save-config does); deputy agent --config FILE loads it back");
    cli::add_log_flags(*cmd, &f->log);
    cli::add_json_config(*cmd);
    cmd->callback([f] {
        cli::apply_log_flags(f->log);
        // Not finding an agent is an answer here, not a library error.
        if (f->log.sdk_log_level.empty()) log::set_sdk_level(*log::parse_level("20"));
        int rc = ask(*f);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::tools
