#include "client/control_channel.h"

#include <deputy/coll.h>
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "channel/socket_io.h"
#include "common/check.h"
#include "common/private_window.h"

namespace deputy::client {

namespace control = channel::control;
using channel::MsgType;

namespace {

// A team's views come kMaxFdsPerMessage to a message, the last message
// the rest: `got` fds of the `left` still due are a whole batch or the rest.
bool whole_batch(size_t got, size_t left) {
    return got == left || (got < left && got == channel::sock::kMaxFdsPerMessage);
}

}  // namespace

void ControlChannel::start(UniqueFd socket, int64_t slice_ns, int64_t answer_timeout_ns,
                           Hooks hooks) {
    socket_ = std::move(socket);
    slice_ = std::chrono::nanoseconds(std::max<int64_t>(slice_ns, 1'000'000));
    answer_timeout_ns_ = answer_timeout_ns;
    hooks_ = std::move(hooks);
}

dp_status_t ControlChannel::request(MsgType type, const std::vector<uint8_t> &payload,
                                    MsgType *answer_type, std::vector<uint8_t> *answer,
                                    int attach_fd) {
    Waiter w;
    DP_CHECK(send(w, type, payload, attach_fd));
    DP_CHECK(wait(w, answer_timeout_ns_, channel::msg_type_name(type)));
    *answer_type = w.type;
    *answer = std::move(w.payload);
    return DP_OK;
}

dp_status_t ControlChannel::join(control::TeamJoin m, control::TeamReady *ready,
                                 std::vector<Segment> *segments, int64_t timeout_ns) {
    Waiter w;
    w.join_id = next_join_id_.fetch_add(1, std::memory_order_relaxed);
    m.join_id = w.join_id;
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    DP_CHECK(send(w, MsgType::kTeamJoin, payload));
    DP_CHECK(wait(w, timeout_ns, "TEAM_JOIN"));
    *ready = std::move(w.ready);
    *segments = std::move(w.segments);
    return DP_OK;
}

void ControlChannel::fail() {
    std::lock_guard<std::mutex> lock(mutex_);
    lost_reported_ = true;  // the context knows: it is the one telling us
    break_locked("the agent is gone");
}

dp_status_t ControlChannel::send(Waiter &w, MsgType type, const std::vector<uint8_t> &payload,
                                 int attach_fd) {
    // Refused before anything is written: the stream stays in step.
    DP_CHECK(channel::check_send_size(payload.size(), control::kMaxControlMessage,
                                      "deputy request"));
    std::lock_guard<std::mutex> send_lock(send_mutex_);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (broken_) return DP_ERR_AGENT_LOST;
        // Before the bytes leave: another thread may read the answer
        // before this one is back from send_message.
        if (w.join_id) joins_[w.join_id] = &w;
        else in_order_.push_back(&w);
    }
    const dp_status_t s =
        control::send_message(socket_.get(), type, payload, attach_fd >= 0 ? &attach_fd : nullptr,
                              attach_fd >= 0 ? 1 : 0, answer_timeout_ns_, "deputy request");
    if (s == DP_OK) return DP_OK;
    // Part of a frame may be out: the stream is no longer in step.
    std::unique_lock<std::mutex> lock(mutex_);
    break_locked(fmt::format("sending {} failed ({})", channel::msg_type_name(type),
                             dp_status_name(s)));
    report_lost(lock);
    return DP_ERR_AGENT_LOST;
}

dp_status_t ControlChannel::wait(Waiter &w, int64_t timeout_ns, const char *what) {
    const Clock::time_point deadline = Clock::now() + std::chrono::nanoseconds(timeout_ns);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        if (w.done) return DP_OK;
        if (broken_) return DP_ERR_AGENT_LOST;
        const Clock::time_point now = Clock::now();
        if (now >= deadline) {
            break_locked(fmt::format("no answer to {} within {} ms", what, timeout_ns / 1'000'000));
            report_lost(lock);
            return DP_ERR_AGENT_LOST;
        }
        if (!reading_) read_one(lock, std::min<Clock::duration>(slice_, deadline - now));
        else changed_.wait_until(lock, deadline);  // an answer, the reader's turn, or broken
    }
}

