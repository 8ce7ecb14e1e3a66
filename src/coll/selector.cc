#include "coll/selector.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>
#include <utility>
#include <vector>

namespace deputy::coll {
namespace {

bool power_of_two(int x) {
    return x > 0 && (x & (x - 1)) == 0;
}

const char *rule_for(const CollectiveArgs &args, const SelectorTunables &t) {
    const size_t n = args.count * dp_dtype_size(args.dtype);
    const auto p = static_cast<size_t>(args.size);
    switch (args.collective) {
        case Collective::allreduce:
            if (n < t.allreduce_small_bytes) return "recursive_doubling";
            if (n >= t.allreduce_ring_bytes && !power_of_two(args.size)) return "ring";
            return "rabenseifner";
        case Collective::reduce_scatter:
            return "ring";
        case Collective::allgather:
            return p * n < t.allgather_small_bytes ? "recursive_doubling" : "ring";
        case Collective::alltoall:
            return n <= t.alltoall_bruck_bytes && p >= t.alltoall_bruck_min_team ? "bruck"
                                                                                 : "pairwise";
        case Collective::bcast:
            return n >= t.bcast_chain_bytes && p >= 3 ? "chain" : "binomial";
        case Collective::barrier:
            return "dissemination";
        case Collective::alltoallv:
        case Collective::allgatherv:
        case Collective::gatherv:
        case Collective::scatterv:
        case Collective::reduce_scatterv:
            return "";  // no schedule: CollectiveArgs has one count, not one per peer
        case Collective::reduce:
        case Collective::gather:
        case Collective::scatter:
        case Collective::scan:
        case Collective::exscan:
            return "";  // no schedule yet (CollectiveInfo::scheduled): the agents' plans run them
    }
    return "";
}

constexpr std::pair<const char *, size_t SelectorTunables::*> kTunables[] = {
    {"allreduce_small_bytes", &SelectorTunables::allreduce_small_bytes},
    {"allreduce_ring_bytes", &SelectorTunables::allreduce_ring_bytes},
    {"allgather_small_bytes", &SelectorTunables::allgather_small_bytes},
    {"alltoall_bruck_bytes", &SelectorTunables::alltoall_bruck_bytes},
    {"alltoall_bruck_min_team", &SelectorTunables::alltoall_bruck_min_team},
    {"bcast_chain_bytes", &SelectorTunables::bcast_chain_bytes},
    {"chunk_bytes", &SelectorTunables::chunk_bytes},
};

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

}  // namespace

Selection select_algorithm(const CollectiveArgs &args, const SelectorConfig &config) {
    const auto c = static_cast<size_t>(args.collective);
    const Algorithm *algorithm = config.forced[c];
    if (algorithm == nullptr)
        algorithm = find_algorithm(args.collective, rule_for(args, config.tunables));
    return {algorithm, algorithm && algorithm->pipelines ? config.tunables.chunk_bytes : 0};
}

dp_status_t set_overrides(SelectorConfig &config, std::string_view spec, std::string *error) {
    SelectorConfig updated = config;
    while (!spec.empty()) {
        const size_t comma = spec.find(',');
        const std::string_view item = trim(spec.substr(0, comma));
        spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
        if (item.empty()) continue;
        const size_t equals = item.find('=');
        const auto bad = [&](std::string why) {
            if (error != nullptr) *error = fmt::format("'{}': {}", item, why);
            return DP_ERR_INVALID;
        };
        if (equals == std::string_view::npos) return bad("expected collective=algorithm");
        const auto collective = collective_from_name(trim(item.substr(0, equals)));
        if (!collective) return bad("unknown collective");
        const std::string_view name = trim(item.substr(equals + 1));
        const Algorithm *algorithm = nullptr;
        if (name != "auto") {
            algorithm = find_algorithm(*collective, name);
            if (algorithm == nullptr) {
                std::vector<std::string_view> names;
                for (const Algorithm &a : all_algorithms()) {
                    if (a.collective == *collective) names.emplace_back(a.name);
                }
                return bad(fmt::format("unknown algorithm; {} has auto, {}",
                                       collective_name(*collective), fmt::join(names, ", ")));
            }
        }
        updated.forced[static_cast<size_t>(*collective)] = algorithm;
    }
    config = updated;
    return DP_OK;
}

dp_status_t set_tunable(SelectorTunables &tunables, std::string_view name, size_t value) {
    for (const auto &[key, member] : kTunables) {
        if (name == key) {
            tunables.*member = value;
            return DP_OK;
        }
    }
    return DP_ERR_INVALID;
}

}  // namespace deputy::coll
