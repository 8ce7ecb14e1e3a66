// The wire format: message names, frame headers (every malformed field is
// refused with its exact status), HELLO and the send-size check.
#include "channel/message.h"

#include <gtest/gtest.h>

#include "channel/hello.h"

namespace deputy::channel {
namespace {

TEST(ChannelMessage, NamesCoverTheEnum) {
    EXPECT_STREQ(msg_type_name(MsgType::kInvalid), "INVALID");
    EXPECT_STREQ(msg_type_name(MsgType::kHello), "HELLO");
    EXPECT_STREQ(msg_type_name(MsgType::kData), "DATA");
    EXPECT_STREQ(msg_type_name(MsgType::kEnd), "END");
    EXPECT_STREQ(msg_type_name(MsgType::kError), "ERROR");
    EXPECT_STREQ(msg_type_name(MsgType::kKeyExchange), "KEY_EXCHANGE");
    EXPECT_STREQ(msg_type_name(MsgType::kStreamHeader), "STREAM_HEADER");
    EXPECT_STREQ(msg_type_name(MsgType::kKeyConfirm), "KEY_CONFIRM");
    EXPECT_STREQ(msg_type_name(MsgType::kShmOffer), "SHM_OFFER");
    EXPECT_STREQ(msg_type_name(MsgType::kCount), "UNKNOWN");
    EXPECT_STREQ(msg_type_name(MsgType(200)), "UNKNOWN");
    EXPECT_FALSE(msg_type_valid(0));
    EXPECT_TRUE(msg_type_valid(1));
    EXPECT_TRUE(msg_type_valid(uint8_t(MsgType::kCount) - 1));
    EXPECT_FALSE(msg_type_valid(uint8_t(MsgType::kCount)));
}

TEST(ChannelMessage, HeaderBytesAreLittleEndianWithMagic) {
    uint8_t h[kFrameHeaderBytes];
    encode_frame_header(h, MsgType::kData, 0x01020304);
    const uint8_t expected[] = {0x04, 0x03, 0x02, 0x01, 0x02, 0x00, 0x44, 0x50};
    EXPECT_EQ(0, std::memcmp(h, expected, sizeof(expected)));
    FrameHeader out;
    ASSERT_EQ(decode_frame_header(h, 0x01020304, "test", &out), DP_OK);
    EXPECT_EQ(out.length, 0x01020304u);
    EXPECT_EQ(out.type, MsgType::kData);
}

TEST(ChannelMessage, MalformedHeadersAreRefused) {
    uint8_t h[kFrameHeaderBytes];
    FrameHeader out;
    encode_frame_header(h, MsgType::kEnd, 8);
    h[6] = 'G';  // "GET /" from a stray HTTP client
    EXPECT_EQ(decode_frame_header(h, 1024, "test", &out), DP_ERR_INVALID);
    encode_frame_header(h, MsgType::kEnd, 8);
    h[5] = 1;
    EXPECT_EQ(decode_frame_header(h, 1024, "test", &out), DP_ERR_INVALID);
    encode_frame_header(h, MsgType::kEnd, 8);
    h[4] = 0;
    EXPECT_EQ(decode_frame_header(h, 1024, "test", &out), DP_ERR_INVALID);
    h[4] = uint8_t(MsgType::kCount);
    EXPECT_EQ(decode_frame_header(h, 1024, "test", &out), DP_ERR_INVALID);
    encode_frame_header(h, MsgType::kData, 1025);
    EXPECT_EQ(decode_frame_header(h, 1024, "test", &out), DP_ERR_TOO_LARGE);
    encode_frame_header(h, MsgType::kData, 1024);
    EXPECT_EQ(decode_frame_header(h, 1024, "test", &out), DP_OK);
}

TEST(ChannelMessage, SendSizeCheck) {
    EXPECT_EQ(check_send_size(0, 0, "test"), DP_OK);
    EXPECT_EQ(check_send_size(kDefaultMaxMessage, kDefaultMaxMessage, "test"), DP_OK);
    EXPECT_EQ(check_send_size(kDefaultMaxMessage + 1, kDefaultMaxMessage, "test"),
              DP_ERR_TOO_LARGE);
    EXPECT_EQ(kDefaultMaxMessage, size_t(1) << 20);  // documented in docs/channel.md
}

TEST(ChannelMessage, HelloRoundTrip) {
    Hello h;
    h.mode = 1;
    h.flags = 1;
    h.max_message = 123456;
    h.msg_size = 0x1122334455667788ull;
    h.num_msgs = 1000000;
    uint8_t bytes[kHelloBytes];
    encode_hello(h, bytes);
    EXPECT_EQ(bytes[0], kProtocolVersion);
    EXPECT_EQ(bytes[8], 0x88);
    Hello back;
    ASSERT_EQ(decode_hello(bytes, sizeof(bytes), &back), DP_OK);
    EXPECT_EQ(back.version, kProtocolVersion);
    EXPECT_EQ(back.mode, 1);
    EXPECT_EQ(back.flags, 1);
    EXPECT_EQ(back.max_message, 123456u);
    EXPECT_EQ(back.msg_size, 0x1122334455667788ull);
    EXPECT_EQ(back.num_msgs, 1000000u);
    EXPECT_EQ(decode_hello(bytes, sizeof(bytes) - 1, &back), DP_ERR_INVALID);
}

}  // namespace
}  // namespace deputy::channel
