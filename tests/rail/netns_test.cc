// Server and client in two network namespaces joined by a veth pair: the
// tcp provider must pick the veth interface (the one that routes to the
// peer), not loopback, on both sides. Needs root and `ip`; otherwise the
// test skips and says why.
#include <gtest/gtest.h>
#include <unistd.h>


#include "rail/subprocess.h"

namespace deputy::test {
namespace {

const std::string kBin = DEPUTY_BIN;

class NetnsPair {
public:
    NetnsPair() {
        std::string id = std::to_string(getpid());
        a_ = "dprail_a" + id;
        b_ = "dprail_b" + id;
        std::string va = "dpra" + id, vb = "dprb" + id;  // interface names: 15 chars at most
        const std::vector<std::vector<std::string>> steps = {
            {"ip", "netns", "add", a_},
            {"ip", "netns", "add", b_},
            {"ip", "link", "add", va, "type", "veth", "peer", "name", vb},
            {"ip", "link", "set", va, "netns", a_},
            {"ip", "link", "set", vb, "netns", b_},
            {"ip", "-n", a_, "addr", "add", "10.77.0.1/24", "dev", va},
            {"ip", "-n", b_, "addr", "add", "10.77.0.2/24", "dev", vb},
            {"ip", "-n", a_, "link", "set", va, "up"},
            {"ip", "-n", b_, "link", "set", vb, "up"},
            {"ip", "-n", a_, "link", "set", "lo", "up"},
            {"ip", "-n", b_, "link", "set", "lo", "up"},
        };
        for (const auto &step : steps) {
            ProcessResult r = run_command(step, 20);
            if (r.exit_code != 0) {
                error_ = "'";
                for (const auto &s : step) error_ += s + (&s == &step.back() ? "" : " ");
                error_ += "' failed: " + (r.err.empty() ? std::string("exit ") + std::to_string(r.exit_code) : r.err);
                while (!error_.empty() && error_.back() == '\n') error_.pop_back();
                return;
            }
        }
    }
    ~NetnsPair() {
        // Deleting a namespace deletes its end of the veth pair, and with it the other end.
        run_command({"ip", "netns", "del", a_}, 20);
        run_command({"ip", "netns", "del", b_}, 20);
    }
    const std::string &error() const { return error_; }
    const std::string &a() const { return a_; }
    const std::string &b() const { return b_; }

private:
    std::string a_, b_, error_;
};

TEST(RailNetns, TcpAcrossNamespaces) {
    NetnsPair ns;
    if (!ns.error().empty()) GTEST_SKIP() << "cannot build two network namespaces here: " << ns.error();

    Child server({"ip", "netns", "exec", ns.a(), kBin, "bench", "rail", "--server", "--port", "0",
                  "--provider", "tcp", "-q", "--accept-timeout", "60"});
    ASSERT_TRUE(server.started());
    ASSERT_TRUE(server.wait_for_stderr(" (provider ", 30)) << server.err();
    int port = listening_port(server.err());
    ASSERT_GT(port, 0) << server.err();
    ProcessResult c = run_command({"ip", "netns", "exec", ns.b(), kBin, "bench", "rail", "--connect",
                                   "10.77.0.1:" + std::to_string(port), "--provider", "tcp", "--rails", "2",
                                   "--pages", "16", "--repeat", "2", "-q"},
                                  120);
    ProcessResult s = server.finish(120);
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err << "\nserver:\n" << s.out << s.err;
    ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
    EXPECT_NE(c.out.find("# verify: 1M checked, 0 bad pages, 0 bad bytes"), std::string::npos) << c.out;
    // Both ends chose their veth, not "lo" (which cannot reach the other namespace).
    std::string id = std::to_string(getpid());
    EXPECT_EQ(count_lines_with(c.out, {"  dpra" + id + " ", " dprb" + id + " "}), 2) << c.out;
    EXPECT_EQ(s.out.find(" lo "), std::string::npos) << s.out;
}

}  // namespace
}  // namespace deputy::test
