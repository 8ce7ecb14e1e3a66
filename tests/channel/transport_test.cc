// Every transport (shm, uds, tcp, each plain and secure, and a 64-byte shm
// ring that makes every message wrap and stream) against the Transport
// contract: bit-exact messages of every size in both directions, the limit
// refused with nothing sent, timeouts, an orderly close, and no fd leaked.
#include "channel/transport/uds/transport.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <thread>

#include "channel/secure.h"
#include "channel_test_util.h"

namespace deputy::channel::test {
namespace {

struct Variant {
    const char *name;
    TransportKind kind;
    bool secure;
    size_t buffer_bytes;
};

std::shared_ptr<const secure::Key> test_key() {
    auto key = std::make_shared<secure::Key>();
    auto bytes = pattern(secure::kKeyBytes, 42);
    std::copy(bytes.begin(), bytes.end(), key->bytes.begin());
    return key;
}

EndpointConfig config_for(const Variant &v) {
    EndpointConfig c;
    c.kind = v.kind;
    c.secure = v.secure;
    c.allow_insecure_tcp = !v.secure;
    c.options.buffer_bytes = v.buffer_bytes;
    if (v.secure) c.key = test_key();
    return c;
}

class TransportTest : public ::testing::TestWithParam<Variant> {};

// 0, 1, odd, around the frame padding and the ring size, around the stream
// read buffer (64 KiB), and the limit itself.
std::vector<size_t> interesting_sizes(size_t max) {
    return {0,    1,    7,     8,     9,     63,    64,     65,      255, 4095,
            4096, 4097, 32767, 65535, 65536, 65537, 100003, max - 1, max};
}

// Sends every size from one end while the other receives and compares.
void exchange_all_sizes(Transport &from, Transport &to, uint32_t seed) {
    const auto sizes = interesting_sizes(from.max_message());
    std::thread sender([&] {
        for (size_t i = 0; i < sizes.size(); ++i) {
            auto bytes = pattern(sizes[i], seed + uint32_t(i));
            ASSERT_EQ(from.send(MsgType::kData, bytes.data(), bytes.size(), kTestTimeoutNs), DP_OK)
                << "size " << sizes[i];
        }
    });
    for (size_t i = 0; i < sizes.size(); ++i) {
        Received r = receive(to);
        ASSERT_EQ(r.status, DP_OK) << "size " << sizes[i];
        EXPECT_EQ(r.type, MsgType::kData);
        ASSERT_EQ(r.bytes, pattern(sizes[i], seed + uint32_t(i))) << "size " << sizes[i];
    }
    sender.join();
}

TEST_P(TransportTest, EverySizeBothDirectionsBitExact) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    EXPECT_EQ(p.listener_side->max_message(), kDefaultMaxMessage);
    EXPECT_EQ(p.connect_side->max_message(), kDefaultMaxMessage);
    exchange_all_sizes(*p.connect_side, *p.listener_side, 1);
    exchange_all_sizes(*p.listener_side, *p.connect_side, 1000);
}

TEST_P(TransportTest, TypesArriveAsSent) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    const MsgType types[] = {MsgType::kHello, MsgType::kData, MsgType::kError};
    // A thread sends: three frames need not fit a 64-byte ring at once.
    std::thread sender([&] {
        for (MsgType t : types) ASSERT_EQ(p.connect_side->send(t, "ab", 2, kTestTimeoutNs), DP_OK);
    });
    for (MsgType t : types) {
        Received r = receive(*p.listener_side);
        ASSERT_EQ(r.status, DP_OK);
        EXPECT_EQ(r.type, t);
        EXPECT_EQ(r.bytes, std::vector<uint8_t>({'a', 'b'}));
    }
    sender.join();
}

