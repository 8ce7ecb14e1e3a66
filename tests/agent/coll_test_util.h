// What the collective tests against real agents share: the memory modes a
// team's buffers may live in, a team of clients of one agent, input fill
// and the reference reduction.
#pragma once

#include <deputy/deputy.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::testing {

// Where members' buffers live: dp_malloc (mapped), registered malloc
// memory (direct), plain malloc memory in staged mode (the client copies
// through bounce buffers in its pool), or the shared heap (dp_heap_alloc:
// what an unmodified program's large mallocs become under libdeputy-mpi;
// reached in place with no registration).
enum class Memory { mapped, direct, staged, heap };
inline const char *name(Memory m) {
    switch (m) {
        case Memory::mapped: return "mapped";
        case Memory::direct: return "direct";
        case Memory::staged: return "staged";
        case Memory::heap: return "heap";
    }
    return "?";
}
inline constexpr Memory kAllMemory[] = {Memory::mapped, Memory::direct, Memory::staged,
                                        Memory::heap};

// Reference: rank-order reduction of `count` elements of every src block,
// with the mover's (scalar-checked) kernels.
inline std::vector<uint8_t> reduce_ref(const std::vector<const uint8_t *> &srcs, size_t count,
                                       dp_dtype_t dt, dp_op_t op) {
    const size_t n = count * dp_dtype_size(dt);
    std::vector<uint8_t> acc(srcs[0], srcs[0] + n);
    for (size_t m = 1; m < srcs.size(); ++m)
        mover::kernels::reduce(acc.data(), acc.data(), srcs[m], count, dt, op);
    return acc;
}

// The operations of the correctness matrices.
enum CollOp { kAllreduce, kReduceScatter, kAllgather, kAlltoall, kBcast, kBarrier };

// Block m of rank r's result, for int32 sum, from every rank's original
// source bytes (`orig`, n = count * 4 bytes per block).
inline std::vector<uint8_t> expected_block(CollOp op, const std::vector<std::vector<uint8_t>> &orig,
                                           int r, int m, size_t count, int root) {
    const size_t n = count * 4;
    const int p = int(orig.size());
    switch (op) {
        case kAllreduce:
        case kReduceScatter: {
            std::vector<const uint8_t *> b;
            for (int k = 0; k < p; ++k) b.push_back(orig[k].data() + (op == kReduceScatter ? r * n : 0));
            return reduce_ref(b, count, DP_INT32, DP_SUM);
        }
        case kAllgather: return orig[m];
        case kAlltoall: return {orig[m].begin() + r * n, orig[m].begin() + (r + 1) * n};
        case kBcast: return orig[root];
        case kBarrier: return {};
    }
    return {};
}

struct Member {
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
};

