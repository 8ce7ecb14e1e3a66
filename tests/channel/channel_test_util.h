// Shared helpers of the channel tests: connected transport pairs over every
// transport (both ends in this process, as an agent and a client would be),
// an in-memory transport whose queued frames a test can alter (the "network"
// an attacker controls), byte patterns, and an fd count for leak checks.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel/endpoint.h"
#include "channel/transport.h"

namespace deputy::channel::test {

inline constexpr int64_t kTestTimeoutNs = 20'000'000'000;  // generous: CI machines are slow

// Open fds of this process (/proc/self/fd, minus the directory's own fd).
inline int count_fds() {
    int n = 0;
    DIR *dir = opendir("/proc/self/fd");
    if (dir == nullptr) return -1;
    while (dirent *e = readdir(dir))
        if (e->d_name[0] != '.') ++n;
    closedir(dir);
    return n - 1;
}

// Deterministic bytes that differ between messages and positions.
inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = uint8_t(x);
    }
    return v;
}

// A fresh abstract Unix socket name: no file to clean, unique per test.
inline std::string unique_address() {
    static std::atomic<int> counter{0};
    return "@deputy-channel-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

struct Pair {
    std::unique_ptr<Transport> listener_side;  // accepted (creator of shm segments)
    std::unique_ptr<Transport> connect_side;
};

// Listens and connects (in a helper thread) with `config`; the address is
// filled in when empty. Fails the test if either side fails.
inline Pair connect_pair(EndpointConfig config) {
    if (config.address.empty())
        config.address = config.kind == TransportKind::kTcp ? "127.0.0.1:0" : unique_address();
    Pair pair;
    std::unique_ptr<EndpointListener> listener;
    EXPECT_EQ(EndpointListener::open(config, &listener), DP_OK);
    if (!listener) return pair;
    EndpointConfig client = config;
    client.address = listener->address();
    dp_status_t connected = DP_ERR_INTERNAL;
    std::thread t(
        [&] { connected = connect_endpoint(client, kTestTimeoutNs, &pair.connect_side); });
    dp_status_t accepted = listener->accept(kTestTimeoutNs, &pair.listener_side);
    t.join();
    EXPECT_EQ(accepted, DP_OK);
    EXPECT_EQ(connected, DP_OK);
    return pair;
}

// Receives one message into a vector sized to the transport's limit.
struct Received {
    dp_status_t status = DP_ERR_INTERNAL;
    MsgType type = MsgType::kInvalid;
    std::vector<uint8_t> bytes;
};
inline Received receive(Transport &t, int64_t timeout_ns = kTestTimeoutNs) {
    Received r;
    r.bytes.resize(t.max_message());
    size_t length = 0;
    r.status = t.recv(&r.type, r.bytes.data(), r.bytes.size(), &length, timeout_ns);
    r.bytes.resize(r.status == DP_OK ? length : 0);
    return r;
}

// `count` messages of pattern bytes, message i of size_of(i) bytes from
// seed + i, sent in order; and the same received and checked.
template <typename SizeOf>
void send_patterns(Transport &t, uint32_t seed, uint32_t count, SizeOf size_of) {
    for (uint32_t i = 0; i < count; ++i) {
        auto bytes = pattern(size_of(i), seed + i);
        ASSERT_EQ(t.send(MsgType::kData, bytes.data(), bytes.size(), kTestTimeoutNs), DP_OK) << i;
    }
}
template <typename SizeOf>
void receive_patterns(Transport &t, uint32_t seed, uint32_t count, SizeOf size_of) {
    for (uint32_t i = 0; i < count; ++i) {
        Received r = receive(t);
        ASSERT_EQ(r.status, DP_OK) << i;
        ASSERT_EQ(r.bytes, pattern(size_of(i), seed + i)) << i;
    }
}

// An in-memory transport pair: frames wait in a queue per direction, where
// a test can read, alter, drop, duplicate or reorder them before the other
// side receives them. close_write() makes the receiver see the peer close.
class MemoryLink {
  public:
    struct Frame {
        MsgType type;
        std::vector<uint8_t> bytes;
    };
    struct Queue {
        std::mutex mutex;
        std::condition_variable ready;
        std::deque<Frame> frames;
        bool closed = false;
    };

    class End final : public Transport {
      public:
        End(std::shared_ptr<Queue> in, std::shared_ptr<Queue> out, size_t max)
            : in_(std::move(in)), out_(std::move(out)), max_(max) {}
        ~End() override { shutdown(); }
        dp_status_t send(MsgType type, const void *payload, size_t length, int64_t) override {
            if (length > max_) return DP_ERR_TOO_LARGE;
            std::lock_guard<std::mutex> lock(out_->mutex);
            if (out_->closed) return DP_ERR_AGENT_LOST;
            const auto *p = static_cast<const uint8_t *>(payload);
            out_->frames.push_back({type, std::vector<uint8_t>(p, p + length)});
            out_->ready.notify_all();
            return DP_OK;
        }
        dp_status_t recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                         int64_t timeout_ns) override {
            std::unique_lock<std::mutex> lock(in_->mutex);
            auto has = [&] { return !in_->frames.empty() || in_->closed; };
            if (timeout_ns < 0)
                in_->ready.wait(lock, has);
            else if (!in_->ready.wait_for(lock, std::chrono::nanoseconds(timeout_ns), has))
                return DP_ERR_TIMEOUT;
            if (in_->frames.empty()) return DP_ERR_AGENT_LOST;
            Frame f = std::move(in_->frames.front());
            in_->frames.pop_front();
            if (f.bytes.size() > capacity) return DP_ERR_TOO_LARGE;
            if (!f.bytes.empty()) std::memcpy(buffer, f.bytes.data(), f.bytes.size());
            *type = f.type;
            *length = f.bytes.size();
            return DP_OK;
        }
        size_t max_message() const override { return max_; }
        void shutdown() override {
            for (auto &q : {in_, out_}) {
                std::lock_guard<std::mutex> lock(q->mutex);
                q->closed = true;
                q->ready.notify_all();
            }
        }
        std::string kind() const override { return "memory"; }
        std::string peer() const override { return "test"; }
        size_t buffer_bytes() const override { return 0; }

      private:
        std::shared_ptr<Queue> in_, out_;
        size_t max_;
    };

    explicit MemoryLink(size_t max = kDefaultMaxMessage + 17)
        : a_to_b(std::make_shared<Queue>()), b_to_a(std::make_shared<Queue>()) {
        a = std::make_unique<End>(b_to_a, a_to_b, max);
        b = std::make_unique<End>(a_to_b, b_to_a, max);
    }

    std::shared_ptr<Queue> a_to_b, b_to_a;
    std::unique_ptr<Transport> a, b;
};

}  // namespace deputy::channel::test
