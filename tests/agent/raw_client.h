// A client of the agent speaking the protocol by hand: its own ATTACH, its
// own mapping of the segment and its own ring pushes, none of libdeputy's
// checks. The hostile-client suite attacks with it.
#pragma once

#include <deputy/deputy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "channel/client_segment.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/segment.h"
#include "mover/work_queue.h"

namespace deputy::testing {

// A client speaking the protocol by hand: its own ATTACH, its own mapping
// of the segment and its own ring pushes, none of the library's checks.
struct RawClient {
    using MsgType = channel::MsgType;
    UniqueFd fd;
    Segment segment;
    channel::control::Attached attached;
    mover::WorkQueue ring;
    UniqueFd doorbell;

    bool connect(const char *socket) {
        return channel::uds::connect_fd(socket, 2'000'000'000, &fd) == DP_OK;
    }
    // attach_message: the ATTACH to send (pool_bytes is then ignored).
    bool attach(const char *socket, uint64_t pool = 1 << 20,
                const channel::control::Attach *attach_message = nullptr,
                channel::control::Reply *refusal = nullptr) {
        if (!connect(socket)) return false;
        channel::control::Attach a;
        a.pool_bytes = pool;
        if (attach_message) a = *attach_message;
        std::vector<uint8_t> payload;
        channel::control::encode(a, &payload);
        if (channel::control::send_message(fd.get(), MsgType::kAttach, payload, nullptr, 0,
                                           2'000'000'000, "raw") != DP_OK)
            return false;
        MsgType type;
        std::vector<uint8_t> answer;
        UniqueFd fds[2];
        size_t nfds = 0;
        if (channel::control::recv_message(fd.get(), channel::control::kMaxControlMessage, &type,
                                           &answer, fds, 2, &nfds, 5'000'000'000, "raw") != DP_OK ||
            type != MsgType::kAttached || nfds != 2) {
            std::string why;
            if (refusal && type == MsgType::kReply)
                channel::control::decode(answer.data(), answer.size(), refusal, &why);
            return false;
        }
        std::string error;
        if (channel::control::decode(answer.data(), answer.size(), &attached, &error) != DP_OK)
            return false;
        if (Segment::map(std::move(fds[0]), attached.segment_bytes, &segment,
                         Segment::Pages::lazy) != DP_OK)
            return false;
        doorbell = std::move(fds[1]);
        ring = mover::WorkQueue(segment.at(attached.ring_offset));
        channel::control::Register base{reinterpret_cast<uint64_t>(segment.data()), segment.size(),
                                        channel::control::RegionKind::kSegmentBase};
        payload.clear();
        channel::control::encode(base, &payload);
        return request(MsgType::kRegister, payload) == DP_OK;
    }
    dp_status_t request(MsgType type, const std::vector<uint8_t> &payload) {
        if (channel::control::send_message(fd.get(), type, payload, nullptr, 0, 2'000'000'000,
                                           "raw") != DP_OK)
            return DP_ERR_IO;
        MsgType answer_type;
        std::vector<uint8_t> answer;
        if (channel::control::recv_message(fd.get(), channel::control::kMaxControlMessage,
                                           &answer_type, &answer, nullptr, 0, nullptr,
                                           2'000'000'000, "raw") != DP_OK)
            return DP_ERR_IO;
        channel::control::Reply reply;
        std::string error;
        if (answer_type != MsgType::kReply ||
            channel::control::decode(answer.data(), answer.size(), &reply, &error) != DP_OK)
            return DP_ERR_INTERNAL;
        return reply.status;
    }
    void push(const dp_desc_t &d) {
        while (!ring.push_dedicated(d, 0)) ring_doorbell(), std::this_thread::yield();
        ring_doorbell();
    }
    void ring_doorbell() {
        auto *h = reinterpret_cast<channel::ClientSegmentHeader *>(segment.data());
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (h->agent_sleeping.load()) {
            uint64_t one = 1;
            [[maybe_unused]] ssize_t n = write(doorbell.get(), &one, 8);
        }
    }
    uint8_t *pool() const { return reinterpret_cast<uint8_t *>(segment.at(attached.pool_offset)); }
    // Sends a TEAM_JOIN payload as it is and decodes the TEAM_READY that
    // answers it (within 2 s); false if anything else comes.
    bool team_join(const std::vector<uint8_t> &payload, channel::control::TeamReady *ready) {
        namespace control = channel::control;
        MsgType type;
        std::vector<uint8_t> answer;
        std::string error;
        return control::send_message(fd.get(), MsgType::kTeamJoin, payload, nullptr, 0,
                                     1'000'000'000, "raw") == DP_OK &&
               control::recv_message(fd.get(), control::kMaxControlMessage, &type, &answer,
                                     nullptr, 0, nullptr, 2'000'000'000, "raw") == DP_OK &&
               type == MsgType::kTeamReady &&
               control::decode(answer.data(), answer.size(), ready, &error) == DP_OK;
    }
};

// True once the agent closed `fd` (EOF or reset), waiting up to `seconds`.
inline bool closed_by_agent(int fd, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    do {
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } while (std::chrono::steady_clock::now() < end);
    return false;
}

}  // namespace deputy::testing
