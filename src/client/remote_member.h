// A remote context's membership in a team: its own link to the agent,
// served there by a team proxy (proxy/team_proxy.h) that joined the team in
// its place. The member posts as a staged one does (its source bytes in a
// bounce block of its pool, client/staged_collective.h) and sends the post
// with those bytes (PROXY_POST); a thread of its own receives each answer
// (PROXY_DONE), writes the result bytes into the bounce block and publishes
// the request's record, so dp_test stays one load and dp_wait sleeps on the
// record as for a local team. The link ending fails every request in
// flight with the member-lost status (DP_ERR_AGENT_LOST).
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

namespace deputy::client {

class Context;
struct Request;

class RemoteMember {
  public:
    // Opens the link, sends the TEAM_JOIN and waits up to wait_ns for the
    // proxy's TEAM_READY (*ready: its status, reason and team id).
    static dp_status_t join(Context *ctx, const channel::control::TeamJoin &m, int64_t wait_ns,
                            channel::control::TeamReady *ready, std::unique_ptr<RemoteMember> *out);
    ~RemoteMember();  // closes the link (the proxy leaves the team) and joins the receiver

    // Sends `post` (addresses in r's bounce block) with the block's source
    // bytes and, for a vector collective, its counts block. Any thread.
    dp_status_t post(Request &r, const channel::CollPost &post);

  private:
    RemoteMember() = default;
    void receive_loop();
    // Writes `bytes` at `offset` of the slot's bounce block; false (and
    // says why) when the slot has nothing in flight or they do not fit.
    bool place(uint32_t slot, uint64_t offset, const std::vector<uint8_t> &bytes);
    // Publishes a record's status (and wakes its waiter).
    static void finish(Request *r, uint8_t status, uint64_t bytes);

    UniqueFd socket_;
    std::unique_ptr<channel::Relay> relay_;
    std::mutex send_mutex_;
    std::thread receiver_;
    // Slot s's request, while bit s of in_flight_ is set: set by post(),
    // cleared by the receiver once the record is published.
    std::array<Request *, 64> requests_{};
    std::atomic<uint64_t> in_flight_{0};
    std::atomic<bool> broken_{false};
};

}  // namespace deputy::client