TEST_P(TransportTest, OversizeIsRefusedBeforeAnythingIsSent) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    std::vector<uint8_t> big(kDefaultMaxMessage + 1, 0x5A);
    EXPECT_EQ(p.connect_side->send(MsgType::kData, big.data(), big.size(), kTestTimeoutNs),
              DP_ERR_TOO_LARGE);
    // Nothing of it reached the peer: the next message is the first one seen,
    // and the channel still works both ways.
    ASSERT_EQ(p.connect_side->send(MsgType::kData, "after", 5, kTestTimeoutNs), DP_OK);
    Received r = receive(*p.listener_side);
    ASSERT_EQ(r.status, DP_OK);
    EXPECT_EQ(r.bytes, std::vector<uint8_t>({'a', 'f', 't', 'e', 'r'}));
    EXPECT_EQ(receive(*p.listener_side, 20'000'000).status, DP_ERR_TIMEOUT);
    ASSERT_EQ(p.listener_side->send(MsgType::kData, "x", 1, kTestTimeoutNs), DP_OK);
    EXPECT_EQ(receive(*p.connect_side).status, DP_OK);
}

TEST_P(TransportTest, TimeoutLeavesTheChannelUsable) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    EXPECT_EQ(receive(*p.listener_side, 0).status, DP_ERR_TIMEOUT);
    EXPECT_EQ(receive(*p.listener_side, 30'000'000).status, DP_ERR_TIMEOUT);
    ASSERT_EQ(p.connect_side->send(MsgType::kData, "late", 4, kTestTimeoutNs), DP_OK);
    Received r = receive(*p.listener_side);
    ASSERT_EQ(r.status, DP_OK);
    EXPECT_EQ(r.bytes.size(), 4u);
}

TEST_P(TransportTest, MessagesBeforeCloseArriveThenAgentLost) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    // Sent from a thread (a small ring holds less than the three), closed
    // right after the last send returns, possibly before it was read.
    std::thread sender([&] {
        for (uint32_t i = 0; i < 3; ++i) {
            auto bytes = pattern(1000 + i, i);
            ASSERT_EQ(
                p.connect_side->send(MsgType::kData, bytes.data(), bytes.size(), kTestTimeoutNs),
                DP_OK);
        }
        p.connect_side->shutdown();
    });
    for (uint32_t i = 0; i < 3; ++i) {
        Received r = receive(*p.listener_side);
        ASSERT_EQ(r.status, DP_OK) << i;
        EXPECT_EQ(r.bytes, pattern(1000 + i, i));
    }
    sender.join();
    EXPECT_EQ(receive(*p.listener_side).status, DP_ERR_AGENT_LOST);
    EXPECT_EQ(p.listener_side->send(MsgType::kData, "x", 1, kTestTimeoutNs), DP_ERR_AGENT_LOST);
    // The side that shut down refuses too.
    EXPECT_EQ(p.connect_side->send(MsgType::kData, "x", 1, kTestTimeoutNs), DP_ERR_AGENT_LOST);
}

TEST_P(TransportTest, ShutdownUnblocksAWaitingReceiver) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    dp_status_t got = DP_OK;
    std::thread waiter([&] { got = receive(*p.listener_side, kTestTimeoutNs).status; });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    p.listener_side->shutdown();  // from another thread, as the bench's error path does
    waiter.join();
    EXPECT_EQ(got, DP_ERR_AGENT_LOST);
}

TEST_P(TransportTest, NoFdLeaked) {
    const int before = count_fds();
    for (int round = 0; round < 3; ++round) {
        Pair p = connect_pair(config_for(GetParam()));
        ASSERT_TRUE(p.listener_side && p.connect_side);
        ASSERT_EQ(p.connect_side->send(MsgType::kData, "x", 1, kTestTimeoutNs), DP_OK);
        ASSERT_EQ(receive(*p.listener_side).status, DP_OK);
    }
    EXPECT_EQ(count_fds(), before);
}

INSTANTIATE_TEST_SUITE_P(
    AllTransports, TransportTest,
    ::testing::Values(Variant{"shm", TransportKind::kShm, false, 0},
                      Variant{"shm_ring64", TransportKind::kShm, false, 64},
                      Variant{"shm_ring4k", TransportKind::kShm, false, 4096},
                      Variant{"uds", TransportKind::kUds, false, 0},
                      Variant{"uds_buffer4k", TransportKind::kUds, false, 4096},
                      Variant{"tcp", TransportKind::kTcp, false, 0},
                      Variant{"secure_shm", TransportKind::kShm, true, 0},
                      Variant{"secure_shm_ring64", TransportKind::kShm, true, 64},
                      Variant{"secure_uds", TransportKind::kUds, true, 0},
                      Variant{"secure_tcp", TransportKind::kTcp, true, 0}),
    [](const ::testing::TestParamInfo<Variant> &info) { return std::string(info.param.name); });

