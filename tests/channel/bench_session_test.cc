// `deputy bench channel`'s own code path (options, HELLO, stream/pingpong,
// END, verdicts): matching and mismatched counts reported exactly, refusals
// with the message a user sees, and a peer process killed mid-stream, which
// must end the run with DP_ERR_AGENT_LOST or DP_ERR_IO long before the
// timeout. The two sides run as threads over a real channel, or as a forked
// process where a death is the point.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "bench/channel/options.h"
#include "bench/channel/report.h"
#include "bench/channel/session.h"
#include "channel_test_util.h"

namespace deputy::bench::channel {
namespace {

namespace ch = deputy::channel;
using ch::test::count_fds;
using ch::test::unique_address;

ChannelOptions options(const std::string &role, const std::string &transport, uint64_t n) {
    ChannelOptions o;
    o.peer = {role, transport == "tcp" ? "127.0.0.1:0" : unique_address()};
    o.transport = transport;
    o.insecure_tcp = transport == "tcp";
    o.num_msgs = n;
    o.timeout_s = 30;
    return o;
}

Plan plan_of(const ChannelOptions &o) {
    Plan p;
    std::string error;
    EXPECT_TRUE(resolve(o, &p, &error)) << error;
    return p;
}

std::string resolve_error(const ChannelOptions &o) {
    Plan p;
    std::string error;
    EXPECT_FALSE(resolve(o, &p, &error));
    return error;
}

struct Both {
    SideResult listen, connect;
};

// Runs the two sides as threads of this process over a real channel.
Both run_both(Plan listen_plan, Plan connect_plan) {
    std::unique_ptr<ch::EndpointListener> listener;
    EXPECT_EQ(ch::EndpointListener::open(listen_plan.endpoint, &listener), DP_OK);
    connect_plan.endpoint.address = listener->address();
    Both both;
    std::thread peer([&] { both.connect = run_side(connect_plan, Role::kConnect, nullptr, {}); });
    both.listen = run_side(listen_plan, Role::kListen, listener.get(), {});
    peer.join();
    return both;
}

TEST(BenchChannelOptions, RefusalsNameTheFlagAndTheLimit) {
    ChannelOptions o = options("listen", "uds", 10);
    o.msg_size = "2M";
    EXPECT_EQ(resolve_error(o),
              "-s 2M: a message of 2097152 bytes exceeds the channel maximum of 1048576 bytes "
              "(DP_ERR_TOO_LARGE); nothing was sent. Raise --max-msg-size (at most 64M)");
    o.max_msg_size = "4M";
    Plan p = plan_of(o);
    EXPECT_EQ(p.msg_size, 2u << 20);
    EXPECT_EQ(p.endpoint.options.max_message, 4u << 20);
    o.max_msg_size = "65M";
    EXPECT_EQ(resolve_error(o), "--max-msg-size 65M: expected 1..67108864 bytes");

    o = options("connect", "tcp", 10);
    o.insecure_tcp = false;
    EXPECT_EQ(resolve_error(o),
              "--transport tcp without --secure would send every message in clear: add "
              "--secure --key FILE, or --insecure-tcp to accept that");
    o.secure = true;
    EXPECT_EQ(resolve_error(o), "--secure needs --key FILE (make one with --keygen FILE)");

    o = options("listen", "shm", 10);
    o.buffer_size = "100";
    EXPECT_EQ(resolve_error(o),
              "--buffer-size 100: the shm ring size must be a power of two from 64 to 1G");
    o = options("listen", "uds", 10);
    o.mode = "pingpong";
    o.one_way = true;
    EXPECT_EQ(resolve_error(o),
              "--one-way applies to --mode stream (pingpong is two-way by nature)");
    o = options("listen", "uds", 10);
    o.loopback = true;
    EXPECT_EQ(resolve_error(o), "give exactly one of --loopback, --agent or --peer listen|connect ADDR");
    o = options("serve", "uds", 10);
    EXPECT_EQ(resolve_error(o), "--peer expects 'listen ADDR' or 'connect ADDR'");
    o = options("listen", "rdma", 10);
    EXPECT_EQ(resolve_error(o), "--transport rdma: expected shm, uds or tcp");
}

class BenchChannelTransports : public ::testing::TestWithParam<const char *> {};

TEST_P(BenchChannelTransports, StreamBothWaysCountsMatch) {
    Both b = run_both(plan_of(options("listen", GetParam(), 3000)),
                      plan_of(options("connect", GetParam(), 3000)));
    for (const SideResult *r : {&b.listen, &b.connect}) {
        EXPECT_EQ(r->status, DP_OK) << r->role << ": " << r->error;
        EXPECT_EQ(r->sent, 3000u);
        EXPECT_EQ(r->received, 3000u);
        EXPECT_EQ(r->expected, 3000u);
        EXPECT_EQ(r->peer_sent, 3000);
        EXPECT_EQ(r->wrong, 0u);
        EXPECT_EQ(r->verdict, "OK");
        EXPECT_EQ(r->exit_code(), kExitOk);
        EXPECT_GT(r->send_end_ns, r->send_start_ns);
        EXPECT_GE(r->recv_end_ns, r->recv_first_ns);
    }
}

// DOCA's rule: a side's -n caps what it receives. The side with the smaller
// -n counts that many and reads the rest without counting it (the sender is
// never left blocked); the other receives all the peer sent. Both are OK.
TEST_P(BenchChannelTransports, EachSidesCountCapsWhatItReceives) {
    Both b = run_both(plan_of(options("listen", GetParam(), 100)),
                      plan_of(options("connect", GetParam(), 200)));
    EXPECT_EQ(b.listen.status, DP_OK) << b.listen.error;
    EXPECT_EQ(b.listen.sent, 100u);
    EXPECT_EQ(b.listen.received, 100u);
    EXPECT_EQ(b.listen.expected, 100u);
    EXPECT_EQ(b.listen.dropped, 100u);
    EXPECT_EQ(b.listen.peer_sent, 200);
    EXPECT_EQ(b.listen.wrong, 0u);
    EXPECT_EQ(b.listen.verdict, "OK");
    EXPECT_GE(b.listen.recv_end_ns, b.listen.recv_first_ns);
    EXPECT_EQ(b.connect.status, DP_OK) << b.connect.error;
    EXPECT_EQ(b.connect.sent, 200u);
    EXPECT_EQ(b.connect.received, 100u);
    EXPECT_EQ(b.connect.expected, 100u);
    EXPECT_EQ(b.connect.dropped, 0u);
    EXPECT_EQ(b.connect.verdict, "OK");
    EXPECT_EQ(b.connect.exit_code(), kExitOk);
}

TEST_P(BenchChannelTransports, PingpongCountsAndLatency) {
    ChannelOptions l = options("listen", GetParam(), 300), c = options("connect", GetParam(), 300);
    l.mode = c.mode = "pingpong";
    l.warmup = c.warmup = 10;
    Both b = run_both(plan_of(l), plan_of(c));
    EXPECT_EQ(b.connect.verdict, "OK") << b.connect.error;
    EXPECT_EQ(b.listen.verdict, "OK") << b.listen.error;
    EXPECT_EQ(b.connect.latency.samples, 290u);
    EXPECT_LE(b.connect.latency.min, b.connect.latency.p50);
    EXPECT_LE(b.connect.latency.p50, b.connect.latency.p99);
    EXPECT_LE(b.connect.latency.p99, b.connect.latency.max);
    EXPECT_EQ(b.listen.sent, 300u);  // every ping echoed
}

INSTANTIATE_TEST_SUITE_P(Transports, BenchChannelTransports,
                         ::testing::Values("shm", "uds", "tcp"));

TEST(BenchChannelSession, PingpongMismatchOnBothSides) {
    ChannelOptions l = options("listen", "shm", 80), c = options("connect", "shm", 50);
    l.mode = c.mode = "pingpong";
    Both b = run_both(plan_of(l), plan_of(c));
    EXPECT_EQ(b.listen.verdict, "MISMATCH: received 50, expected 80");
    EXPECT_EQ(b.connect.verdict, "MISMATCH: the peer expected 80 pings");
    EXPECT_EQ(b.listen.exit_code(), kExitMismatch);
    EXPECT_EQ(b.connect.exit_code(), kExitMismatch);
}

TEST(BenchChannelSession, OneWayCounts) {
    ChannelOptions l = options("listen", "shm", 500), c = options("connect", "shm", 500);
    l.one_way = c.one_way = true;
    Both b = run_both(plan_of(l), plan_of(c));
    EXPECT_EQ(b.listen.verdict, "OK");
    EXPECT_EQ(b.listen.sent, 0u);
    EXPECT_EQ(b.listen.received, 500u);
    EXPECT_EQ(b.connect.verdict, "OK");
    EXPECT_EQ(b.connect.sent, 500u);
    EXPECT_EQ(b.connect.received, 0u);
}

TEST(BenchChannelSession, ModeMismatchIsAnErrorOnBothSides) {
    ChannelOptions l = options("listen", "uds", 10), c = options("connect", "uds", 10);
    c.mode = "pingpong";
    Both b = run_both(plan_of(l), plan_of(c));
    EXPECT_EQ(b.listen.status, DP_ERR_MISMATCH);
    EXPECT_EQ(b.listen.error, "this side runs --mode stream, the peer --mode pingpong");
    EXPECT_EQ(b.connect.status, DP_ERR_MISMATCH);
    EXPECT_EQ(b.connect.error, "this side runs --mode pingpong, the peer --mode stream");
    EXPECT_EQ(b.listen.exit_code(), kExitError);
    EXPECT_EQ(b.connect.sent, 0u);
}

TEST(BenchChannelSession, MessageAboveThePeersLimitIsRefusedAtHello) {
    ChannelOptions l = options("listen", "shm", 10), c = options("connect", "shm", 10);
    l.max_msg_size = "4k";
    c.msg_size = "8k";
    Both b = run_both(plan_of(l), plan_of(c));
    EXPECT_EQ(b.listen.status, DP_ERR_TOO_LARGE);
    EXPECT_EQ(b.listen.error,
              "the peer sends 8192-byte messages, above this side's limit of 4096 bytes");
    EXPECT_EQ(b.connect.status, DP_ERR_TOO_LARGE);
    EXPECT_EQ(b.connect.error,
              "this side sends 8192-byte messages, above the peer's limit of 4096 bytes");
    EXPECT_EQ(b.connect.sent, 0u);
}

TEST(BenchChannelSession, NobodyConnectsIsATimeout) {
    ChannelOptions o = options("listen", "uds", 10);
    o.timeout_s = 0.05;
    SideResult r = run_side(plan_of(o), Role::kListen, nullptr, {});
    EXPECT_EQ(r.status, DP_ERR_TIMEOUT);
    EXPECT_EQ(r.error, "no peer connected within 0.05 s (--timeout)");
    EXPECT_EQ(r.exit_code(), kExitError);
}

TEST(BenchChannelSession, ResultSurvivesJson) {
    Both b =
        run_both(plan_of(options("listen", "uds", 10)), plan_of(options("connect", "uds", 12)));
    SideResult back = from_json(to_json(b.listen));  // the side that dropped 2 beyond -n
    EXPECT_EQ(back.verdict, "OK");
    EXPECT_EQ(back.received, 10u);
    EXPECT_EQ(back.dropped, 2u);
    EXPECT_EQ(back.sent, 10u);
    EXPECT_EQ(back.peer_sent, 12);
    EXPECT_EQ(back.exit_code(), kExitOk);
    EXPECT_EQ(to_json(back), to_json(b.listen));
    b.connect.status = DP_ERR_TIMEOUT;  // an error, with its code, survives too
    b.connect.error = "no message from the peer";
    back = from_json(to_json(b.connect));
    EXPECT_EQ(back.exit_code(), kExitError);
    EXPECT_EQ(to_json(back), to_json(b.connect));
}

// The connecting side is a child process that streams until it is killed.
class PeerKilled : public ::testing::TestWithParam<const char *> {};

TEST_P(PeerKilled, TheOtherSideEndsWithAgentLostOrIo) {
    const int fds_before = count_fds();
    ChannelOptions lo = options("listen", GetParam(), 1u << 30);
    ChannelOptions co = options("connect", GetParam(), 1u << 30);
    lo.timeout_s = co.timeout_s = 60;  // far above how long detection may take
    Plan listen_plan = plan_of(lo), connect_plan = plan_of(co);
    SideResult r;
    {
        std::unique_ptr<ch::EndpointListener> listener;
        ASSERT_EQ(ch::EndpointListener::open(listen_plan.endpoint, &listener), DP_OK);
        connect_plan.endpoint.address = listener->address();
        pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            run_side(connect_plan, Role::kConnect, nullptr, {});
            _exit(0);
        }
        std::thread killer([child] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            kill(child, SIGKILL);
        });
        r = run_side(listen_plan, Role::kListen, listener.get(), {});
        killer.join();
        int status = 0;
        waitpid(child, &status, 0);
        EXPECT_TRUE(WIFSIGNALED(status));
    }
    EXPECT_TRUE(r.status == DP_ERR_AGENT_LOST || r.status == DP_ERR_IO)
        << dp_status_name(r.status) << ": " << r.error;
    EXPECT_GT(r.received, 0u);
    EXPECT_EQ(r.exit_code(), kExitError);
    EXPECT_EQ(count_fds(), fds_before);
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerKilled, ::testing::Values("shm", "uds", "tcp"));

}  // namespace
}  // namespace deputy::bench::channel
