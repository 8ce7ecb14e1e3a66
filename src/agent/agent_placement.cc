// Where the agent's threads run: the service thread pinned to the layout's
// CPUs (--agent-cores; the engines pin themselves, mover/engine.cc), the
// line the agent logs when it starts, and `deputy info`'s "placement"
// section: each thread's CPUs and what the scheduler says about it, the
// attached clients' CPUs, and a warning when those overlap the engines'.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "common/affinity.h"
#include "common/log.h"
#include "common/thread_sched.h"

namespace deputy::agent {
namespace {

// "shared", "last", "cpus:1"...; "cpus" when the `cpus` option pinned the
// engines (and nothing else).
std::string layout_name(const AgentConfig &c) {
    if (!c.agent_cores.empty()) return c.placement.request.text;
    return c.device.cpus.empty() ? "shared" : "cpus";
}

std::string engines_phrase(const mover::DeviceConfig &device) {
    const uint32_t n = device.total_engines();
    if (device.cpus.empty()) return fmt::format("{} engine{} unpinned", n, n == 1 ? "" : "s");
    std::string out;
    for (uint32_t e = 0; e < n; ++e)
        out += fmt::format("{}engine {} on CPU {}", e ? ", " : "", e,
                           device.cpus[e % device.cpus.size()]);
    return out;
}

// One of the agent's threads; its CPUs go to *allowed too.
nlohmann::json thread_json(const std::string &name, pid_t tid, std::vector<int> *allowed) {
    ThreadSched s;
    nlohmann::json j = {{"name", name}, {"tid", tid}};
    const bool read = tid != 0 && read_thread_sched(getpid(), tid, &s);
    allowed->insert(allowed->end(), s.allowed_cpus.begin(), s.allowed_cpus.end());
    if (!read) {
        j["allowed_cpus"] = affinity::format_cpu_list(s.allowed_cpus);
        j["last_cpu"] = s.last_cpu;
        j["schedstat"] = false;  // gone, or a kernel without CONFIG_SCHED_INFO
        return j;
    }
    j["allowed_cpus"] = affinity::format_cpu_list(s.allowed_cpus);
    j["last_cpu"] = s.last_cpu;
    j["busy_ns"] = s.on_cpu_ns;
    j["wait_ns"] = s.run_wait_ns;
    j["timeslices"] = s.timeslices;
    return j;
}

}  // namespace

void Agent::pin_service_thread() {
    service_tid_ = current_tid();
    const std::vector<int> &cpus = config_.placement.agent_cpus;
    if (!cpus.empty() && affinity::pin_current_thread_to(cpus) != DP_OK)
        DP_LOG_WARN("agent: the service thread runs unpinned: {} not available",
                    cpus_phrase(cpus));
}

std::string Agent::placement_line() const {
    const Placement &p = config_.placement;
    const std::string engines = engines_phrase(config_.device);
    if (!config_.agent_cores.empty() && p.pinned())
        return fmt::format("agent: placement {} ({}): {}; the service thread on {}; the ranks' "
                           "CPUs: {}",
                           p.request.text, config_.topology, engines, cpus_phrase(p.agent_cpus),
                           affinity::format_cpu_list(p.rank_cpus()));
    if (!config_.device.cpus.empty())
        return fmt::format("agent: engines pinned by cpus: {}; the service thread unpinned",
                           engines);
    return fmt::format("agent: placement shared: {} and the service thread unpinned, on {} with "
                       "the ranks{}",
                       engines, cpus_phrase(affinity::allowed_cpus(0)),
                       config_.agent_cores.empty() ? " (--agent-cores gives them CPUs of their "
                                                     "own; docs/agent.md)"
                                                   : "");
}

void Agent::placement_info(nlohmann::json *out) const {
    const Placement &p = config_.placement;
    nlohmann::json j;
    j["layout"] = layout_name(config_);
    j["topology"] = topology_.summary();
    j["agent_cpus"] = affinity::format_cpu_list(p.agent_cpus);
    j["rank_cpus"] = affinity::format_cpu_list(p.rank_cpus());
    nlohmann::json threads = nlohmann::json::array();
    std::vector<int> service_cpus, engine_cpus;
    threads.push_back(thread_json("service", service_tid_, &service_cpus));
    const auto &engines = device_->engines();
    uint64_t all_work_ns = 0;
    for (const auto &e : engines) all_work_ns += e->counters().busy_ns.load(std::memory_order_relaxed);
    for (size_t e = 0; e < engines.size(); ++e) {
        nlohmann::json t =
            thread_json(fmt::format("engine {}", e), engines[e]->tid(), &engine_cpus);
        t["engine"] = e;
        t["pinned_cpu"] = engines[e]->cpu();
        // Held in a call into a client's memory and replaced by a relief
        // (mover/stall_watch.h): it leaves once the call returns.
        t["held"] = engines[e]->relieved;
        // What it did, beside what the scheduler says (busy_ns counts its
        // idle polling too): time working (mover::EngineCounters::busy_ns)
        // and its share of all the engines' working time, and the
        // descriptors waiting in its group's queues, which every engine of
        // the group takes from.
        const mover::EngineCounters &c = engines[e]->counters();
        const uint64_t work_ns = c.busy_ns.load(std::memory_order_relaxed);
        t["work_ns"] = work_ns;
        t["work_share"] = all_work_ns ? double(work_ns) / double(all_work_ns) : 0.0;
        t["descriptors"] = c.completed.load(std::memory_order_relaxed);
        t["bytes"] = c.bytes.load(std::memory_order_relaxed);
        uint64_t queued = 0;
        for (const mover::WqState *wq : engines[e]->group()->wqs) queued += wq->ring.occupancy();
        t["queued"] = queued;
        threads.push_back(std::move(t));
    }
    j["threads"] = std::move(threads);
    std::vector<int> client_cpus;
    for (const ClientSession *s : attached_) {
        if (s->remote) continue;  // its CPUs are another machine's
        const std::vector<int> cpus = affinity::allowed_cpus(s->creds.pid);
        client_cpus.insert(client_cpus.end(), cpus.begin(), cpus.end());
    }
    j["engine_cpus"] = affinity::format_cpu_list(engine_cpus);
    j["client_cpus"] = affinity::format_cpu_list(client_cpus);
    const std::vector<int> shared = cpus_in_both(engine_cpus, client_cpus);
    j["shared_cpus"] = affinity::format_cpu_list(shared);
    if (!shared.empty())
        j["warning"] = fmt::format("the engines and the clients share {}: a busy client delays "
                                   "the engines; {}",
                                   cpus_phrase(shared),
                                   shared_advice(topology_, int(attached_.size())));
    (*out)["placement"] = std::move(j);
}

}  // namespace deputy::agent
