// The control connection: frames cross intact, and every wait ends with a
// message naming the peer and what was awaited.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "bench/rail/oob.h"
#include "bench/rail/rail_error.h"
#include "rail/error_of.h"

namespace deputy::rail {
namespace {

struct Pair {
    Listener listener{"127.0.0.1", 0};
    Socket client;
    Socket server;
    Pair() {
        std::thread t([&] { server = listener.accept(5, nullptr); });
        client = connect_to(HostPort{"127.0.0.1", listener.port()}, 5);
        t.join();
    }
};

TEST(RailOob, FramesRoundTrip) {
    Pair p;
    nlohmann::json body = {{"n", 7}, {"s", std::string(100000, 'x')}};
    p.client.send(MsgType::kHello, body, 5);
    Frame f = p.server.receive(5, "HELLO");
    EXPECT_EQ(f.type, MsgType::kHello);
    EXPECT_EQ(f.body, body);
    EXPECT_FALSE(p.client.poll_frame(0, "nothing").has_value());
}

TEST(RailOob, ReceiveTimesOutNamingThePeer) {
    Pair p;
    std::string e = error_of([&] { p.client.receive(0.1, "READY"); });
    EXPECT_EQ(e, "timed out waiting for READY from server 127.0.0.1:" +
                     std::to_string(p.listener.port()));
}

TEST(RailOob, PeerClosing) {
    Pair p;
    p.server.close();
    std::string e = error_of([&] { p.client.receive(5, "RESULT"); });
    EXPECT_EQ(e, "server 127.0.0.1:" + std::to_string(p.listener.port()) +
                     " closed the connection while this side waited for RESULT");
}

TEST(RailOob, BadMagicIsNotADeputyPeer) {
    Pair p;
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    ASSERT_EQ(::send(p.server.fd(), junk, sizeof(junk) - 1, 0), ssize_t(sizeof(junk) - 1));
    std::string e = error_of([&] { p.client.receive(5, "READY"); });
    EXPECT_EQ(e, "server 127.0.0.1:" + std::to_string(p.listener.port()) +
                     " is not a deputy rail peer (bad magic 0x47455420 while waiting for READY)");
}

TEST(RailOob, ConnectRefused) {
    // A port that was just free: nothing listens there.
    uint16_t port;
    {
        Listener l("127.0.0.1", 0);
        port = l.port();
    }
    std::string e = error_of([&] { connect_to(HostPort{"127.0.0.1", port}, 5); });
    EXPECT_EQ(e, "cannot connect to server 127.0.0.1:" + std::to_string(port) + ": Connection refused");
}

TEST(RailOob, UnresolvableHost) {
    std::string e = error_of([] { connect_to(HostPort{"no-such-host.invalid", 1}, 5); });
    EXPECT_EQ(e.rfind("--connect no-such-host.invalid:1: cannot resolve host 'no-such-host.invalid': ", 0), 0u)
        << e;
}

TEST(RailOob, AcceptTimesOut) {
    Listener l("127.0.0.1", 0);
    std::string e = error_of([&] { l.accept(0.2, nullptr); });
    EXPECT_EQ(e, "no client connected to port " + std::to_string(l.port()) +
                     " within 0.2 s (--accept-timeout)");
}

TEST(RailOob, AcceptCancelled) {
    Listener l("127.0.0.1", 0);
    std::atomic<bool> cancel{true};
    EXPECT_EQ(error_of([&] { l.accept(0, &cancel); }), "server cancelled before a client connected");
}

}  // namespace
}  // namespace deputy::rail
