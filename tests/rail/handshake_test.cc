// Control messages: names, hex, HELLO/READY round trips and the errors a
// malformed or mismatched message gets.
#include <gtest/gtest.h>

#include "bench/rail/handshake.h"
#include "bench/rail/rail_error.h"
#include "bench/rail/summary.h"
#include "bench/rail/wire.h"
#include "rail/error_of.h"

namespace deputy::rail {
namespace {

Hello sample_hello() {
    Hello h;
    h.workload.rails = 4;
    h.workload.devices = 2;
    h.workload.page_size = 8192;
    h.workload.pages = 10;
    h.workload.repeat = 3;
    h.workload.seed = 99;
    h.workload.warmup = false;
    h.workload.sample_interval_s = 0.02;
    h.workload.buffers = 2;
    h.provider = "shm";
    h.cq_data = true;
    for (int r = 0; r < 4; ++r)
        h.rails.push_back({{uint8_t(r), 0xAB, 0x00},
                           "shm",
                           {{0x1000u * uint64_t(r), uint64_t(r) + 1, 8192 * 10},
                            {0x9000u * uint64_t(r), uint64_t(r) + 5, 8192 * 10}}});
    return h;
}

TEST(RailWire, MessageNames) {
    EXPECT_STREQ(msg_name(MsgType::kHello), "HELLO");
    EXPECT_STREQ(msg_name(MsgType::kVerdict), "VERDICT");
    EXPECT_STREQ(msg_name(MsgType::kError), "ERROR");
    EXPECT_FALSE(msg_type_valid(0));
    EXPECT_TRUE(msg_type_valid(7));
    EXPECT_FALSE(msg_type_valid(8));
}

TEST(RailWire, Hex) {
    std::vector<uint8_t> bytes = {0x00, 0x7f, 0x80, 0xff};
    EXPECT_EQ(to_hex(bytes), "007f80ff");
    EXPECT_EQ(from_hex("007F80ff", "address"), bytes);
    EXPECT_EQ(error_of([] { from_hex("abc", "address"); }),
              "field 'address' has an odd number of hex digits");
    EXPECT_EQ(error_of([] { from_hex("zz", "address"); }), "field 'address' is not hex");
}

TEST(RailHandshake, HelloRoundTrip) {
    Hello h = sample_hello();
    Hello back = decode_hello(nlohmann::json::parse(encode_hello(h).dump()));
    EXPECT_EQ(back.provider, "shm");
    EXPECT_TRUE(back.cq_data);
    EXPECT_EQ(back.workload.rails, 4);
    EXPECT_EQ(back.workload.devices, 2);
    EXPECT_EQ(back.workload.page_size, 8192u);
    EXPECT_EQ(back.workload.pages, 10u);
    EXPECT_EQ(back.workload.repeat, 3u);
    EXPECT_EQ(back.workload.seed, 99u);
    EXPECT_FALSE(back.workload.warmup);
    EXPECT_EQ(back.workload.sample_interval_s, 0.02);
    ASSERT_EQ(back.rails.size(), 4u);
    EXPECT_EQ(back.rails[3].address, (std::vector<uint8_t>{3, 0xAB, 0}));
    EXPECT_EQ(back.workload.buffers, 2u);
    ASSERT_EQ(back.rails[3].buffers.size(), 2u);
    EXPECT_EQ(back.rails[3].buffers[0].base, 0x3000u);
    EXPECT_EQ(back.rails[3].buffers[0].key, 4u);
    EXPECT_EQ(back.rails[3].buffers[1].base, 0x1B000u);
    EXPECT_EQ(back.rails[3].buffers[1].key, 8u);
    EXPECT_EQ(back.rails[3].buffers[1].len, 8192u * 10);
}

TEST(RailHandshake, MalformedHelloNamesTheField) {
    auto j = encode_hello(sample_hello());
    j.erase("page_size");
    EXPECT_EQ(error_of([&] { decode_hello(j); }),
              "HELLO: field 'page_size' is missing or has the wrong type");
    j = encode_hello(sample_hello());
    j["rails"] = "four";
    EXPECT_EQ(error_of([&] { decode_hello(j); }),
              "HELLO: field 'rails' is missing or has the wrong type");
    j = encode_hello(sample_hello());
    j["version"] = 99;
    EXPECT_EQ(error_of([&] { decode_hello(j); }),
              "the client speaks protocol version 99, this server 2 (run the same deputy on both hosts)");
    j = encode_hello(sample_hello());
    j["rails"] = 2;
    EXPECT_EQ(error_of([&] { decode_hello(j); }), "HELLO: 4 rail addresses for 2 rails");
    j = encode_hello(sample_hello());
    j["buffers"] = 3;
    EXPECT_EQ(error_of([&] { decode_hello(j); }),
              "HELLO: 2 buffers advertised on a rail for --buffers 3");
    j = encode_hello(sample_hello());
    j["rail_info"][1]["buffers"][1]["len"] = 8192;
    EXPECT_EQ(error_of([&] { decode_hello(j); }),
              "HELLO: a client buffer of 8192 bytes is smaller than --pages x --page-size");
}

TEST(RailHandshake, ServerTopologyMustMatchWhenGiven) {
    Hello h = sample_hello();
    RailOptions server;
    server.role = Role::kServer;
    RailOptions merged = merge_workload(server, h);  // not given: follow the client
    EXPECT_EQ(merged.rails, 4);
    EXPECT_EQ(merged.devices, 2);
    EXPECT_EQ(merged.pages, 10u);
    server.topology_given = true;
    server.rails = 2;
    server.devices = 1;
    EXPECT_EQ(error_of([&] { merge_workload(server, h); }),
              "topology mismatch: the server has --rails 2 --devices 1, the client asked for "
              "--rails 4 --devices 2");
}

TEST(RailHandshake, ReadyRoundTripAndSignalModes) {
    Ready r;
    r.provider = "tcp;ofi_rxm";
    r.signal = "remote_cq_data";
    r.rails.push_back({{1, 2, 3}, "lo", {}});
    Ready back = decode_ready(encode_ready(r));
    EXPECT_EQ(back.provider, "tcp;ofi_rxm");
    EXPECT_EQ(back.signal, "remote_cq_data");
    ASSERT_EQ(back.rails.size(), 1u);
    EXPECT_EQ(back.rails[0].address, (std::vector<uint8_t>{1, 2, 3}));
    auto j = encode_ready(r);
    j["signal"] = "smoke";
    EXPECT_EQ(error_of([&] { decode_ready(j); }), "READY: unknown signal mode 'smoke'");
}

TEST(RailSummary, ResultRoundTrip) {
    RunResult r;
    r.provider = "shm";
    r.provider_version = "117.0";
    r.signal = "remote_cq_data";
    r.seconds = 0.5;
    r.bytes = 1000000000;
    r.writes = 4000;
    r.peak_gbps = 17.5;
    r.rails.push_back({0, 0, "shm", "shm", 4000, 1000000000, 3, 0.25});
    RunResult back = RunResult::from_json(r.to_json());
    EXPECT_EQ(back.writes, 4000u);
    EXPECT_DOUBLE_EQ(back.avg_gbps(), 16.0);
    EXPECT_DOUBLE_EQ(back.mpps(), 0.008);
    ASSERT_EQ(back.rails.size(), 1u);
    EXPECT_EQ(back.rails[0].eagain, 3u);
    auto j = r.to_json();
    j.erase("writes");
    EXPECT_EQ(error_of([&] { RunResult::from_json(j); }),
              "RESULT: field 'writes' is missing or has the wrong type");
}

}  // namespace
}  // namespace deputy::rail
