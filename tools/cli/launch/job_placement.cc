#include "cli/launch/job_placement.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/affinity.h"

namespace deputy::launch {

std::vector<int> JobPlacement::rank_cpus() const {
    return binds_ranks() ? placement.rank_cpus() : topology.all_cpus();
}

std::vector<int> JobPlacement::engine_cpus() const {
    return placement.pinned() ? placement.agent_cpus : topology.all_cpus();
}

bool plan_job_placement(const std::string &agent_cores, JobPlacement *out, std::string *error) {
    *out = JobPlacement{};
    out->requested = !agent_cores.empty();
    if (load_machine_topology(&out->topology, error) != DP_OK) return false;
    if (!out->requested) return true;
    AgentCores request;
    return parse_agent_cores(agent_cores, "--agent-cores", &request, error) == DP_OK &&
           compute_placement(out->topology, request, "--agent-cores", &out->placement, error) ==
               DP_OK;
}

std::string describe_job_placement(const JobPlacement &p, int ranks) {
    const Placement &pl = p.placement;
    std::string text = fmt::format("placement {} ({}): ", pl.request.text, p.topology.summary());
    if (!pl.pinned()) return text + "nothing pinned";
    text += fmt::format("the agent on {}, the ranks on {}", cpus_phrase(pl.agent_cpus),
                        cpus_phrase(pl.rank_cpus()));
    const size_t slots = pl.rank_slots.size();
    if (ranks > 0 && size_t(ranks) > slots)
        text += fmt::format(" ({} ranks on {} {}: they share {})", ranks, slots,
                            slots == 1 ? "core" : "cores", slots == 1 ? "it" : "them");
    return text;
}

std::vector<int> running_engine_cpus(const JobPlacement &p, const std::string &info_json) {
    const nlohmann::json j = nlohmann::json::parse(info_json, nullptr, false);
    std::vector<int> cpus;
    std::string ignored;
    if (j.is_object() && j.contains("placement") && j["placement"].contains("engine_cpus") &&
        j["placement"]["engine_cpus"].is_string() &&
        affinity::parse_cpu_list(j["placement"]["engine_cpus"].get<std::string>(), &cpus,
                                 &ignored) == DP_OK)
        return cpus;
    return p.topology.all_cpus();
}

std::string overlap_warning(const JobPlacement &p, int ranks, const std::vector<int> &engine_cpus,
                            const std::string &running_agent) {
    if (p.requested && p.placement.request.kind == AgentCoresKind::kShared) return "";
    const std::vector<int> shared = cpus_in_both(p.rank_cpus(), engine_cpus);
    if (shared.empty()) return "";
    if (!running_agent.empty() && p.requested)
        return fmt::format("the agent at {} already runs, its engines on {}: they share {} with "
                           "the ranks; --agent-cores {} placed the ranks only (start that agent "
                           "with --agent-cores {}, or stop it and let the launcher start one)",
                           running_agent, cpus_phrase(engine_cpus), cpus_phrase(shared),
                           p.placement.request.text, p.placement.request.text);
    return fmt::format("the ranks and the agent's engines share {} (placement shared): a busy "
                       "rank delays the engines; {}",
                       cpus_phrase(shared), shared_advice(p.topology, ranks));
}

}  // namespace deputy::launch
