// What a rank holds for a run: its deputy context and team (unless
// --no-deputy) and the send/receive buffers, allocated once for the
// largest size in the chosen memory mode and pre-faulted.
#pragma once

#include <deputy/coll.h>
#include <deputy/context.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/coll/options.h"
#include "bench/coll/world.h"

namespace deputy::bench::coll {

class DeputySession {
  public:
    DeputySession() = default;
    DeputySession(const DeputySession &) = delete;
    DeputySession &operator=(const DeputySession &) = delete;
    ~DeputySession() { close(); }

    // Collective over the world: every rank attaches to the agent (dp_init,
    // with a pool of pool_bytes for mapped memory) and joins one team whose
    // key and job secret are rank 0's random ones, broadcast with MPI (or the
    // secret deputy launch gave, $DEPUTY_JOB_SECRET). Returns the same
    // answer on every rank; a failing rank logs why.
    bool open(const World &world, Memory memory, dp_wait_mode_t wait,
              const std::string &agent_socket, uint64_t pool_bytes);
    // One 1-byte allreduce on the run's own buffers before anything is
    // timed, so a memory mode the agent cannot serve is reported once,
    // naming --memory, on every rank alike.
    bool probe(const World &world, Memory memory, void *send, void *recv);
    void close();
    dp_context_t *context() const { return ctx_; }
    dp_team_t *team() const { return team_; }
    const std::string &key() const { return key_; }
    // What this rank's agent says its team ran between nodes so far:
    // inter-node steps by algorithm ("ring": 12, ...); empty when the team
    // is on one node or the agent does not say.
    std::map<std::string, uint64_t> inter_node_steps() const;
    // What `deputy info` says of this rank's agent; empty when it does not answer.
    nlohmann::json agent_info() const;
    // Where the agent ran beside the ranks: "own-core" when its engines are
    // pinned to CPUs none of the ranks may run on, "shared" otherwise (the
    // two placements of docs/PERFORMANCE.md), "" when the agent does not say.
    // Collective over `world`.
    std::string placement(const World &world) const;

  private:
    std::string agent_address_;
    dp_context_t *ctx_ = nullptr;
    dp_team_t *team_ = nullptr;
    std::string key_;
    std::string secret_;
};

class Buffers {
  public:
    Buffers() = default;
    Buffers(const Buffers &) = delete;
    Buffers &operator=(const Buffers &) = delete;
    ~Buffers() { release(); }

    // mapped: dp_malloc; direct: page-aligned malloc + dp_mem_register;
    // staged, rdma and host: page-aligned malloc. Every page is written once here
    // (first touch is slow on this kind of machine and must not be timed).
    bool allocate(Memory memory, dp_context_t *ctx, uint64_t send_bytes, uint64_t recv_bytes,
                  std::string *error);
    void release();
    void *send() const { return send_; }
    void *recv() const { return recv_; }

  private:
    void *get(uint64_t bytes, std::string *error, const char *what);
    void put(void *p);

    Memory memory_ = Memory::host;
    dp_context_t *ctx_ = nullptr;
    void *send_ = nullptr;
    void *recv_ = nullptr;
};

// Bytes of the pool a mapped run asks for: both buffers, aligned, plus slack.
uint64_t pool_bytes_for(uint64_t send_bytes, uint64_t recv_bytes);

}  // namespace deputy::bench::coll
