// A member's view of a team: its id at the agent, rank and size, and a slab
// of completion records in the mapped pool, one per outstanding request.
// Posting a collective = take a free slot, zero its record, push one
// descriptor (channel/coll_desc.h); dp_test = one acquire load of the
// record's status. No allocation and no system call on that path (the
// doorbell write happens only when the agent sleeps).
#pragma once

#include <deputy/coll.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "client/context.h"
#include "client/staged_collective.h"

namespace deputy::client {

struct Request;

class Team {
  public:
    static dp_status_t join(Context *ctx, const std::string &key, int rank, int size,
                            unsigned timeout_ms, Team **out);
    ~Team();

    // Posts a collective descriptor; *req gets a slot.
    dp_status_t post(uint8_t opcode, const void *src, void *dst, uint64_t count, dp_dtype_t dtype,
                     dp_op_t op, uint64_t root, Request **req);
    dp_status_t leave();

    Context *context() const { return ctx_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    void release(Request *req);
    int outstanding() const { return outstanding_.load(std::memory_order_relaxed); }

  private:
    Team() = default;
    Context *ctx_ = nullptr;
    uint32_t id_ = 0;
    int rank_ = 0, size_ = 0;
    dp_completion_t *records_ = nullptr;  // DP_TEAM_MAX_OUTSTANDING, in the pool
    std::vector<Request> slots_;
    std::vector<uint32_t> free_;
    std::mutex mutex_;
    std::atomic<int> outstanding_{0};
    uint64_t sequence_ = 0;
};

struct Request {
    Team *team = nullptr;
    dp_completion_t *record = nullptr;
    uint32_t slot = 0;
    StagedCollective staged;  // staged memory mode only
};

// After the record says done: copies a staged result out (once) and maps
// the record's status to the API's.
dp_status_t request_result(Request *req);

// Maps a collective's record status to the API's status.
dp_status_t coll_status(uint8_t record_status);

}  // namespace deputy::client