class Team {
  public:
    // claimers >= 0: only the first `claimers` members may run operations
    // themselves (DEPUTY_RANK_EXECUTION=on at their dp_init, off at the
    // others': the agent then runs everything, but those members still map
    // the board and every view, as a rank of a large team in its own
    // process would).
    Team(const AgentProcess &agent, int size, const std::string &key,
         Memory memory = Memory::mapped, uint64_t pool_bytes = 32 << 20, int claimers = -1)
        : members_(size), memory_(memory) {
        dp_config_t config = agent.config();
        config.pool_bytes = pool_bytes;
        if (memory == Memory::staged) config.memory_mode = DP_MEMORY_STAGED;
        for (int r = 0; r < size; ++r) {
            if (claimers >= 0) setenv("DEPUTY_RANK_EXECUTION", r < claimers ? "on" : "off", 1);
            EXPECT_EQ(dp_init(&config, &members_[r].ctx), DP_OK);
        }
        if (claimers >= 0) unsetenv("DEPUTY_RANK_EXECUTION");
        // Joining blocks until all joined: post every join but the last
        // from helper threads.
        std::vector<std::thread> joiners;
        for (int r = 0; r < size; ++r)
            joiners.emplace_back([&, r] {
                EXPECT_EQ(dp_team_create(members_[r].ctx, key.c_str(), r, size, &members_[r].team),
                          DP_OK);
            });
        for (auto &t : joiners) t.join();
    }
    ~Team() {
        for (auto &m : members_) {
            if (m.team) dp_team_destroy(m.team);
            if (m.ctx) dp_finalize(m.ctx);
        }
        for (void *p : owned_) free(p);
        for (void *p : heap_owned_) dp_heap_free(p);
    }
    int size() const { return int(members_.size()); }
    // Gives a buffer from buffer() back (pool or registration).
    void release(int r, uint8_t *p) {
        if (memory_ == Memory::mapped) return dp_free(members_[r].ctx, p);
        if (memory_ == Memory::heap) {
            heap_owned_.erase(std::find(heap_owned_.begin(), heap_owned_.end(), p));
            EXPECT_EQ(dp_heap_free(p), 1);
            return;
        }
        if (memory_ == Memory::direct) {
            EXPECT_EQ(dp_mem_deregister(members_[r].ctx, p), DP_OK);
        }
        owned_.erase(std::find(owned_.begin(), owned_.end(), p));
        free(p);
    }
    Member &operator[](int r) { return members_[r]; }
    // A buffer for the team's memory mode: dp_malloc, registered, or plain.
    uint8_t *buffer(int r, size_t bytes) {
        bytes = std::max<size_t>(bytes, 64);
        if (memory_ == Memory::mapped) return static_cast<uint8_t *>(dp_malloc(members_[r].ctx, bytes));
        if (memory_ == Memory::heap) {
            void *h = dp_heap_alloc(bytes, 64, 0);
            EXPECT_NE(h, nullptr);
            EXPECT_EQ(dp_mem_mapped(members_[r].ctx, h, bytes), 1) << "the agent maps the heap";
            heap_owned_.push_back(h);
            return static_cast<uint8_t *>(h);
        }
        void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
        owned_.push_back(p);
        if (memory_ == Memory::direct) {
            EXPECT_EQ(dp_mem_register(members_[r].ctx, p, bytes), DP_OK);
        }
        return static_cast<uint8_t *>(p);
    }
    // Posts one op per member (post(r, &req)) and waits for all: one after
    // the other from this thread, or, once wait_together() was called, each
    // member from a thread of its own, as ranks do (then every member may
    // be waiting at once, and the members may run the operation themselves:
    // client/rank_execution.h).
    template <typename Post>
    std::vector<dp_status_t> run(Post post) {
        std::vector<dp_request_t *> reqs(members_.size());
        for (int r = 0; r < size(); ++r) EXPECT_EQ(post(r, &reqs[r]), DP_OK);
        std::vector<dp_status_t> out(reqs.size(), DP_ERR_INTERNAL);
        auto wait = [&](size_t r) {
            if (reqs[r]) out[r] = dp_wait(reqs[r]);
            dp_request_free(reqs[r]);
        };
        if (!together_) {
            for (size_t r = 0; r < reqs.size(); ++r) wait(r);
            return out;
        }
        std::vector<std::thread> waiters;
        for (size_t r = 0; r < reqs.size(); ++r) waiters.emplace_back(wait, r);
        for (auto &t : waiters) t.join();
        return out;
    }
    void wait_together() { together_ = true; }

  private:
    std::vector<Member> members_;
    Memory memory_;
    bool together_ = false;
    std::vector<void *> owned_;
    std::vector<void *> heap_owned_;
};