TEST(Endpoint, PlainTcpNeedsExplicitConsent) {
    EndpointConfig c;
    c.kind = TransportKind::kTcp;
    c.address = "127.0.0.1:0";
    std::unique_ptr<EndpointListener> l;
    EXPECT_EQ(EndpointListener::open(c, &l), DP_ERR_DENIED);
    std::unique_ptr<Transport> t;
    EXPECT_EQ(connect_endpoint(c, 1'000'000, &t), DP_ERR_DENIED);
    c.allow_insecure_tcp = true;
    EXPECT_EQ(check_config(c), DP_OK);
    c.allow_insecure_tcp = false;
    c.secure = true;
    EXPECT_EQ(check_config(c), DP_ERR_INVALID);  // secure without a key
    c.key = test_key();
    EXPECT_EQ(check_config(c), DP_OK);
    c.options.max_message = kMaxMessageCeiling + 1;
    EXPECT_EQ(check_config(c), DP_ERR_INVALID);
}

TEST(Endpoint, ConnectingToNobodyIsNoAgent) {
    EndpointConfig c;
    c.kind = TransportKind::kUds;
    c.address = unique_address();
    std::unique_ptr<Transport> t;
    EXPECT_EQ(connect_endpoint(c, 50'000'000, &t), DP_ERR_NO_AGENT);
    c.kind = TransportKind::kShm;
    EXPECT_EQ(connect_endpoint(c, 50'000'000, &t), DP_ERR_NO_AGENT);
    EXPECT_FALSE(t);
}

TEST(Endpoint, AcceptTimesOut) {
    EndpointConfig c;
    c.kind = TransportKind::kUds;
    c.address = unique_address();
    std::unique_ptr<EndpointListener> l;
    ASSERT_EQ(EndpointListener::open(c, &l), DP_OK);
    std::unique_ptr<Transport> t;
    EXPECT_EQ(l->accept(20'000'000, &t), DP_ERR_TIMEOUT);
}

TEST(Uds, AcceptReportsThePeersCredentials) {
    std::unique_ptr<uds::Listener> listener;
    ASSERT_EQ(uds::Listener::listen(unique_address(), &listener), DP_OK);
    std::unique_ptr<Transport> client, server;
    std::thread t(
        [&] { EXPECT_EQ(uds::connect(listener->address(), {}, kTestTimeoutNs, &client), DP_OK); });
    sock::PeerCredentials creds;
    ASSERT_EQ(listener->accept({}, kTestTimeoutNs, &server, &creds), DP_OK);
    t.join();
    EXPECT_EQ(creds.pid, getpid());
    EXPECT_EQ(creds.uid, getuid());
    EXPECT_EQ(creds.gid, getgid());
}

TEST(Uds, StaleSocketFileIsReplacedAndOwnFileRemoved) {
    const std::string path = ::testing::TempDir() + "deputy_uds_" + std::to_string(getpid());
    unlink(path.c_str());
    {
        std::unique_ptr<uds::Listener> first;
        ASSERT_EQ(uds::Listener::listen(path, &first), DP_OK);
        std::unique_ptr<uds::Listener> second;
        EXPECT_EQ(uds::Listener::listen(path, &second), DP_ERR_IO);  // someone listens
    }
    EXPECT_NE(access(path.c_str(), F_OK), 0);  // the listener removed its file
    // A file left by a process that died (bound, never closed cleanly).
    UniqueFd stale(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(bind(stale.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
    stale.reset();
    std::unique_ptr<uds::Listener> fresh;
    EXPECT_EQ(uds::Listener::listen(path, &fresh), DP_OK);
}

TEST(Endpoint, TransportNames) {
    TransportKind k;
    EXPECT_TRUE(parse_transport_kind("shm", &k));
    EXPECT_EQ(k, TransportKind::kShm);
    EXPECT_TRUE(parse_transport_kind("tcp", &k));
    EXPECT_EQ(k, TransportKind::kTcp);
    EXPECT_FALSE(parse_transport_kind("rdma", &k));
    EXPECT_STREQ(transport_kind_name(TransportKind::kUds), "uds");
}

}  // namespace
}  // namespace deputy::channel::test
