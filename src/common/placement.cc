#include "common/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "common/affinity.h"

namespace deputy {
namespace {

constexpr const char *kExpected = "expected shared, last, smt, a number of cores or cpus:LIST";

std::string core_word(size_t n) { return n == 1 ? "core" : "cores"; }

// Interleaves the cores' CPUs: every core's first, then every core's second...
std::vector<int> spread(const std::vector<const TopologyCore *> &cores, size_t first_sibling) {
    std::vector<int> out;
    size_t most = 0;
    for (const TopologyCore *c : cores) most = std::max(most, c->cpus.size());
    for (size_t s = first_sibling; s < most; ++s)
        for (const TopologyCore *c : cores)
            if (s < c->cpus.size()) out.push_back(c->cpus[s]);
    return out;
}

std::vector<int> sorted(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

// The cores `last` or a count reserves: round after round, each package's
// last core not yet taken, package 0 first; `limit` < 0: one round.
std::vector<const TopologyCore *> cores_from_the_end(const Topology &t, int limit) {
    std::vector<std::vector<const TopologyCore *>> by_package(size_t(t.packages));
    for (const TopologyCore &c : t.cores) {
        if (c.package >= int(by_package.size())) by_package.resize(size_t(c.package) + 1);
        by_package[size_t(c.package)].push_back(&c);
    }
    std::vector<const TopologyCore *> out;
    for (size_t round = 0;; ++round) {
        bool any = false;
        for (const auto &cores : by_package) {
            if (round >= cores.size()) continue;
            if (limit >= 0 && int(out.size()) == limit) return out;
            out.push_back(cores[cores.size() - 1 - round]);
            any = true;
        }
        if (!any || limit < 0) return out;
    }
}

}  // namespace

std::string cpus_phrase(const std::vector<int> &cpus) {
    if (cpus.empty()) return "no CPU";
    return (sorted(cpus).size() == 1 ? "CPU " : "CPUs ") + affinity::format_cpu_list(cpus);
}

std::vector<int> cpus_in_both(const std::vector<int> &a, const std::vector<int> &b) {
    std::vector<int> x = sorted(a), y = sorted(b), out;
    std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out));
    return out;
}

std::vector<int> Placement::rank_cpus() const {
    std::vector<int> out;
    for (const auto &slot : rank_slots) out.insert(out.end(), slot.begin(), slot.end());
    return sorted(std::move(out));
}

dp_status_t parse_agent_cores(std::string_view text, std::string_view flag, AgentCores *out,
                              std::string *error) {
    *out = AgentCores{};
    out->text = std::string(text);
    auto bad = [&](const std::string &why) {
        *error = fmt::format("{} {}: {}", flag, text, why);
        return DP_ERR_INVALID;
    };
    if (text.empty()) {
        *error = fmt::format("{}: empty; {}", flag, kExpected);
        return DP_ERR_INVALID;
    }
    if (text == "shared") return DP_OK;
    if (text == "last") {
        out->kind = AgentCoresKind::kLast;
        return DP_OK;
    }
    if (text == "smt") {
        out->kind = AgentCoresKind::kSmt;
        return DP_OK;
    }
    if (text.rfind("cpus:", 0) == 0) {
        if (text.size() == 5) {
            *error =
                fmt::format("{} cpus: needs a CPU list after the colon (cpus:6-7,14-15)", flag);
            return DP_ERR_INVALID;
        }
        std::string why;
        if (affinity::parse_cpu_list(text.substr(5), &out->cpus, &why) != DP_OK) return bad(why);
        // Each CPU once, in the order first given (engines take them in turn).
        std::vector<int> unique;
        for (int cpu : out->cpus)
            if (std::find(unique.begin(), unique.end(), cpu) == unique.end()) unique.push_back(cpu);
        out->cpus = std::move(unique);
        out->kind = AgentCoresKind::kCpus;
        return DP_OK;
    }
    int count = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (ec == std::errc() && end == text.data() + text.size()) {
        if (count < 1) return bad("reserve at least 1 core (shared reserves none)");
        out->kind = AgentCoresKind::kCount;
        out->count = count;
        return DP_OK;
    }
    if (text.find_first_not_of("0123456789,-") == std::string_view::npos)
        return bad(fmt::format("a CPU list is written cpus:{} (a bare number is a count of cores)",
                               text));
    return bad(kExpected);
}

