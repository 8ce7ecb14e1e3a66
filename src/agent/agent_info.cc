// `deputy info`: the agent's configuration, clients and counters as JSON.
// Separate because it only reads the agent's state and is no part of serving.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "common/affinity.h"
#include "common/timing.h"
#include "mover/idxd/hw_queue.h"
#include <deputy/version.h>

namespace deputy::agent {

std::string Agent::info_json() const {
    nlohmann::json j;
    j["version"] = DEPUTY_VERSION_STRING;
    j["pid"] = getpid();
    j["socket"] = address_;
    if (gate_) {
        const RemoteGate::Counters g = gate_->counters();
        j["listen"] = {{"address", gate_->address()},
                       {"secure", gate_->secure()},
                       {"connections", g.accepted},
                       {"admitted", g.admitted},
                       {"failed_handshakes", g.failed},
                       {"evicted_handshakes", g.evicted}};
    }
    j["uptime_s"] = double(timing::now_ns() - started_ns_) / 1e9;
    j["engines"] = config_.device.total_engines();
    j["queues"] = device_->num_wqs();
    j["backend"] = device_->backend_description();
    // The device as accel-config describes one (`deputy info` lists it;
    // --save-config writes it for `deputy agent --config` to load back).
    j["device"] = nlohmann::json::parse(mover::config_to_json(device_->config()))[0];
    if (const mover::idxd::HwQueue *hw = device_->hw_queue()) {
        const mover::idxd::HwCounters &c = hw->counters();
        j["idxd"] = {{"queue", hw->description()},
                     {"submitted", c.submitted.load(std::memory_order_relaxed)},
                     {"retries", c.retries.load(std::memory_order_relaxed)},
                     {"faults", c.faults.load(std::memory_order_relaxed)},
                     {"fallbacks", c.fallbacks.load(std::memory_order_relaxed)}};
    }
    j["token_required"] = !config_.token.empty();
    j["limits"] = {{"pool_bytes", config_.pool_bytes},
                   {"max_pool_bytes", config_.max_pool_bytes},
                   {"max_total_pool_bytes", config_.max_total_pool_bytes},
                   {"ring_size", config_.ring_size},
                   {"max_clients", config_.max_clients},
                   {"max_connecting", config_.max_connecting},
                   {"max_registrations", config_.max_registrations},
                   {"max_heap_bytes", config_.max_heap_bytes},
                   {"max_teams_per_client", config_.max_teams_per_client},
                   {"max_pending_joins", config_.max_pending_joins},
                   {"max_staged_bytes", config_.max_staged_bytes},
                   {"max_direct_bytes", config_.max_direct_bytes}};
    nlohmann::json clients = nlohmann::json::array();
    uint64_t direct = 0;
    for (const ClientSession *s : attached_) {
        const uint64_t bounced = s->space().bounced();
        direct += bounced;
        clients.push_back({{"id", s->id},
                           {"pid", s->creds.pid},
                           {"uid", s->creds.uid},
                           {"remote", s->remote ? s->peer : ""},
                           {"identity", s->remote                  ? "secure session"
                                        : s->process->verified() ? "verified"
                                                                 : "unverified"},
                           {"pool_bytes", s->pool_bytes},
                           {"ring_size", s->ring_size},
                           {"registered_ranges", s->space().range_count()},
                           {"descriptors", s->counters.forwarded},
                           {"direct", bounced},
                           {"staged", s->counters.staged},
                           {"denied", s->counters.denied},
                           {"cpus", s->remote ? "" : affinity::format_cpu_list(
                                                         affinity::allowed_cpus(s->creds.pid))}});
    }
    j["clients"] = clients;
    placement_info(&j);
    teams_->info(&j);
    dp_mover_stats_t stats{};
    stats.size = sizeof(stats);
    device_->stats(&stats);
    j["counters"] = {{"connections", counters_.connections},
                     {"connecting", connecting_},
                     {"refused", counters_.refused},
                     {"attached", counters_.attached},
                     {"detached", counters_.detached},
                     {"dropped", counters_.dropped},
                     {"retiring", retiring_.size()},
                     {"info_requests", counters_.info_requests},
                     {"services", counters_.services},
                     {"team_proxies", counters_.team_proxies},
                     {"descriptors_forwarded", counters_.forwarded},
                     {"descriptors_direct", direct},
                     {"descriptors_staged", counters_.staged},
                     {"denied", counters_.denied},
                     {"device_submitted", stats.submitted},
                     {"device_completed", stats.completed},
                     {"device_failed", stats.failed},
                     {"device_bytes", stats.bytes}};
    return j.dump();
}

}  // namespace deputy::agent
