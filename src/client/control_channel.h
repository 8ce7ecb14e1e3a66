// The client's end of its control connection, shared by every thread of a
// context.
//
// Two kinds of answer come back on the one socket: REPLY and STAGED_RESULT
// answer REGISTER, DEREGISTER, HEAP_SHARE, STAGED and TEAM_LEAVE in the
// order these went out; TEAM_READY answers the TEAM_JOIN whose join id it carries, whenever
// that team forms (seconds later, in any order). So no thread may keep the
// socket while it waits: a thread waiting for its team to form would hold
// up the joins that complete other teams, of this process and, through
// them, of others (two processes whose threads join two teams in opposite
// orders would each wait for the other until the timeout).
//
// Requests go out under a send lock held only for the write. Each waiting
// thread leaves a Waiter; one of them at a time reads the socket (poll, then
// one message) and hands each answer to its Waiter, by join id or, for the
// in-order answers, to the oldest request; the others sleep on a condition
// variable until their answer is in or the reader's turn passes to them.
// Nobody spins. The reader polls in slices and, between them, asks the
// context whether the agent is still there; a broken connection, a missing
// answer or an answer nobody asked for fails every waiter with
// DP_ERR_AGENT_LOST and tells the context (Hooks::lost).
#pragma once

#include <deputy/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "channel/control.h"
#include "channel/message.h"
#include "common/fd.h"
#include "common/segment.h"

namespace deputy::client {

class ControlChannel {
  public:
    struct Hooks {
        // Looks at the agent now (its pidfd, the segment's state): DP_OK, or
        // DP_ERR_AGENT_LOST once the context knows it is gone.
        std::function<dp_status_t()> check_alive;
        // The connection broke or the agent stopped answering: the context
        // is lost. Called once, without the channel's locks held.
        std::function<void(const std::string &why)> lost;
    };

    ControlChannel() = default;
    ControlChannel(const ControlChannel &) = delete;
    ControlChannel &operator=(const ControlChannel &) = delete;

    // Takes the attached socket (after ATTACHED: nothing else arrives before
    // an answer). slice_ns: how long the reader polls before it checks the
    // agent; answer_timeout_ns: how long an in-order answer may take.
    void start(UniqueFd socket, int64_t slice_ns, int64_t answer_timeout_ns, Hooks hooks);
    int fd() const { return socket_.get(); }

    // Sends a request answered in order (REPLY or STAGED_RESULT), with
    // attach_fd (>= 0) passed along (SCM_RIGHTS), and waits for its answer.
    dp_status_t request(channel::MsgType type, const std::vector<uint8_t> &payload,
                        channel::MsgType *answer_type, std::vector<uint8_t> *answer,
                        int attach_fd = -1);
    // Sends TEAM_JOIN under a join id of its own and waits, at most
    // timeout_ns, for the TEAM_READY that carries it. The segments that
    // came with it (board, teammates' views) are mapped already and their
    // fds closed, all inside a PrivateWindow (common/private_window.h): no
    // other process ever finds them in this process's fd table. A segment
    // that could not be mapped is left invalid, in its place.
    dp_status_t join(channel::control::TeamJoin m, channel::control::TeamReady *ready,
                     std::vector<Segment> *segments, int64_t timeout_ns);
    // ... unmapping whatever came with the answer.
    dp_status_t join(channel::control::TeamJoin m, channel::control::TeamReady *ready,
                     int64_t timeout_ns) {
        std::vector<Segment> segments;
        return join(std::move(m), ready, &segments, timeout_ns);
    }
    // The context learnt that the agent is gone: every waiter, and every
    // later request, gets DP_ERR_AGENT_LOST.
    void fail();

  private:
    using Clock = std::chrono::steady_clock;
    struct Waiter {
        uint64_t join_id = 0;  // 0: an in-order request
        bool done = false;
        channel::MsgType type = channel::MsgType::kInvalid;
        std::vector<uint8_t> payload;
        channel::control::TeamReady ready;
        std::vector<Segment> segments;  // TEAM_READY's: its board and pool views
    };

    // Registers w and sends the request, both under the send lock, so that
    // the in-order waiters queue in the order their requests went out.
    dp_status_t send(Waiter &w, channel::MsgType type, const std::vector<uint8_t> &payload,
                     int attach_fd = -1);
    // Until w is answered, the channel breaks or timeout_ns passes (then
    // the agent is taken for lost); reads the socket for everybody while it
    // is this thread's turn.
    dp_status_t wait(Waiter &w, int64_t timeout_ns, const char *what);
    // The reader's turn: one poll of at most `slice`, then one message
    // (or a look at the agent). Called and returns with `lock` held.
    void read_one(std::unique_lock<std::mutex> &lock, Clock::duration slice);
    // Hands an answer to its waiter (mutex_ held); false, with *why, when no
    // waiter asked for it or it is not an answer.
    bool dispatch(channel::MsgType type, std::vector<uint8_t> payload,
                  std::vector<Segment> segments, std::string *why);
    // Fails every waiter (mutex_ held); the first reason stays.
    void break_locked(std::string why);
    // Tells the context once (Hooks::lost), with mutex_ released meanwhile.
    void report_lost(std::unique_lock<std::mutex> &lock);

    UniqueFd socket_;
    Clock::duration slice_{};
    int64_t answer_timeout_ns_ = 0;
    Hooks hooks_;

    std::mutex send_mutex_;  // one request on the wire at a time
    std::atomic<uint64_t> next_join_id_{1};

    std::mutex mutex_;  // everything below
    std::condition_variable changed_;  // an answer in, the reader's turn free, or broken
    std::deque<Waiter *> in_order_;    // oldest first
    std::map<uint64_t, Waiter *> joins_;
    // A TEAM_READY whose fds did not fit one message: its join id and the
    // fds it brings in all; TEAM_VIEWS with the rest come next.
    uint64_t views_for_ = 0;
    size_t views_expected_ = 0;
    bool reading_ = false;  // a waiter has the socket
    bool broken_ = false;
    std::string broken_why_;
    bool lost_reported_ = false;
};

}  // namespace deputy::client
