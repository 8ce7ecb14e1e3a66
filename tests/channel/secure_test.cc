// The secure session over an in-memory link whose frames the test controls,
// as an attacker on the network would: round trips, a wrong key, a plain
// peer, and every way to break a stream (tampered byte, tampered type,
// replay, reorder, drop, truncation, frames after the end), each ending the
// session with its exact status.
#include "channel/secure.h"

#include <gtest/gtest.h>

#include <thread>

#include "channel/hello.h"
#include "channel_test_util.h"

namespace deputy::channel::test {
namespace {

std::shared_ptr<secure::Key> key_from(uint32_t seed) {
    auto key = std::make_shared<secure::Key>();
    auto bytes = pattern(secure::kKeyBytes, seed);
    std::copy(bytes.begin(), bytes.end(), key->bytes.begin());
    return key;
}

struct Session {
    MemoryLink link;
    std::unique_ptr<Transport> initiator, responder;
    dp_status_t initiator_status = DP_ERR_INTERNAL, responder_status = DP_ERR_INTERNAL;

    Session(const secure::Key &ikey, const secure::Key &rkey) {
        std::unique_ptr<Transport> a = std::move(link.a), b = std::move(link.b);
        std::thread t([&] {
            initiator_status = secure::establish(std::move(a), ikey, secure::Role::kInitiator,
                                                 kTestTimeoutNs, &initiator);
        });
        responder_status = secure::establish(std::move(b), rkey, secure::Role::kResponder,
                                             kTestTimeoutNs, &responder);
        t.join();
    }
    // Frames on the wire from initiator to responder.
    std::deque<MemoryLink::Frame> &wire() { return link.a_to_b->frames; }
};

class SecureTest : public ::testing::Test {
  protected:
    void SetUp() override {
        key = key_from(7);
        s = std::make_unique<Session>(*key, *key);
        ASSERT_EQ(s->initiator_status, DP_OK);
        ASSERT_EQ(s->responder_status, DP_OK);
        ASSERT_TRUE(s->wire().empty());  // the handshake consumed its frames
    }
    void send_data(int count) {
        for (int i = 0; i < count; ++i) {
            auto bytes = pattern(100 + i, i);
            ASSERT_EQ(s->initiator->send(MsgType::kData, bytes.data(), bytes.size(), 0), DP_OK);
        }
    }
    void expect_data(int index) {
        Received r = receive(*s->responder, 0);
        ASSERT_EQ(r.status, DP_OK) << index;
        EXPECT_EQ(r.type, MsgType::kData);
        EXPECT_EQ(r.bytes, pattern(100 + index, index));
    }
    // After an attack the session is over for good, in both directions.
    void expect_ended(dp_status_t status) {
        EXPECT_EQ(receive(*s->responder, 0).status, status);
        EXPECT_EQ(s->responder->send(MsgType::kData, "x", 1, 0), status);
    }
    std::shared_ptr<secure::Key> key;
    std::unique_ptr<Session> s;
};

TEST_F(SecureTest, RoundTripBothDirectionsAndCiphertextOnTheWire) {
    for (size_t size : {size_t(0), size_t(1), size_t(17), size_t(4096), kDefaultMaxMessage}) {
        auto bytes = pattern(size, uint32_t(size));
        ASSERT_EQ(s->initiator->send(MsgType::kData, bytes.data(), bytes.size(), 0), DP_OK);
        ASSERT_EQ(s->wire().size(), 1u);
        const MemoryLink::Frame &f = s->wire().front();
        EXPECT_EQ(f.type, MsgType::kData);  // the type travels in clear, authenticated
        ASSERT_EQ(f.bytes.size(), size + secure::kOverhead);
        if (size >= 16) {  // the payload does not appear in clear
            EXPECT_NE(std::vector<uint8_t>(f.bytes.begin(), f.bytes.begin() + 16),
                      std::vector<uint8_t>(bytes.begin(), bytes.begin() + 16));
        }
        Received r = receive(*s->responder, 0);
        ASSERT_EQ(r.status, DP_OK);
        EXPECT_EQ(r.bytes, bytes);
        ASSERT_EQ(s->responder->send(MsgType::kHello, bytes.data(), bytes.size(), 0), DP_OK);
        Received back = receive(*s->initiator, 0);
        ASSERT_EQ(back.status, DP_OK);
        EXPECT_EQ(back.type, MsgType::kHello);
        EXPECT_EQ(back.bytes, bytes);
    }
    EXPECT_EQ(s->initiator->kind(), "secure+memory");
    EXPECT_EQ(s->initiator->max_message(), kDefaultMaxMessage);
    std::vector<uint8_t> big(kDefaultMaxMessage + 1);
    EXPECT_EQ(s->initiator->send(MsgType::kData, big.data(), big.size(), 0), DP_ERR_TOO_LARGE);
    EXPECT_TRUE(s->wire().empty());
}

TEST_F(SecureTest, TamperedByteEndsTheSession) {
    send_data(3);
    s->wire()[1].bytes[5] ^= 0x01;
    expect_data(0);
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, TamperedMacEndsTheSession) {
    send_data(1);
    s->wire()[0].bytes.back() ^= 0x80;
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, TamperedTypeEndsTheSession) {
    send_data(2);
    s->wire()[0].type = MsgType::kError;  // authenticated as associated data
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, ReplayedFrameEndsTheSession) {
    send_data(2);
    MemoryLink::Frame copy = s->wire()[0];
    expect_data(0);
    expect_data(1);
    s->wire().push_back(copy);
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, ReorderedFramesEndTheSession) {
    send_data(2);
    std::swap(s->wire()[0], s->wire()[1]);
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, DroppedFrameEndsTheSession) {
    send_data(3);
    s->wire().erase(s->wire().begin() + 1);
    expect_data(0);
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, TruncatedStreamIsAgentLost) {
    send_data(2);
    uint8_t end[kEndBytes] = {2};
    ASSERT_EQ(s->initiator->send(MsgType::kEnd, end, sizeof(end), 0), DP_OK);
    s->wire().pop_back();  // the attacker drops END (TAG_FINAL) and closes
    s->link.a_to_b->closed = true;
    expect_data(0);
    expect_data(1);
    expect_ended(DP_ERR_AGENT_LOST);
}

TEST_F(SecureTest, EndCarriesTheFinalTagAndNothingMayFollow) {
    send_data(1);
    uint8_t end[kEndBytes] = {1};
    ASSERT_EQ(s->initiator->send(MsgType::kEnd, end, sizeof(end), 0), DP_OK);
    EXPECT_EQ(s->initiator->send(MsgType::kData, "x", 1, 0), DP_ERR_INVALID);  // stream finished
    MemoryLink::Frame end_frame = s->wire().back();
    expect_data(0);
    Received r = receive(*s->responder, 0);
    ASSERT_EQ(r.status, DP_OK);
    EXPECT_EQ(r.type, MsgType::kEnd);
    EXPECT_EQ(r.bytes, std::vector<uint8_t>({1, 0, 0, 0, 0, 0, 0, 0}));
    // After the final frame the peer closing is normal, not truncation...
    s->wire().push_back(end_frame);  // ...but a replayed END is an attack
    expect_ended(DP_ERR_DENIED);
}

TEST_F(SecureTest, EndRelabelledAsDataIsRefused) {
    uint8_t end[kEndBytes] = {};
    ASSERT_EQ(s->initiator->send(MsgType::kEnd, end, sizeof(end), 0), DP_OK);
    s->wire()[0].type = MsgType::kData;
    expect_ended(DP_ERR_DENIED);
}

TEST(SecureHandshake, DifferentKeysAreDenied) {
    auto a = key_from(1), b = key_from(2);
    Session s(*a, *b);
    EXPECT_EQ(s.initiator_status, DP_ERR_DENIED);
    EXPECT_EQ(s.responder_status, DP_ERR_DENIED);
    EXPECT_FALSE(s.initiator);
    EXPECT_FALSE(s.responder);
}

TEST(SecureHandshake, PlainPeerIsDeniedOnBothSides) {
    MemoryLink link;
    auto key = key_from(3);
    std::unique_ptr<Transport> secured;
    dp_status_t secure_status = DP_ERR_INTERNAL;
    std::unique_ptr<Transport> a = std::move(link.a);
    std::thread t([&] {
        secure_status = secure::establish(std::move(a), *key, secure::Role::kInitiator,
                                          kTestTimeoutNs, &secured);
    });
    Hello mine, theirs;
    EXPECT_EQ(exchange_hello(*link.b, mine, kTestTimeoutNs, &theirs), DP_ERR_DENIED);
    t.join();
    EXPECT_EQ(secure_status, DP_ERR_DENIED);
}

TEST(SecureHandshake, SilentPeerTimesOut) {
    MemoryLink link;
    auto key = key_from(4);
    std::unique_ptr<Transport> secured;
    EXPECT_EQ(
        secure::establish(std::move(link.a), *key, secure::Role::kInitiator, 20'000'000, &secured),
        DP_ERR_TIMEOUT);
}

TEST(SecureHandshake, ReflectedKeyExchangeIsDenied) {
    // An attacker echoes our own KEY_EXCHANGE back: same role, same key.
    MemoryLink link;
    auto key = key_from(5);
    std::unique_ptr<Transport> secured;
    dp_status_t status = DP_ERR_INTERNAL;
    std::unique_ptr<Transport> a = std::move(link.a);
    std::thread t([&] {
        status = secure::establish(std::move(a), *key, secure::Role::kInitiator, kTestTimeoutNs,
                                   &secured);
    });
    Received ours = receive(*link.b);
    ASSERT_EQ(ours.status, DP_OK);
    ASSERT_EQ(ours.type, MsgType::kKeyExchange);
    ASSERT_EQ(link.b->send(ours.type, ours.bytes.data(), ours.bytes.size(), 0), DP_OK);
    t.join();
    EXPECT_EQ(status, DP_ERR_DENIED);
}

}  // namespace
}  // namespace deputy::channel::test
