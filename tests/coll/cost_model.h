// How long a team's schedules take under the alpha-beta model of
// docs/algorithms.md, to check its latency and bandwidth columns and that
// chunking really pipelines.
//
// A message costs alpha + beta * bytes and can start once both its send and
// its recv are ready (their dependencies done); each rank has one port out
// and one port in, so its messages in each direction go one at a time. A
// reduce or copy costs gamma * bytes and runs beside the ports. Messages
// are served greedily in order of the time both ends became ready (a list
// schedule: the simulated runtime never idles a free port on purpose).
#pragma once

#include <algorithm>
#include <map>
#include <queue>
#include <tuple>
#include <vector>

#include "coll/schedule.h"

namespace deputy::test {

struct CostModel {
    double alpha = 0;  // per message
    double beta = 0;   // per byte on the wire
    double gamma = 0;  // per byte reduced or copied
};

// The time at which the last step of the team completes; < 0 on deadlock.
inline double makespan(const std::vector<coll::Schedule> &team, const CostModel &m) {
    const size_t p = team.size();
    std::vector<std::vector<uint32_t>> pending(p);
    std::vector<std::vector<double>> ready_at(p), finish(p);
    std::vector<std::vector<std::vector<coll::StepId>>> dependents(p);
    std::vector<double> out_free(p, 0), in_free(p, 0);
    size_t remaining = 0;

    using Channel = std::tuple<int, int, uint32_t>;  // sender, receiver, tag
    std::map<Channel, std::pair<std::vector<coll::StepId>, std::vector<coll::StepId>>> posted;
    // Messages whose two ends are ready, earliest first: (time, sender, send, receiver, recv).
    using Ready = std::tuple<double, int, coll::StepId, int, coll::StepId>;
    std::priority_queue<Ready, std::vector<Ready>, std::greater<>> matched;
    std::vector<std::pair<int, coll::StepId>> ready;

    for (size_t r = 0; r < p; ++r) {
        const auto &s = team[r];
        pending[r].resize(s.steps.size());
        ready_at[r].assign(s.steps.size(), 0);
        finish[r].assign(s.steps.size(), 0);
        dependents[r].resize(s.steps.size());
        remaining += s.steps.size();
        for (coll::StepId i = 0; i < s.steps.size(); ++i) {
            pending[r][i] = s.steps[i].dependency_count;
            for (coll::StepId d : s.dependencies(i)) dependents[r][d].push_back(i);
            if (pending[r][i] == 0) ready.emplace_back(static_cast<int>(r), i);
        }
    }
    double end = 0;
    const auto complete = [&](int r, coll::StepId i, double t) {
        finish[r][i] = t;
        end = std::max(end, t);
        --remaining;
        for (coll::StepId next : dependents[r][i]) {
            ready_at[r][next] = std::max(ready_at[r][next], t);
            if (--pending[r][next] == 0) ready.emplace_back(r, next);
        }
    };
    // Local steps and postings first (they never wait for a port), then the
    // earliest matched message; repeat.
    while (true) {
        while (!ready.empty()) {
            const auto [r, i] = ready.back();
            ready.pop_back();
            const coll::Step &step = team[static_cast<size_t>(r)].steps[i];
            if (!step.is_message()) {
                complete(r, i, ready_at[r][i] + m.gamma * static_cast<double>(step.dst.bytes));
                continue;
            }
            const bool sending = step.kind == coll::StepKind::send;
            const Channel key =
                sending ? Channel{r, step.peer, step.tag} : Channel{step.peer, r, step.tag};
            auto &[sends, recvs] = posted[key];
            (sending ? sends : recvs).push_back(i);
            if (!sends.empty() && !recvs.empty()) {
                const auto [sender, receiver, tag] = key;
                const coll::StepId si = sends.front(), ri = recvs.front();
                sends.erase(sends.begin());
                recvs.erase(recvs.begin());
                matched.emplace(std::max(ready_at[sender][si], ready_at[receiver][ri]), sender, si,
                                receiver, ri);
            }
        }
        if (matched.empty()) break;
        const auto [t, sender, si, receiver, ri] = matched.top();
        matched.pop();
        const auto su = static_cast<size_t>(sender), ru = static_cast<size_t>(receiver);
        const double start = std::max({t, out_free[su], in_free[ru]});
        const double bytes = static_cast<double>(team[su].steps[si].src.bytes);
        const double done = start + m.alpha + m.beta * bytes;
        out_free[su] = in_free[ru] = done;
        complete(sender, si, done);
        complete(receiver, ri, done);
    }
    return remaining == 0 ? end : -1;
}

}  // namespace deputy::test
