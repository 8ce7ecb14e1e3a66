// Races (also run under ThreadSanitizer): both directions at once with a
// sending and a receiving thread on each side, small rings and no spinning so
// that every doorbell and futex path is taken, and shutdown racing blocked
// calls.
#include <gtest/gtest.h>

#include <thread>

#include "channel_test_util.h"

namespace deputy::channel::test {
namespace {

struct Variant {
    const char *name;
    TransportKind kind;
    bool secure;
    size_t buffer_bytes;
    int64_t spin_ns;
};

EndpointConfig config_for(const Variant &v) {
    EndpointConfig c;
    c.kind = v.kind;
    c.secure = v.secure;
    c.allow_insecure_tcp = true;
    c.options.buffer_bytes = v.buffer_bytes;
    c.options.spin_ns = v.spin_ns;
    if (v.secure) {
        auto key = std::make_shared<secure::Key>();
        key->bytes.fill(9);
        c.key = key;
    }
    return c;
}

class DuplexTest : public ::testing::TestWithParam<Variant> {};

// Under ThreadSanitizer every byte of the patterns is instrumented: fewer
// messages (still hundreds of ring wraps on the small rings) keep the run to
// seconds instead of minutes per variant.
#if defined(__SANITIZE_THREAD__)
constexpr uint32_t kMessages = 500;
#else
constexpr uint32_t kMessages = 3000;
#endif

size_t size_of(uint32_t i) {
    return i % 7 == 0 ? (i * 37) % 9000 : i % 300;
}

void sender(Transport &t, uint32_t seed) { send_patterns(t, seed, kMessages, size_of); }

void receiver(Transport &t, uint32_t seed) { receive_patterns(t, seed, kMessages, size_of); }

TEST_P(DuplexTest, BothDirectionsAtOnce) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    std::thread a_send([&] { sender(*p.listener_side, 1); });
    std::thread a_recv([&] { receiver(*p.listener_side, 100000); });
    std::thread b_send([&] { sender(*p.connect_side, 100000); });
    receiver(*p.connect_side, 1);
    a_send.join();
    a_recv.join();
    b_send.join();
}

TEST_P(DuplexTest, ShutdownRacesBlockedCalls) {
    Pair p = connect_pair(config_for(GetParam()));
    ASSERT_TRUE(p.listener_side && p.connect_side);
    // One thread blocks receiving, another sends until the ring or socket
    // buffer is full and blocks too; a third shuts the channel down.
    dp_status_t recv_status = DP_OK, send_status = DP_OK;
    std::thread r([&] { recv_status = receive(*p.listener_side).status; });
    std::thread s([&] {
        std::vector<uint8_t> bytes(60000);
        for (;;) {
            send_status =
                p.listener_side->send(MsgType::kData, bytes.data(), bytes.size(), kTestTimeoutNs);
            if (send_status != DP_OK) break;
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.listener_side->shutdown();
    r.join();
    s.join();
    EXPECT_EQ(recv_status, DP_ERR_AGENT_LOST);
    EXPECT_EQ(send_status, DP_ERR_AGENT_LOST);
}

INSTANTIATE_TEST_SUITE_P(
    Races, DuplexTest,
    ::testing::Values(Variant{"shm", TransportKind::kShm, false, 0, 20000},
                      Variant{"shm_ring64_nospin", TransportKind::kShm, false, 64, 0},
                      Variant{"shm_ring1k_nospin", TransportKind::kShm, false, 1024, 0},
                      Variant{"shm_ring256_spin", TransportKind::kShm, false, 256, 5000},
                      Variant{"uds", TransportKind::kUds, false, 0, 0},
                      Variant{"tcp", TransportKind::kTcp, false, 0, 0},
                      Variant{"secure_shm_ring1k", TransportKind::kShm, true, 1024, 0},
                      Variant{"secure_uds", TransportKind::kUds, true, 0, 0}),
    [](const ::testing::TestParamInfo<Variant> &info) { return std::string(info.param.name); });

}  // namespace
}  // namespace deputy::channel::test
