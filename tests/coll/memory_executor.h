// Runs the schedules of a whole team in memory: P simulated ranks, each with
// its own source, destination and scratch buffers, one thread.
//
// Semantics are the strictest a runtime may have (schedule.h):
//  - rendezvous: a send completes only when its matching recv is posted, and
//    its bytes are copied at that moment, from the sender's buffer as it is
//    then — so a schedule that overwrites a buffer before its send completed,
//    or that needs sends to complete early to avoid a deadlock, fails here;
//  - any order: at each point the executor picks uniformly at random (from a
//    seed) among everything that could happen next — starting any step whose
//    dependencies are done, or matching any posted send with its recv — so
//    repeated runs explore different interleavings of ranks and steps;
//  - matching by (sender, receiver, tag) in posting order; the two lengths
//    must be equal.
// It stops when nothing can happen any more: all steps done, or a deadlock,
// reported with the steps each rank is stuck on.
//
// It also counts what each rank sends and tracks causality: `heard_from`
// of a rank is the set of ranks whose start happens-before that rank's end
// (through dependencies and messages), which is what a barrier must make full.
#pragma once

#include <deputy/mover.h>
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "coll/reducer.h"
#include "coll/schedule.h"

namespace deputy::test {

struct Execution {
    bool ok = false;
    std::string error;                  // deadlock or mismatch, when !ok
    std::vector<size_t> bytes_sent;     // per rank, counted as messages matched
    std::vector<size_t> messages_sent;  // per rank
    std::vector<uint64_t> heard_from;   // per rank, bit i = rank i (P <= 64)
};

class MemoryExecutor {
  public:
    // Scratch starts filled with `scratch_fill` so that a schedule reading
    // scratch it never wrote gives wrong results rather than lucky zeros.
    MemoryExecutor(std::vector<coll::Schedule> schedules, const coll::Reducer &reducer,
                   unsigned char scratch_fill = 0xEE)
        : schedules_(std::move(schedules)), reducer_(reducer), memory_(schedules_.size()) {
        for (size_t r = 0; r < schedules_.size(); ++r) {
            for (int b = 0; b < coll::kBufferCount; ++b) {
                memory_[r][b].assign(
                    schedules_[r].buffer_bytes[b],
                    b == static_cast<int>(coll::BufferId::scratch) ? scratch_fill : 0);
            }
        }
    }

    std::vector<unsigned char> &buffer(int rank, coll::BufferId id) {
        return memory_[static_cast<size_t>(rank)][static_cast<int>(id)];
    }