dp_status_t compute_placement(const Topology &t, const AgentCores &request, std::string_view flag,
                              Placement *out, std::string *error) {
    *out = Placement{};
    out->request = request;
    auto bad = [&](const std::string &why) {
        *error = fmt::format("{} {}: {}", flag, request.text, why);
        return DP_ERR_INVALID;
    };
    const std::string machine = t.summary();
    switch (request.kind) {
        case AgentCoresKind::kShared:
            return DP_OK;
        case AgentCoresKind::kLast:
        case AgentCoresKind::kCount: {
            const bool last = request.kind == AgentCoresKind::kLast;
            if (!last && size_t(request.count) >= t.cores.size())
                return bad(fmt::format(
                    "reserving {} {} leaves none for the ranks: this machine has {} ({}); at "
                    "most {}",
                    request.count, core_word(size_t(request.count)), t.cores.size(), machine,
                    t.cores.size() - 1));
            const std::vector<const TopologyCore *> reserved =
                cores_from_the_end(t, last ? -1 : request.count);
            if (reserved.size() >= t.cores.size())
                return bad(fmt::format("reserving the last core of each package leaves no core "
                                       "for the ranks ({}){}",
                                       machine,
                                       t.has_smt() ? fmt::format("; {} smt puts the engines on "
                                                                 "SMT siblings instead",
                                                                 flag)
                                                   : ""));
            for (const TopologyCore &c : t.cores)
                if (std::find(reserved.begin(), reserved.end(), &c) == reserved.end())
                    out->rank_slots.push_back(c.cpus);
            out->engine_cpus = spread(reserved, 0);
            out->agent_cpus = sorted(out->engine_cpus);
            out->agent_cores = int(reserved.size());
            return DP_OK;
        }
        case AgentCoresKind::kCpus: {
            std::vector<const TopologyCore *> touched;
            for (int cpu : request.cpus) {
                const TopologyCore *core = t.core_of(cpu);
                if (core == nullptr)
                    return bad(fmt::format("CPU {} does not exist here (this machine's CPUs: {})",
                                           cpu, affinity::format_cpu_list(t.all_cpus())));
                if (std::find(touched.begin(), touched.end(), core) == touched.end())
                    touched.push_back(core);
            }
            out->agent_cpus = sorted(request.cpus);
            for (const TopologyCore &c : t.cores) {
                std::vector<int> slot;
                for (int cpu : c.cpus)
                    if (!std::binary_search(out->agent_cpus.begin(), out->agent_cpus.end(), cpu))
                        slot.push_back(cpu);
                if (!slot.empty()) out->rank_slots.push_back(std::move(slot));
            }
            if (out->rank_slots.empty())
                return bad(fmt::format("that is every CPU of this machine ({}); leave at least "
                                       "one for the ranks",
                                       affinity::format_cpu_list(t.all_cpus())));
            out->engine_cpus = request.cpus;
            out->agent_cores = int(touched.size());
            return DP_OK;
        }
        case AgentCoresKind::kSmt: {
            if (!t.has_smt())
                return bad(fmt::format("this machine has no SMT ({}); {} last reserves a whole "
                                       "core instead",
                                       machine, flag));
            std::vector<const TopologyCore *> backwards;
            for (auto it = t.cores.rbegin(); it != t.cores.rend(); ++it) backwards.push_back(&*it);
            for (const TopologyCore &c : t.cores) out->rank_slots.push_back({c.cpus.front()});
            // From the last core down: a job with fewer ranks than cores
            // leaves its last cores idle, and an engine beside an idle CPU
            // has the core to itself.
            out->engine_cpus = spread(backwards, 1);
            out->agent_cpus = sorted(out->engine_cpus);
            return DP_OK;
        }
    }
    return bad(kExpected);
}

std::string shared_advice(const Topology &t, int ranks) {
    // The layout if it exists here, and the ranks it leaves a slot each.
    auto layout = [&](const char *text, Placement *p) {
        AgentCores request;
        std::string ignored;
        return parse_agent_cores(text, "", &request, &ignored) == DP_OK &&
               compute_placement(t, request, "", p, &ignored) == DP_OK;
    };
    auto fits = [&](const Placement &p) { return ranks <= 0 || int(p.rank_slots.size()) >= ranks; };
    Placement last, one, smt;
    const bool have_last = layout("last", &last), have_one = layout("1", &one);
    struct Candidate {
        const char *name;
        bool have;
        const Placement *p;
    };
    for (const Candidate &c : {Candidate{"last", have_last, &last}, Candidate{"1", have_one, &one}})
        if (c.have && fits(*c.p))
            return fmt::format("--agent-cores {} gives the engines {} and the ranks {}", c.name,
                               cpus_phrase(c.p->agent_cpus), cpus_phrase(c.p->rank_cpus()));
    if (layout("smt", &smt) && fits(smt))
        return fmt::format("--agent-cores smt puts the engines on the SMT siblings of the ranks' "
                           "cores ({}; the ranks on {})",
                           cpus_phrase(smt.agent_cpus), cpus_phrase(smt.rank_cpus()));
    if (!have_one)
        return fmt::format("this machine has one core ({}): nothing to spare for the engines",
                           t.summary());
    const bool last_is_one = have_last && last.rank_slots.size() == one.rank_slots.size();
    const size_t most = one.rank_slots.size();
    return fmt::format("this machine has no core to spare for them ({} ranks; {}); with at most "
                       "{} rank{}, --agent-cores {} gives the engines a core of their own",
                       ranks, t.summary(), most, most == 1 ? "" : "s", last_is_one ? "last" : "1");
}

}  // namespace deputy