void ControlChannel::read_one(std::unique_lock<std::mutex> &lock, Clock::duration slice) {
    reading_ = true;
    // Only TEAM_READY carries fds: while a join waits, the message is
    // received and its segments mapped inside a private window.
    const bool private_receive = !joins_.empty();
    lock.unlock();
    const int64_t slice_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    pollfd p{socket_.get(), POLLIN, 0};
    const int ready = poll(&p, 1, int(std::max<int64_t>((slice_ns + 999'999) / 1'000'000, 1)));
    const int err = errno;
    std::string why;
    MsgType type = MsgType::kInvalid;
    std::vector<uint8_t> payload;
    // TEAM_READY brings a team's board and its members' views.
    std::vector<UniqueFd> fds(channel::sock::kMaxFdsPerMessage);
    size_t nfds = 0;
    std::vector<Segment> segments;
    bool got = false;
    if (ready > 0) {
        std::optional<PrivateWindow> window;
        if (private_receive) window.emplace();
        // A message has begun: the rest comes within the answer timeout,
        // whatever is left of this slice.
        const dp_status_t s =
            control::recv_message(socket_.get(), control::kMaxControlMessage, &type, &payload,
                                  fds.data(), fds.size(), &nfds, answer_timeout_ns_,
                                  "deputy control");
        got = s == DP_OK;
        segments.resize(nfds);
        // (One that cannot be mapped stays invalid; map() said why.)
        for (size_t i = 0; i < nfds; ++i) Segment::map_received(std::move(fds[i]), &segments[i]);
        if (s == DP_ERR_AGENT_LOST) why = "the agent closed the connection";
        else if (!got) why = fmt::format("the control socket broke ({})", dp_status_name(s));
    } else if (ready == 0) {
        // Nothing for a slice: is the agent still there? If not, the
        // context fails us (fail()) before this returns.
        if (hooks_.check_alive) hooks_.check_alive();
    } else if (err != EINTR) {
        why = fmt::format("poll on the control socket: {}", std::strerror(err));
    }
    lock.lock();
    reading_ = false;
    if (got && !broken_) dispatch(type, std::move(payload), std::move(segments), &why);
    if (!why.empty()) {
        break_locked(std::move(why));
        report_lost(lock);
    }
    changed_.notify_all();  // an answer is in, or the turn to read is free
}

bool ControlChannel::dispatch(MsgType type, std::vector<uint8_t> payload,
                              std::vector<Segment> segments, std::string *why) {
    if (views_for_ && type != MsgType::kTeamViews) {
        *why = fmt::format("the agent sent {} before the rest of join {}'s views",
                           channel::msg_type_name(type), views_for_);
        return false;
    }
    switch (type) {
        case MsgType::kReply:
        case MsgType::kStagedResult: {
            if (in_order_.empty()) {
                *why = fmt::format("the agent sent {} with no request waiting for one",
                                   channel::msg_type_name(type));
                return false;
            }
            Waiter *w = in_order_.front();
            in_order_.pop_front();
            w->type = type;
            w->payload = std::move(payload);
            w->done = true;
            return true;
        }
        case MsgType::kTeamReady: {
            control::TeamReady ready;
            std::string error;
            if (control::decode(payload.data(), payload.size(), &ready, &error) != DP_OK) {
                *why = "the agent sent an unreadable answer: " + error;
                return false;
            }
            auto it = joins_.find(ready.join_id);
            if (it == joins_.end()) {
                *why = fmt::format("the agent answered join {}, which no thread waits for",
                                   ready.join_id);
                return false;
            }
            const size_t expected = control::ready_fds(ready);
            const size_t got = segments.size();
            if (!whole_batch(got, expected)) {
                *why = fmt::format("the agent answered join {} with {} fds of the {} its "
                                   "views need",
                                   ready.join_id, got, expected);
                return false;
            }
            Waiter *w = it->second;
            w->ready = std::move(ready);
            w->segments = std::move(segments);
            if (w->segments.size() < expected) {  // the rest in TEAM_VIEWS
                views_for_ = w->ready.join_id;
                views_expected_ = expected;
                return true;
            }
            joins_.erase(it);
            w->done = true;
            return true;
        }
        case MsgType::kTeamViews: {
            uint64_t join_id = 0;
            std::string error;
            if (control::decode_team_views(payload.data(), payload.size(), &join_id, &error) !=
                DP_OK) {
                *why = "the agent sent an unreadable answer: " + error;
                return false;
            }
            auto it = joins_.find(join_id);
            if (!views_for_ || join_id != views_for_ || it == joins_.end()) {
                *why = fmt::format("the agent sent views for join {}, which waits for none",
                                   join_id);
                return false;
            }
            Waiter *w = it->second;
            const size_t left = views_expected_ - w->segments.size();
            if (segments.empty() || !whole_batch(segments.size(), left)) {
                *why = fmt::format("the agent sent {} of join {}'s {} remaining views",
                                   segments.size(), join_id, left);
                return false;
            }
            for (Segment &v : segments) w->segments.push_back(std::move(v));
            if (w->segments.size() < views_expected_) return true;
            views_for_ = 0;
            views_expected_ = 0;
            joins_.erase(it);
            w->done = true;
            return true;
        }
        default:
            *why = fmt::format("the agent sent {} unasked", channel::msg_type_name(type));
            return false;
    }
}

void ControlChannel::break_locked(std::string why) {
    if (broken_) return;
    broken_ = true;
    broken_why_ = std::move(why);
    // Their threads find broken_ and return; nobody touches them again.
    in_order_.clear();
    joins_.clear();
    views_for_ = 0;
    changed_.notify_all();
}

void ControlChannel::report_lost(std::unique_lock<std::mutex> &lock) {
    if (lost_reported_) return;
    lost_reported_ = true;
    const std::string why = broken_why_;
    // The hook takes the context's path to fail(): not under our lock.
    lock.unlock();
    if (hooks_.lost) hooks_.lost(why);
    lock.lock();
}

}  // namespace deputy::client
