// The relay (channel/relay.h) between a secure session and a local socket
// pair, raced (also under ThreadSanitizer): both directions at once through
// it, the owner closing while messages flow (the peer hears END, not a cut
// stream), the peer ending first, and the relay destroyed while its
// threads block.
#include <gtest/gtest.h>

#include <thread>

#include "channel/relay.h"
#include "channel/transport/uds/transport.h"
#include "channel_test_util.h"

namespace deputy::channel::test {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr uint32_t kMessages = 300;
#else
constexpr uint32_t kMessages = 2000;
#endif

size_t size_of(uint32_t i) { return i % 5 == 0 ? (i * 53) % 70000 : i % 200; }

// A secure session over uds: `peer` is one end, the relay gets the other;
// `owner` is the relay's local end as a transport.
struct Relayed {
    Relayed() {
        EndpointConfig c;
        c.kind = TransportKind::kUds;
        c.secure = true;
        auto key = std::make_shared<secure::Key>();
        key->bytes.fill(5);
        c.key = key;
        Pair p = connect_pair(c);
        if (!p.listener_side || !p.connect_side) return;
        peer = std::move(p.connect_side);
        UniqueFd local;
        if (Relay::start(std::move(p.listener_side), size_t(1) << 20, &local, &relay) != DP_OK)
            return;
        TransportOptions options;
        options.max_message = size_t(1) << 20;
        uds::wrap(std::move(local), "owner", options, &owner);
    }
    std::unique_ptr<Transport> peer, owner;
    std::unique_ptr<Relay> relay;
};

void send_all(Transport &t, uint32_t seed) { send_patterns(t, seed, kMessages, size_of); }

void receive_all(Transport &t, uint32_t seed) { receive_patterns(t, seed, kMessages, size_of); }

TEST(RelayRaces, BothDirectionsThroughTheRelay) {
    Relayed r;
    ASSERT_TRUE(r.peer && r.owner && r.relay);
    std::thread a([&] { send_all(*r.peer, 1); });
    std::thread b([&] { receive_all(*r.peer, 50000); });
    std::thread c([&] { send_all(*r.owner, 50000); });
    receive_all(*r.owner, 1);
    a.join();
    b.join();
    c.join();
    EXPECT_FALSE(r.relay->finished());
}

TEST(RelayRaces, TheOwnerClosingWhileMessagesFlowSendsTheEnd) {
    Relayed r;
    ASSERT_TRUE(r.peer && r.owner && r.relay);
    // The peer sends all along; the owner reads a few, then closes.
    std::thread sender([&] {
        std::vector<uint8_t> bytes(3000, 1);
        while (r.peer->send(MsgType::kData, bytes.data(), bytes.size(), kTestTimeoutNs) == DP_OK) {
        }
    });
    for (int i = 0; i < 10; ++i) ASSERT_EQ(receive(*r.owner).status, DP_OK);
    r.owner->shutdown();
    // The peer reads what was on its way, then END: the session ended in order.
    MsgType type = MsgType::kData;
    std::vector<uint8_t> buffer(size_t(1) << 20);
    size_t length = 0;
    std::thread reader([&] {
        while (r.peer->recv(&type, buffer.data(), buffer.size(), &length, kTestTimeoutNs) ==
                   DP_OK &&
               type != MsgType::kEnd) {
        }
    });
    reader.join();
    EXPECT_EQ(type, MsgType::kEnd);
    r.peer->shutdown();  // (a relay on the other side would answer END first)
    sender.join();
    r.relay.reset();  // joins both threads
}

TEST(RelayRaces, ThePeersEndClosesTheOwnersSocket) {
    Relayed r;
    ASSERT_TRUE(r.peer && r.owner && r.relay);
    ASSERT_EQ(r.peer->send(MsgType::kData, "x", 1, kTestTimeoutNs), DP_OK);
    ASSERT_EQ(r.peer->send(MsgType::kEnd, nullptr, 0, kTestTimeoutNs), DP_OK);
    Received first = receive(*r.owner);
    ASSERT_EQ(first.status, DP_OK);
    EXPECT_EQ(first.bytes, std::vector<uint8_t>{'x'});
    EXPECT_EQ(receive(*r.owner).status, DP_ERR_AGENT_LOST);
    // And the relay answered with its own END before it went.
    Received end = receive(*r.peer);
    EXPECT_EQ(end.status, DP_OK);
    EXPECT_EQ(end.type, MsgType::kEnd);
    for (int i = 0; i < 2000 && !r.relay->finished(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(r.relay->finished());
}

TEST(RelayRaces, DestroyedWhileItsThreadsBlock) {
    for (int round = 0; round < 3; ++round) {
        Relayed r;
        ASSERT_TRUE(r.peer && r.owner && r.relay);
        // Nobody sends: both threads block in recv; the destructor ends
        // them, the peer hearing END (and, as it never answers, the relay
        // waiting for its END no longer than a second).
        const auto start = std::chrono::steady_clock::now();
        r.relay.reset();
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
        EXPECT_EQ(receive(*r.owner).status, DP_ERR_AGENT_LOST);
        Received end = receive(*r.peer);
        EXPECT_EQ(end.type, MsgType::kEnd);
    }
}

}  // namespace
}  // namespace deputy::channel::test