    Execution run(uint64_t seed) {
        const size_t p = schedules_.size();
        Execution out;
        out.bytes_sent.assign(p, 0);
        out.messages_sent.assign(p, 0);
        out.heard_from.assign(p, 0);
        std::mt19937_64 random(seed);

        // Per step: dependencies still pending, dependents, causality, done.
        std::vector<std::vector<uint32_t>> pending(p);
        std::vector<std::vector<std::vector<coll::StepId>>> dependents(p);
        std::vector<std::vector<uint64_t>> heard(p);
        std::vector<std::vector<char>> done(p);
        std::vector<std::vector<char>> posted(p);
        std::vector<std::pair<int, coll::StepId>> ready;
        for (size_t r = 0; r < p; ++r) {
            const coll::Schedule &s = schedules_[r];
            const size_t n = s.steps.size();
            pending[r].assign(n, 0);
            dependents[r].assign(n, {});
            heard[r].assign(n, 0);
            done[r].assign(n, 0);
            posted[r].assign(n, 0);
            for (coll::StepId i = 0; i < n; ++i) {
                pending[r][i] = s.steps[i].dependency_count;
                for (coll::StepId d : s.dependencies(i)) dependents[r][d].push_back(i);
                if (pending[r][i] == 0) ready.emplace_back(static_cast<int>(r), i);
            }
            out.heard_from[r] = uint64_t{1} << r;
        }

        using Channel = std::tuple<int, int, uint32_t>;  // sender, receiver, tag
        struct Queues {
            std::deque<coll::StepId> sends, recvs;
            bool listed = false;  // in `matchable`
        };
        std::map<Channel, Queues> channels;
        std::vector<Channel> matchable;

        const auto complete = [&](int r, coll::StepId i) {
            done[r][i] = 1;
            out.heard_from[r] |= heard[r][i];
            for (coll::StepId next : dependents[r][i]) {
                if (--pending[r][next] == 0) ready.emplace_back(r, next);
            }
        };

        while (!ready.empty() || !matchable.empty()) {
            size_t pick = std::uniform_int_distribution<size_t>(
                0, ready.size() + matchable.size() - 1)(random);
            if (pick < ready.size()) {
                const auto [r, i] = ready[pick];
                ready[pick] = ready.back();
                ready.pop_back();
                const coll::Schedule &s = schedules_[r];
                const coll::Step &step = s.steps[i];
                heard[r][i] = uint64_t{1} << r;
                for (coll::StepId d : s.dependencies(i)) heard[r][i] |= heard[r][d];
                if (!step.is_message()) {
                    execute_local(r, step);
                    complete(r, i);
                    continue;
                }
                posted[r][i] = 1;
                const bool sending = step.kind == coll::StepKind::send;
                const Channel key =
                    sending ? Channel{r, step.peer, step.tag} : Channel{step.peer, r, step.tag};
                Queues &q = channels[key];
                (sending ? q.sends : q.recvs).push_back(i);
                if (!q.sends.empty() && !q.recvs.empty() && !q.listed) {
                    q.listed = true;
                    matchable.push_back(key);
                }
                continue;
            }
            pick -= ready.size();
            const Channel key = matchable[pick];
            Queues &q = channels[key];
            const auto [sender, receiver, tag] = key;
            const coll::StepId si = q.sends.front();
            const coll::StepId ri = q.recvs.front();
            q.sends.pop_front();
            q.recvs.pop_front();
            if (q.sends.empty() || q.recvs.empty()) {
                q.listed = false;
                matchable[pick] = matchable.back();
                matchable.pop_back();
            }
            const coll::Step &send = schedules_[sender].steps[si];
            const coll::Step &recv = schedules_[receiver].steps[ri];
            if (send.src.bytes != recv.dst.bytes) {
                out.error = fmt::format("length mismatch: rank {} {} vs rank {} {}", sender,
                                        coll::describe(schedules_[sender], si), receiver,
                                        coll::describe(schedules_[receiver], ri));
                return out;
            }
            if (send.src.bytes > 0) {
                std::memcpy(at(receiver, recv.dst), at(sender, send.src), send.src.bytes);
            }
            out.bytes_sent[sender] += send.src.bytes;
            out.messages_sent[sender] += 1;
            heard[receiver][ri] |= heard[sender][si];
            complete(sender, si);
            complete(receiver, ri);
        }

        for (size_t r = 0; r < p; ++r) {
            for (coll::StepId i = 0; i < done[r].size(); ++i) {
                if (done[r][i]) continue;
                if (out.error.empty()) out.error = "deadlock; unfinished steps:";
                out.error += fmt::format("\n  rank {} {} ({})", r, coll::describe(schedules_[r], i),
                                         posted[r][i] ? "posted, unmatched" : "waiting");
            }
        }
        out.ok = out.error.empty();
        return out;
    }

  private:
    unsigned char *at(int rank, const coll::Region &region) {
        std::vector<unsigned char> &b = buffer(rank, region.buffer);
        if (region.end() > b.size()) {
            throw std::out_of_range(fmt::format("rank {}: {} [{}, {}) beyond {} bytes", rank,
                                                coll::buffer_name(region.buffer), region.offset,
                                                region.end(), b.size()));
        }
        return b.data() + region.offset;
    }

    void execute_local(int rank, const coll::Step &step) {
        if (step.dst.bytes == 0) return;
        if (step.kind == coll::StepKind::copy) {
            std::memcpy(at(rank, step.dst), at(rank, step.src), step.dst.bytes);
        } else {
            reducer_.reduce(at(rank, step.dst), at(rank, step.src), at(rank, step.src2),
                            step.dst.bytes / dp_dtype_size(step.dtype), step.dtype, step.op);
        }
    }

    std::vector<coll::Schedule> schedules_;
    const coll::Reducer &reducer_;
    std::vector<std::array<std::vector<unsigned char>, coll::kBufferCount>> memory_;
};

}  // namespace deputy::test
