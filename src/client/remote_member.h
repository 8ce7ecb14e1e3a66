// A remote context's membership in a team: its own link to the agent,
// served there by a team proxy (proxy/team_proxy.h) that joined the team in
// its place. The member posts as a staged one does (its source bytes in a
// bounce block of its pool, client/staged_collective.h) and sends the post
// with those bytes (PROXY_POST); a thread of its own receives each answer
// (PROXY_DONE), writes the result bytes into the bounce block and publishes
// the request's record, so dp_test stays one load and dp_wait sleeps on the
// record as for a local team. The link ending fails every request in
// flight with the member-lost status (DP_ERR_AGENT_LOST).
//
// Memory mode rdma: before joining, the member sends the address of its
// context's RMA endpoint (fabric/exposed_memory.h, one per context, made by
// its first team) to its proxy (PROXY_FABRIC);
// each post then exposes the user's own buffers instead of copying them —
// its source for remote reads, its destination for remote writes, each
// under a fresh key — and carries the keys; the proxy reads and writes
// there itself and answers with the status alone. The keys are revoked
// when the answer comes (or the link ends), before the record is
// published.
#pragma once

#include <deputy/status.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "channel/coll_post.h"
#include "channel/control.h"
#include "channel/relay.h"
#include "common/fd.h"
#include "fabric/exposed_memory.h"

namespace deputy::client {

class Context;
struct Request;

class RemoteMember {
  public:
    // Opens the link, sends the TEAM_JOIN and waits up to wait_ns for the
    // proxy's TEAM_READY (*ready: its status, reason and team id).
    // Memory mode rdma: the RMA endpoint first (PROXY_FABRIC, answered by
    // REPLY), so a proxy that cannot reach our memory fails the create
    // before anyone joins.
    static dp_status_t join(Context *ctx, const channel::control::TeamJoin &m, int64_t wait_ns,
                            channel::control::TeamReady *ready, std::unique_ptr<RemoteMember> *out);
    ~RemoteMember();  // closes the link (the proxy leaves the team) and joins the receiver

    // Sends `post` (64 bytes: a collective's or a message's post, its
    // addresses in r's bounce block) with the block's source bytes and, for
    // a vector collective, its counts block; `slot` is the link's
    // (control::kProxySlots: the team's collective slots, then its
    // point-to-point ones). Any thread.
    dp_status_t post(Request &r, uint32_t slot, const void *post, const void *counts,
                     uint32_t counts_bytes);

  private:
    RemoteMember() = default;
    // The context's endpoint, on the interface towards `agent_host`; its
    // address to the proxy.
    dp_status_t open_fabric(Context *ctx, const std::string &agent_host, int64_t wait_ns);
    // Memory mode rdma: exposes the bytes `post` reads and writes (by the
    // table, a vector collective's counts block, or a message's buffer)
    // and fills m's keys.
    dp_status_t expose(uint32_t slot, const void *post, const void *counts,
                       channel::control::ProxyPost *m);
    void receive_loop();
    // Writes `bytes` at `offset` of the slot's bounce block; false (and
    // says why) when the slot has nothing in flight or they do not fit.
    bool place(uint32_t slot, uint64_t offset, const std::vector<uint8_t> &bytes);
    // Publishes a record's status (and wakes its waiter).
    static void finish(Request *r, uint8_t status, uint64_t bytes, uint32_t result = 0,
                       uint64_t value = 0);

    UniqueFd socket_;
    std::unique_ptr<channel::Relay> relay_;
    uint32_t rank_ = 0, size_ = 1;
    // Memory mode rdma: the endpoint, and each slot's two exposed ranges
    // (source, destination) while it is in flight; whoever clears the
    // slot's bit revokes them. Declared in this order so the ranges close
    // before the endpoint.
    std::shared_ptr<fabric::ExposedMemory> exposed_;  // the context's (Context::exposed_memory)
    struct Windows {
        std::unique_ptr<fabric::Registration> source, destination;
    };
    std::array<Windows, channel::control::kProxySlots> windows_;
    std::mutex send_mutex_;
    std::thread receiver_;
    // Slot s's request, while bit s of in_flight_ is set: set by post(),
    // cleared by the receiver once the record is published.
    static constexpr uint32_t kWords = channel::control::kProxySlots / 64;
    static_assert(channel::control::kProxySlots % 64 == 0, "whole words of slot bits");
    bool in_flight(uint32_t slot) const {
        return in_flight_[slot / 64].load(std::memory_order_acquire) & (uint64_t(1) << (slot % 64));
    }
    // Clears the slot's bit; true when it was set (whoever clears it answers).
    bool take(uint32_t slot) {
        const uint64_t bit = uint64_t(1) << (slot % 64);
        return in_flight_[slot / 64].fetch_and(~bit, std::memory_order_acq_rel) & bit;
    }
    std::array<Request *, channel::control::kProxySlots> requests_{};
    std::array<std::atomic<uint64_t>, kWords> in_flight_{};
    std::atomic<bool> broken_{false};
};

}  // namespace deputy::client