// A (value, index) pair's fields at `at`, as C's struct lays them out; the
// padding keeps its bytes.
template <typename V, typename I>
void set_pair(uint8_t *at, int value, int index) {
    struct P {
        V v;
        I i;
    };
    const V v = V(value);
    const I i = I(index);
    std::memcpy(at + offsetof(P, v), &v, sizeof v);
    std::memcpy(at + offsetof(P, i), &i, sizeof i);
}
inline void set_pair(dp_dtype_t dt, uint8_t *at, int value, int index) {
    switch (dt) {
        case DP_FLOAT32_INT32: return set_pair<float, int32_t>(at, value, index);
        case DP_FLOAT64_INT32: return set_pair<double, int32_t>(at, value, index);
        case DP_INT64_INT32: return set_pair<int64_t, int32_t>(at, value, index);
        case DP_INT32_INT32: return set_pair<int32_t, int32_t>(at, value, index);
        case DP_INT16_INT32: return set_pair<int16_t, int32_t>(at, value, index);
        case DP_FLOAT32_FLOAT32: return set_pair<float, float>(at, value, index);
        case DP_FLOAT64_FLOAT64: return set_pair<double, double>(at, value, index);
        default: return;
    }
}

inline void fill(uint8_t *p, size_t n, uint32_t seed, dp_dtype_t dt) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(rng());
    // Pairs: values from five, indices from eight, so that ranks tie on the
    // value and the index decides (MINLOC / MAXLOC's rule); padding random.
    if (mover::is_pair_dtype(unsigned(dt))) {
        const size_t e = dp_dtype_size(dt);
        for (size_t i = 0; i < n / e; ++i)
            set_pair(dt, p + i * e, int(rng() % 5) - 2, int(rng() % 8));
        return;
    }
    // Keep floats finite and small: NaN payloads would make "bit-exact"
    // depend on which operand x86 returns (see kernels.h).
    const size_t e = dp_dtype_size(dt);
    for (size_t i = 0; i < n / e; ++i) {
        if (dt == DP_FLOAT32) reinterpret_cast<float *>(p)[i] = float(int(rng() % 2001) - 1000) / 8;
        if (dt == DP_FLOAT64) reinterpret_cast<double *>(p)[i] = double(int(rng() % 2001) - 1000) / 8;
        if (dt == DP_FLOAT16 || dt == DP_BFLOAT16) p[i * 2 + 1] &= 0x3f;
    }
}

// The agent stopped (SIGSTOP) while this lives, when `stop`: operations
// posted meanwhile complete only if the members run them themselves
// (client/rank_execution.h), so each one that does was theirs. Declared
// after the team it serves, so that the agent runs again before the team
// leaves. Only for teams that wait together, over memory the members
// reach (not Memory::direct, which is the agent's alone). Should the
// members not run one, a watchdog wakes the agent after `limit` (so the
// test ends) and the test fails.
class AgentPaused {
  public:
    AgentPaused(const AgentProcess &agent, bool stop,
                std::chrono::seconds limit = std::chrono::seconds(30))
        : pid_(stop ? agent.pid() : 0) {
        if (!pid_) return;
        kill(pid_, SIGSTOP);
        watchdog_ = std::thread([this, limit] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!cv_.wait_for(lock, limit, [this] { return over_; })) {
                woken_ = true;
                kill(pid_, SIGCONT);
            }
        });
    }
    ~AgentPaused() {
        if (!pid_) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            over_ = true;
        }
        cv_.notify_one();
        watchdog_.join();
        kill(pid_, SIGCONT);
        if (woken_) ADD_FAILURE() << "the members did not run an operation with the agent stopped";
    }
    AgentPaused(const AgentPaused &) = delete;
    AgentPaused &operator=(const AgentPaused &) = delete;

  private:
    pid_t pid_;
    std::thread watchdog_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool over_ = false, woken_ = false;
};

// Operations the members ran themselves (the agent's count).
// What `deputy info` says (a failed request fails the test).
inline nlohmann::json agent_info(const AgentProcess &agent) {
    std::string json, error;
    EXPECT_EQ(deputy::channel::request_agent_info(agent.socket(), "", 2'000'000'000, &json, &error),
              DP_OK)
        << error;
    return nlohmann::json::parse(json);
}

inline uint64_t run_by_members(const AgentProcess &agent) {
    return agent_info(agent)["collectives"]["run_by_members"].get<uint64_t>();
}

}  // namespace deputy::testing
