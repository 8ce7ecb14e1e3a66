// Teams with members that reach their agent over the network (a host's
// ranks on its DPU's agent): each remote member is stood in for by a team
// proxy on the agent's host (proxy/team_proxy.h). Every collective of the
// table bit-exact against the reference with all members remote and with
// remote and local members mixed; alltoallv; a member's link that ends
// mid-operation; and a peer holding the key that sends the proxy posts no client
// would, while a bystander team is served.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <thread>
#include <vector>

#include "channel/coll_post.h"
#include "channel/control.h"
#include "channel/p2p_post.h"
#include "attacker.h"
#include "coll_table.h"
#include "fabric/exposed_memory.h"
#include "node_agents.h"
#include "remote_agent.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::eventually;
using namespace deputy::testing::remote;

// A team whose member r is remote when remote[r] (DEPUTY_KEY set by the
// caller) in memory mode `mode` (staged or rdma), local and staged
// otherwise; every buffer is plain memory.
class MixedTeam {
  public:
    MixedTeam(const RemoteAgent &agent, std::vector<bool> remote, const std::string &key,
              dp_memory_mode_t mode = DP_MEMORY_STAGED)
        : MixedTeam(configs(agent, remote), key, mode) {}
    // Member r attaches with configs[r] (a remote agent's address, in
    // `mode`, or a local socket, staged).
    MixedTeam(std::vector<dp_config_t> configs, const std::string &key,
              dp_memory_mode_t mode = DP_MEMORY_STAGED)
        : ctx_(configs.size(), nullptr), team_(configs.size(), nullptr) {
        const int p = int(configs.size());
        for (int r = 0; r < p; ++r) {
            dp_config_t config = configs[r];
            const bool remote = std::string(config.agent ? config.agent : "").rfind("tcp://", 0) == 0;
            config.memory_mode = remote ? mode : DP_MEMORY_STAGED;
            config.pool_bytes = 48 << 20;  // bounce room for the large cases
            EXPECT_EQ(dp_init(&config, &ctx_[r]), DP_OK) << "member " << r;
        }
        std::vector<std::thread> joiners;
        for (int r = 0; r < p; ++r)
            joiners.emplace_back([&, r] {
                joined_[r] = dp_team_create_timeout(ctx_[r], key.c_str(), r, p, 10000, &team_[r]);
            });
        for (auto &t : joiners) t.join();
    }
    ~MixedTeam() {
        for (dp_team_t *t : team_)
            if (t) dp_team_destroy(t);
        for (dp_context_t *c : ctx_)
            if (c) dp_finalize(c);
        for (void *p : owned_) free(p);
    }
    bool joined() const {
        for (size_t r = 0; r < team_.size(); ++r)
            if (joined_[r] != DP_OK) return false;
        return true;
    }
    int size() const { return int(team_.size()); }
    dp_team_t *operator[](int r) const { return team_[r]; }
    dp_context_t *context(int r) const { return ctx_[r]; }
    void leave(int r) {
        dp_team_destroy(team_[r]);
        team_[r] = nullptr;
    }
    uint8_t *buffer(int, size_t bytes) {
        void *p = aligned_alloc(64, (std::max<size_t>(bytes, 64) + 63) / 64 * 64);
        owned_.push_back(p);
        return static_cast<uint8_t *>(p);
    }
    template <typename Post>
    std::vector<dp_status_t> run(Post post) {
        std::vector<dp_request_t *> reqs(team_.size());
        for (int r = 0; r < size(); ++r) EXPECT_EQ(post(r, &reqs[r]), DP_OK) << "rank " << r;
        std::vector<dp_status_t> out(reqs.size(), DP_ERR_INTERNAL);
        for (size_t r = 0; r < reqs.size(); ++r) {
            if (reqs[r]) out[r] = dp_wait(reqs[r]);
            dp_request_free(reqs[r]);
        }
        return out;
    }

  private:
    static std::vector<dp_config_t> configs(const RemoteAgent &agent,
                                            const std::vector<bool> &remote) {
        std::vector<dp_config_t> out;
        for (bool r : remote) out.push_back(r ? agent.config() : agent.agent->config());
        return out;
    }
    std::vector<dp_context_t *> ctx_;
    std::vector<dp_team_t *> team_;
    dp_status_t joined_[16] = {};
    std::vector<void *> owned_;
};

// Each case in both memory modes of a remote member: staged (the bytes in
// the link) and rdma (the proxy reads and writes the member's buffers over
// the tcp provider).
class RemoteTeamMemoryTest : public ::testing::TestWithParam<dp_memory_mode_t> {};
INSTANTIATE_TEST_SUITE_P(Modes, RemoteTeamMemoryTest,
                         ::testing::Values(DP_MEMORY_STAGED, DP_MEMORY_RDMA),
                         [](const ::testing::TestParamInfo<dp_memory_mode_t> &i) {
                             return std::string(i.param == DP_MEMORY_RDMA ? "rdma" : "staged");
                         });

TEST_P(RemoteTeamMemoryTest, EveryCollectiveWithRemoteMembersMatchesTheReference) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    const int idle_fds = r.agent->settled_fds();
    Env key("DEPUTY_KEY", r.key.path());
    int next_key = 0;
    const std::vector<std::vector<bool>> layouts = {
        {true}, {true, true}, {true, false, true}, {false, true, false, true}};
    for (const std::vector<bool> &layout : layouts) {
        std::string label = "remote/local";
        for (bool remote : layout) label += remote ? " R" : " L";
        MixedTeam team(r, layout, "remote-table-" + std::to_string(next_key++), GetParam());
        ASSERT_TRUE(team.joined()) << label;
        deputy::testing::check_table(team, [&](int m) { return team[m]; }, label);
    }
    // One proxy per remote member, and every one gone with its member.
    EXPECT_EQ(info(*r.agent)["counters"]["team_proxies"], 1 + 2 + 2 + 2) << info(*r.agent).dump();
    expect_fds_back(*r.agent, idle_fds);
}

TEST_P(RemoteTeamMemoryTest, AlltoallvAndManyInFlightThroughRemoteMembers) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    MixedTeam team(r, {true, false, true}, "remote-v", GetParam());
    ASSERT_TRUE(team.joined());
    const int p = team.size();
    // Member m sends (m + 1) * (d + 1) int32s to member d, at displacements
    // with gaps; what lies between the received blocks stays untouched.
    std::vector<std::vector<int32_t>> src(p), dst(p);
    std::vector<std::vector<size_t>> sc(p), sd(p), rc(p), rd(p);
    for (int m = 0; m < p; ++m) {
        size_t at = 0;
        for (int d = 0; d < p; ++d) {
            sc[m].push_back(size_t((m + 1) * (d + 1)));
            sd[m].push_back(at);
            at += sc[m].back() + 3;
        }
        src[m].resize(at);
        for (size_t i = 0; i < at; ++i) src[m][i] = int32_t(m * 100000 + int(i));
        at = 0;
        for (int s = 0; s < p; ++s) {
            rc[m].push_back(size_t((s + 1) * (m + 1)));
            rd[m].push_back(at + 1);
            at += rc[m].back() + 2;
        }
        dst[m].assign(at + 1, -1);
    }
    const auto st = team.run([&](int m, dp_request_t **q) {
        return dp_ialltoallv(src[m].data(), sc[m].data(), sd[m].data(), dst[m].data(),
                             rc[m].data(), rd[m].data(), DP_INT32, team[m], q);
    });
    for (int m = 0; m < p; ++m) {
        ASSERT_EQ(st[m], DP_OK) << "member " << m;
        std::vector<int32_t> want(dst[m].size(), -1);
        for (int s = 0; s < p; ++s)
            for (size_t i = 0; i < rc[m][s]; ++i)
                want[rd[m][s] + i] = src[s][sd[s][m] + i];
        EXPECT_EQ(dst[m], want) << "member " << m;
    }
    // Forty allreduces in flight per member at once, completed in any order
    // of waiting: each its own bytes.
    constexpr int kOps = 40;
    std::vector<std::vector<std::vector<int64_t>>> in(p), out(p);
    std::vector<std::vector<dp_request_t *>> reqs(p, std::vector<dp_request_t *>(kOps));
    for (int m = 0; m < p; ++m) {
        in[m].resize(kOps);
        out[m].resize(kOps);
        for (int k = 0; k < kOps; ++k) {
            in[m][k].assign(size_t(100 + k), int64_t(m * 1000 + k));
            out[m][k].assign(size_t(100 + k), 0);
            ASSERT_EQ(dp_iallreduce(in[m][k].data(), out[m][k].data(), in[m][k].size(),
                                    DP_INT64, DP_SUM, team[m], &reqs[m][k]),
                      DP_OK);
        }
    }
    for (int m = 0; m < p; ++m)
        for (int k = kOps - 1; k >= 0; --k) {
            ASSERT_EQ(dp_wait(reqs[m][k]), DP_OK);
            dp_request_free(reqs[m][k]);
            int64_t want = 0;
            for (int s = 0; s < p; ++s) want += s * 1000 + k;
            EXPECT_EQ(out[m][k], std::vector<int64_t>(size_t(100 + k), want)) << m << " " << k;
        }
}

// Sources and results of more than one message (1 MiB) travel in pieces
// both ways: an allreduce of 9 MiB + 12 bytes, an allgather whose result is
// three times its source, each bit-exact.
TEST_P(RemoteTeamMemoryTest, LargeCollectivesTravelInPieces) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    MixedTeam team(r, {true, false, true}, "remote-large", GetParam());
    ASSERT_TRUE(team.joined());
    const int p = team.size();
    const size_t n = 9 * (size_t(1) << 18) + 3;  // int32s
    std::vector<std::vector<int32_t>> in(p), out(p);
    for (int m = 0; m < p; ++m) {
        in[m].resize(n);
        for (size_t i = 0; i < n; ++i) in[m][i] = int32_t(i * 7 + size_t(m) * 1000003);
        out[m].assign(n, 0);
    }
    auto st = team.run([&](int m, dp_request_t **q) {
        return dp_iallreduce(in[m].data(), out[m].data(), n, DP_INT32, DP_SUM, team[m], q);
    });
    ASSERT_EQ(st, std::vector<dp_status_t>(size_t(p), DP_OK));
    for (int m = 0; m < p; ++m) {
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i)
            wrong += out[m][i] != int32_t(3 * (i * 7) + 3000009);
        EXPECT_EQ(wrong, 0u) << "member " << m;
    }
    const size_t g = (size_t(3) << 18) + 1;  // 3 MiB + 4 bytes from each
    std::vector<std::vector<int32_t>> gathered(p, std::vector<int32_t>(g * size_t(p), -1));
    st = team.run([&](int m, dp_request_t **q) {
        return dp_iallgather(in[m].data(), gathered[m].data(), g, DP_INT32, team[m], q);
    });
    ASSERT_EQ(st, std::vector<dp_status_t>(size_t(p), DP_OK));
    for (int m = 0; m < p; ++m)
        for (int s = 0; s < p; ++s)
            EXPECT_TRUE(std::equal(in[s].begin(), in[s].begin() + long(g),
                                   gathered[m].begin() + long(g * size_t(s))))
                << "member " << m << " block " << s;
}

// Two simulated nodes (two agents as one MPI job), each agent listening on
// the network as a DPU's would: ranks 0 and 1 reach agent 0 over TCP, rank
// 2 agent 1 over TCP, rank 3 attaches to agent 1 locally. Every collective
// of the table, bit-exact: the proxies are members of their agents' parts
// of the team, and the agents' steps between nodes are as ever.
TEST_P(RemoteTeamMemoryTest, RanksOfTwoNodesReachTheirAgentsOverTheNetwork) {
    if (const std::string why = deputy::testing::why_no_nodes(); !why.empty()) GTEST_SKIP() << why;
    KeyFile key;
    deputy::testing::NodeAgents agents(2, {"--listen", "tcp://127.0.0.1:0", "--key", key.path()});
    ASSERT_TRUE(agents.ready());
    std::vector<std::string> address(2);
    for (int k = 0; k < 2; ++k) {
        std::string text, error;
        ASSERT_EQ(deputy::channel::request_agent_info(agents.socket(k), "", 2'000'000'000, &text,
                                                      &error),
                  DP_OK)
            << error;
        address[k] = nlohmann::json::parse(text)["listen"]["address"].get<std::string>();
        ASSERT_EQ(address[k].rfind("tcp://127.0.0.1:", 0), 0u) << address[k];
    }
    Env env_key("DEPUTY_KEY", key.path());
    dp_config_t base = DP_CONFIG_INITIALIZER;
    base.job_secret = deputy::testing::kTestJobSecret;
    std::vector<dp_config_t> configs(4, base);
    configs[0].agent = address[0].c_str();
    configs[1].agent = address[0].c_str();
    configs[2].agent = address[1].c_str();
    const std::string local = agents.socket(1);
    configs[3].agent = local.c_str();
    MixedTeam team(configs, "remote-nodes", GetParam());
    ASSERT_TRUE(team.joined());
    deputy::testing::TableShape shape;
    shape.counts = {0, 1, 4097};
    deputy::testing::check_table(team, [&](int m) { return team[m]; }, "two nodes, remote ranks",
                                 shape);
}

// Waits for `req` for at most 5 s by dp_test; its status (DP_ERR_TIMEOUT
// when it did not complete).
dp_status_t wait_for(dp_request_t *req) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
        int done = 0;
        const dp_status_t s = dp_test(req, &done);
        if (done || s != DP_OK) return s;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return DP_ERR_TIMEOUT;
}

// Point-to-point on a team of remote and local members: a ring of sends,
// a wildcard receive posted before its message, a message of 3 MiB + 5
// bytes, a probe, and a send that completes while the same member's older
// receive still waits (its proxy answers records as they complete, not in
// posting order).
TEST_P(RemoteTeamMemoryTest, MessagesBetweenRemoteAndLocalMembers) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    MixedTeam team(r, {true, false, true}, "remote-p2p", GetParam());
    ASSERT_TRUE(team.joined());
    const int p = team.size();
    // The ring: member m sends 1000 + m int32s to m + 1.
    std::vector<std::vector<int32_t>> out(p), in(p);
    std::vector<dp_request_t *> sends(p), recvs(p);
    for (int m = 0; m < p; ++m) {
        out[m].assign(size_t(1000 + m), m * 11);
        in[m].assign(2000, -1);
        ASSERT_EQ(dp_irecv(in[m].data(), in[m].size() * 4, (m + p - 1) % p, 5, team[m], &recvs[m]),
                  DP_OK);
    }
    for (int m = 0; m < p; ++m)
        ASSERT_EQ(dp_isend(out[m].data(), out[m].size() * 4, (m + 1) % p, 5, team[m], &sends[m]),
                  DP_OK);
    for (int m = 0; m < p; ++m) {
        ASSERT_EQ(wait_for(sends[m]), DP_OK) << "send of " << m;
        ASSERT_EQ(wait_for(recvs[m]), DP_OK) << "receive of " << m;
        dp_msg_status_t st{};
        ASSERT_EQ(dp_request_status(recvs[m], &st), DP_OK);
        const int from = (m + p - 1) % p;
        EXPECT_EQ(st.source, from);
        EXPECT_EQ(st.tag, 5);
        EXPECT_EQ(st.bytes, size_t(1000 + from) * 4);
        EXPECT_TRUE(std::equal(out[from].begin(), out[from].end(), in[m].begin())) << m;
        EXPECT_EQ(in[m][size_t(1000 + from)], -1) << "written past the message";
        dp_request_free(sends[m]);
        dp_request_free(recvs[m]);
    }
    // A wildcard receive posted before its message; a large message.
    std::vector<uint8_t> big((3 << 20) + 5), got(big.size() + 100, 0);
    for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 131 + 7);
    dp_request_t *rq = nullptr, *sq = nullptr;
    ASSERT_EQ(dp_irecv(got.data(), got.size(), DP_ANY_SOURCE, DP_ANY_TAG, team[0], &rq), DP_OK);
    ASSERT_EQ(dp_isend(big.data(), big.size(), 0, 77, team[2], &sq), DP_OK);
    ASSERT_EQ(wait_for(rq), DP_OK);
    ASSERT_EQ(wait_for(sq), DP_OK);
    dp_msg_status_t st{};
    ASSERT_EQ(dp_request_status(rq, &st), DP_OK);
    EXPECT_EQ(st.source, 2);
    EXPECT_EQ(st.tag, 77);
    EXPECT_EQ(st.bytes, big.size());
    EXPECT_TRUE(std::equal(big.begin(), big.end(), got.begin()));
    dp_request_free(rq);
    dp_request_free(sq);
    // A probe finds a message before its receive, and nothing after it.
    int32_t word = 4242, back = 0;
    ASSERT_EQ(dp_isend(&word, 4, 0, 11, team[1], &sq), DP_OK);
    int flag = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!flag && std::chrono::steady_clock::now() < until)
        ASSERT_EQ(dp_iprobe(1, 11, team[0], &flag, &st), DP_OK);
    ASSERT_EQ(flag, 1);
    EXPECT_EQ(st.source, 1);
    EXPECT_EQ(st.bytes, 4u);
    ASSERT_EQ(dp_recv(&back, 4, 1, 11, team[0], &st), DP_OK);
    EXPECT_EQ(back, 4242);
    ASSERT_EQ(wait_for(sq), DP_OK);
    dp_request_free(sq);
    ASSERT_EQ(dp_iprobe(1, 11, team[0], &flag, &st), DP_OK);
    EXPECT_EQ(flag, 0);
    // Member 0's receive waits for member 2, whose send waits for member 0's
    // message: member 0's younger send must complete first.
    int32_t a = 1, b = 0, c = 0, d = 2;
    dp_request_t *older = nullptr, *younger = nullptr, *other = nullptr;
    ASSERT_EQ(dp_irecv(&b, 4, 2, 1, team[0], &older), DP_OK);
    ASSERT_EQ(dp_isend(&a, 4, 2, 2, team[0], &younger), DP_OK);
    ASSERT_EQ(wait_for(younger), DP_OK) << "a completed send waited behind an older receive";
    ASSERT_EQ(dp_recv(&c, 4, 0, 2, team[2], &st), DP_OK);
    EXPECT_EQ(c, 1);
    ASSERT_EQ(dp_isend(&d, 4, 0, 1, team[2], &other), DP_OK);
    ASSERT_EQ(wait_for(older), DP_OK);
    EXPECT_EQ(b, 2);
    ASSERT_EQ(wait_for(other), DP_OK);
    for (dp_request_t *q : {older, younger, other}) dp_request_free(q);
}

TEST(RemoteTeamTest, ARemoteMemberThatLeavesFailsItsTeammatesWithinTheBound) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    const int idle_fds = r.agent->settled_fds();
    Env key("DEPUTY_KEY", r.key.path());
    {
        MixedTeam team(r, {true, false}, "remote-gone");
        ASSERT_TRUE(team.joined());
        // A large allreduce the remote member never posts: the local member
        // waits on it while the remote one leaves.
        std::vector<float> a(1 << 16, 1.0f), b(1 << 16, 0.0f);
        dp_request_t *req = nullptr;
        ASSERT_EQ(dp_iallreduce(a.data(), b.data(), a.size(), DP_FLOAT32, DP_SUM, team[1], &req),
                  DP_OK);
        team.leave(0);
        const auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(dp_wait(req), DP_ERR_AGENT_LOST);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
        dp_request_free(req);
        // Teams are still made afterwards, through the same agent.
        MixedTeam again(r, {true, false}, "remote-after");
        ASSERT_TRUE(again.joined());
        std::vector<int32_t> x(1000, 3), y(1000, 0), z(1000, 0);
        const auto st = again.run([&](int m, dp_request_t **q) {
            return dp_iallreduce(x.data(), m == 0 ? y.data() : z.data(), x.size(), DP_INT32,
                                 DP_SUM, again[m], q);
        });
        EXPECT_EQ(st, std::vector<dp_status_t>(2, DP_OK));
        EXPECT_EQ(y, std::vector<int32_t>(1000, 6));
        EXPECT_EQ(z, y);
    }
    expect_fds_back(*r.agent, idle_fds);
}

}  // namespace

namespace hostile {

namespace ch = deputy::channel;
namespace control = ch::control;

// A proxy post of `c` on `count` int32s whose block starts at `base`.
control::ProxyPost proxy_post(uint32_t slot, uint8_t opcode, uint64_t count, uint64_t base,
                              uint64_t block_bytes, uint64_t src, uint64_t dst) {
    ch::CollPost p{};
    p.opcode = opcode;
    p.dtype = DP_INT32;
    p.redop = DP_SUM;
    p.count = count;
    p.src = src;
    p.dst = dst;
    control::ProxyPost m;
    m.slot = slot;
    std::memcpy(m.post, &p, sizeof(p));
    m.block_base = base;
    m.block_bytes = block_bytes;
    return m;
}

// Sends `m` and returns the proxy's answer (status 0xff: none came).
control::ProxyDone answer_to(ch::Transport &t, const control::ProxyPost &m) {
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    control::ProxyDone done;
    done.status = 0xff;
    if (t.send(ch::MsgType::kProxyPost, payload.data(), payload.size(), 2'000'000'000) != DP_OK)
        return done;
    std::vector<uint8_t> answer;
    std::string error;
    if (next(t, &answer) != ch::MsgType::kProxyDone ||
        control::decode(answer.data(), answer.size(), &done, &error) != DP_OK)
        done.status = 0xff;
    return done;
}

}  // namespace hostile

// A team of two that a hostile peer's test runs beside: still served.
static void expect_served(MixedTeam &bystanders) {
    std::vector<int32_t> a(333, 2), b(333, 0), c(333, 0);
    EXPECT_EQ(bystanders.run([&](int m, dp_request_t **q) {
        return dp_iallreduce(a.data(), m ? c.data() : b.data(), a.size(), DP_INT32, DP_SUM,
                             bystanders[m], q);
    }),
              std::vector<dp_status_t>(2, DP_OK));
    EXPECT_EQ(b, std::vector<int32_t>(333, 4));
    EXPECT_EQ(c, b);
}

// A peer holding the key speaks to a team proxy by hand: posts whose
// buffers leave the block they name, an unknown collective, a counts block
// of the wrong length, a message outside its block, a receive carrying
// bytes, a block larger than the proxy's pool. Each is
// answered with its status and runs nothing; a good post after them is
// served; a piece of a source out of order ends only that link. A team of remote
// members is served meanwhile, and the agent gives every fd back.
TEST(RemoteTeamTest, APeerThatPostsWhatNoClientWouldHurtsOnlyItself) {
    using namespace hostile;
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    const int idle_fds = r.agent->settled_fds();
    Env key("DEPUTY_KEY", r.key.path());
    {
        MixedTeam bystanders(r, {true, true}, "bystanders");
        ASSERT_TRUE(bystanders.joined());
        auto t = authenticated(r, control::kMaxControlMessage + ch::secure::kOverhead);
        ASSERT_NE(t, nullptr);
        control::Attach hello;
        hello.purpose = control::Purpose::kTeamProxy;
        std::vector<uint8_t> payload, answer;
        control::encode(hello, &payload);
        ASSERT_EQ(t->send(ch::MsgType::kAttach, payload.data(), payload.size(), 2'000'000'000),
                  DP_OK);
        ASSERT_EQ(next(*t, &answer), ch::MsgType::kReply);
        payload.clear();
        control::encode(control::TeamJoin{5, "alone", deputy::testing::kTestJobSecret, 0, 1, 5000},
                        &payload);
        ASSERT_EQ(t->send(ch::MsgType::kTeamJoin, payload.data(), payload.size(), 2'000'000'000),
                  DP_OK);
        ASSERT_EQ(next(*t, &answer), ch::MsgType::kTeamReady);
        control::TeamReady ready;
        std::string error;
        ASSERT_EQ(control::decode(answer.data(), answer.size(), &ready, &error), DP_OK);
        ASSERT_EQ(ready.status, DP_OK) << ready.reason;

        const uint8_t allreduce = ch::kCollPostBase + uint8_t(deputy::coll::Collective::allreduce);
        const uint64_t base = 0x10000;
        // The destination outside the block.
        EXPECT_EQ(answer_to(*t, proxy_post(1, allreduce, 4, base, 32, base, base + 4096)).status,
                  DP_COMP_ADDRESS_DENIED);
        // Buffers that start inside but run past its end.
        EXPECT_EQ(answer_to(*t, proxy_post(2, allreduce, 1000, base, 64, base, base + 32)).status,
                  DP_COMP_ADDRESS_DENIED);
        // No such collective.
        EXPECT_EQ(answer_to(*t, proxy_post(3, 0xf0, 4, base, 32, base, base + 16)).status,
                  DP_COMP_INVALID_OPCODE);
        // alltoallv with a counts block of the wrong length.
        control::ProxyPost v = proxy_post(
            4, ch::kCollPostBase + uint8_t(deputy::coll::Collective::alltoallv), 0, base, 64,
            base, base + 32);
        v.counts.assign(8, 0);
        EXPECT_EQ(answer_to(*t, v).status, DP_COMP_INVALID_FIELD);
        // A message whose buffer is not the block it names; a receive that
        // brings source bytes.
        ch::P2pPost message{};
        message.opcode = ch::kP2pSend;
        message.buf = base + 64;
        message.bytes = 16;
        control::ProxyPost m2;
        m2.slot = DP_TEAM_MAX_OUTSTANDING + 3;
        std::memcpy(m2.post, &message, sizeof message);
        m2.block_base = base;
        m2.block_bytes = 4096;
        m2.in_total = 16;
        m2.in.assign(16, 9);
        EXPECT_EQ(answer_to(*t, m2).status, DP_COMP_ADDRESS_DENIED);
        message.opcode = ch::kP2pRecv;
        message.buf = base;
        std::memcpy(m2.post, &message, sizeof message);
        EXPECT_EQ(answer_to(*t, m2).status, DP_COMP_INVALID_FIELD);
        // A block larger than the proxy's whole pool.
        EXPECT_EQ(answer_to(*t, proxy_post(5, allreduce, 4, base, uint64_t(1) << 40, base,
                                           base + 16))
                      .status,
                  DP_COMP_INVALID_SIZE);
        // A good one: 4 int32s in place, a team of one gives them back.
        control::ProxyPost good = proxy_post(6, allreduce, 4, base, 16, base, base);
        const int32_t values[4] = {1, -2, 3, 1 << 30};
        good.in.assign(reinterpret_cast<const uint8_t *>(values),
                       reinterpret_cast<const uint8_t *>(values) + sizeof values);
        good.in_total = good.in.size();
        const control::ProxyDone done = answer_to(*t, good);
        EXPECT_EQ(done.status, DP_COMP_SUCCESS);
        EXPECT_EQ(done.slot, 6u);
        EXPECT_EQ(done.out_offset, 0u);
        EXPECT_EQ(done.out, good.in);
        // The bystanders' team works throughout.
        expect_served(bystanders);
        // A post whose source comes in pieces, then a piece out of order:
        // the link ends (nothing was posted).
        control::ProxyPost split = proxy_post(7, allreduce, 8, base, 32, base, base);
        split.in_total = 32;
        split.in.assign(16, 1);
        payload.clear();
        control::encode(split, &payload);
        ASSERT_EQ(t->send(ch::MsgType::kProxyPost, payload.data(), payload.size(), 2'000'000'000),
                  DP_OK);
        payload.clear();
        control::encode(control::ProxyData{7, 24, std::vector<uint8_t>(8, 2)}, &payload);
        ASSERT_EQ(t->send(ch::MsgType::kProxyData, payload.data(), payload.size(), 2'000'000'000),
                  DP_OK);
        EXPECT_EQ(next(*t), std::nullopt);
    }
    expect_fds_back(*r.agent, idle_fds);
}

namespace {

namespace ch = deputy::channel;
namespace control = ch::control;

// A by-hand peer's proxy link: ATTACH for a team proxy, answered.
std::unique_ptr<ch::Transport> proxy_link(const RemoteAgent &r) {
    auto t = authenticated(r, control::kMaxControlMessage + ch::secure::kOverhead);
    if (!t) return nullptr;
    control::Attach hello;
    hello.purpose = control::Purpose::kTeamProxy;
    std::vector<uint8_t> payload, answer;
    control::encode(hello, &payload);
    if (t->send(ch::MsgType::kAttach, payload.data(), payload.size(), 2'000'000'000) != DP_OK ||
        next(*t, &answer) != ch::MsgType::kReply)
        return nullptr;
    return t;
}

// Sends a PROXY_FABRIC; the REPLY's status (DP_ERR_INTERNAL: none came).
dp_status_t offer_fabric(ch::Transport &t, const std::string &provider,
                         const std::vector<uint8_t> &address, std::string *reason = nullptr) {
    std::vector<uint8_t> payload, answer;
    control::encode(control::ProxyFabric{provider, address}, &payload);
    control::Reply reply{DP_ERR_INTERNAL, ""};
    std::string error;
    if (t.send(ch::MsgType::kProxyFabric, payload.data(), payload.size(), 2'000'000'000) !=
            DP_OK ||
        next(t, &answer) != ch::MsgType::kReply ||
        control::decode(answer.data(), answer.size(), &reply, &error) != DP_OK)
        return DP_ERR_INTERNAL;
    if (reason) *reason = reply.reason;
    return reply.status;
}

// Joins a team of one by hand; its status.
dp_status_t join_alone(ch::Transport &t, const std::string &key) {
    std::vector<uint8_t> payload, answer;
    control::encode(control::TeamJoin{5, key, deputy::testing::kTestJobSecret, 0, 1, 5000},
                    &payload);
    control::TeamReady ready;
    std::string error;
    if (t.send(ch::MsgType::kTeamJoin, payload.data(), payload.size(), 2'000'000'000) != DP_OK ||
        next(t, &answer) != ch::MsgType::kTeamReady ||
        control::decode(answer.data(), answer.size(), &ready, &error) != DP_OK)
        return DP_ERR_INTERNAL;
    return ready.status;
}

// An allreduce of `count` int32s in memory mode rdma: the member's buffers
// at src and dst, exposed under the given ranges.
control::ProxyPost remote_post(uint32_t slot, uint64_t count, const void *src,
                               const deputy::fabric::Registration *in, void *dst,
                               const deputy::fabric::Registration *out) {
    control::ProxyPost m = hostile::proxy_post(
        slot, ch::kCollPostBase + uint8_t(deputy::coll::Collective::allreduce), count, 0, 0,
        reinterpret_cast<uint64_t>(src), reinterpret_cast<uint64_t>(dst));
    m.memory = control::kProxyRemoteMemory;
    if (in) {
        m.src_base = in->remote_base();
        m.src_key = in->key();
    }
    if (out) {
        m.dst_base = out->remote_base();
        m.dst_key = out->key();
    }
    return m;
}

// Memory mode rdma, by hand: an RMA endpoint on another host than the
// peer's is refused (the proxy would read or write a third party's memory
// in the peer's name), as is a provider the agent's host lacks, and a
// remote-memory post on a link that offered no endpoint; an honest post is
// served bit-exact; a post whose key lies is refused, ends that link, and
// leaves the member's memory as it was. A bystander team is served, and
// the agent gives every fd back.
TEST(RemoteTeamTest, APeerWhoseMemoryOffersLieHurtsOnlyItself) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    const int idle_fds = r.agent->settled_fds();
    Env key("DEPUTY_KEY", r.key.path());
    {
        MixedTeam bystanders(r, {true, true}, "rdma-bystanders", DP_MEMORY_RDMA);
        ASSERT_TRUE(bystanders.joined());
        deputy::fabric::ExposedMemory memory("tcp", "127.0.0.1");
        // An endpoint on another host: 192.0.2.77 (TEST-NET-1), port 9.
        std::vector<uint8_t> elsewhere(sizeof(sockaddr_in), 0);
        sockaddr_in far{};
        far.sin_family = AF_INET;
        far.sin_port = htons(9);
        inet_pton(AF_INET, "192.0.2.77", &far.sin_addr);
        std::memcpy(elsewhere.data(), &far, sizeof far);
        auto t = proxy_link(r);
        ASSERT_NE(t, nullptr);
        std::string reason;
        EXPECT_EQ(offer_fabric(*t, "tcp", elsewhere, &reason), DP_ERR_DENIED);
        EXPECT_NE(reason.find("192.0.2.77"), std::string::npos) << reason;
        EXPECT_EQ(next(*t), std::nullopt) << "the link goes on after a refused endpoint";
        t = proxy_link(r);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(offer_fabric(*t, "nosuchprovider", memory.address(), &reason),
                  DP_ERR_UNSUPPORTED);
        EXPECT_NE(reason.find("nosuchprovider"), std::string::npos) << reason;
        // No endpoint offered: a remote-memory post is refused, the link lives.
        t = proxy_link(r);
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(join_alone(*t, "rdma-no-offer"), DP_OK);
        int32_t values[4] = {1, -2, 3, 1 << 30}, result[4] = {};
        EXPECT_EQ(hostile::answer_to(*t, remote_post(1, 4, values, nullptr, result, nullptr))
                      .status,
                  DP_COMP_INVALID_FIELD);
        // An honest offer and post: served into our memory, bit-exact.
        t = proxy_link(r);
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(offer_fabric(*t, "tcp", memory.address()), DP_OK);
        ASSERT_EQ(join_alone(*t, "rdma-alone"), DP_OK);
        auto in = memory.expose(values, sizeof values, FI_REMOTE_READ);
        auto out = memory.expose(result, sizeof result, FI_REMOTE_WRITE);
        control::ProxyDone done = hostile::answer_to(*t, remote_post(2, 4, values, in.get(),
                                                                     result, out.get()));
        EXPECT_EQ(done.status, DP_COMP_SUCCESS);
        EXPECT_TRUE(done.out.empty());
        EXPECT_EQ(std::memcmp(result, values, sizeof values), 0);
        // A key that lies: refused, the link ends, our memory stays.
        int32_t kept[4] = {7, 7, 7, 7};
        auto wrong = memory.expose(kept, sizeof kept, FI_REMOTE_WRITE);
        control::ProxyPost liar = remote_post(3, 4, values, in.get(), kept, wrong.get());
        liar.src_key ^= 1;
        EXPECT_EQ(hostile::answer_to(*t, liar).status, DP_COMP_ADDRESS_DENIED);
        EXPECT_EQ(next(*t), std::nullopt) << "the link goes on after a refused key";
        EXPECT_EQ(kept[0], 7);
        EXPECT_EQ(kept[3], 7);
        // The bystanders' team works throughout.
        expect_served(bystanders);
    }
    expect_fds_back(*r.agent, idle_fds);
}

// Memory mode rdma, a member that unmaps what it exposed (the issue's "a
// client that registers memory then unmaps it"): hostile_client posts an
// allreduce as rank 0, unmaps its result buffer and waits. The proxy's
// write-back meets the hole in the member's own process (with the tcp
// provider its progress thread copies there and faults; a pinning provider
// would fail the transfer): that process ends or gets an error, the agent
// notices within the bound, its teammate's request ends (never hangs), and
// the agent serves a new team and gives every fd back.
TEST(RemoteTeamTest, AMemberThatUnmapsWhatItExposedHurtsOnlyItself) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    const int idle_fds = r.agent->settled_fds();
    Env key("DEPUTY_KEY", r.key.path());
    {
        const dp_config_t remote = r.config();
        deputy::testing::Attacker victim(
            *r.agent, {"rdma-unmap", remote.agent},
            {"DEPUTY_KEY=" + r.key.path(),
             std::string("DEPUTY_JOB_SECRET=") + deputy::testing::kTestJobSecret});
        dp_config_t local = r.agent->config();
        dp_context_t *ctx = nullptr;
        ASSERT_EQ(dp_init(&local, &ctx), DP_OK);
        dp_team_t *team = nullptr;
        ASSERT_EQ(dp_team_create_timeout(ctx, "unmap-victim", 1, 2, 10000, &team), DP_OK);
        ASSERT_TRUE(victim.wait_for("unmapped", 10000)) << victim.output;
        EXPECT_EQ(victim.said["post"], "DP_OK");
        std::vector<int32_t> values(4 * size_t(sysconf(_SC_PAGESIZE)) / 4, 4), result(values.size());
        dp_request_t *req = nullptr;
        ASSERT_EQ(dp_iallreduce(values.data(), result.data(), values.size(), DP_INT32, DP_SUM,
                                team, &req),
                  DP_OK);
        const auto start = std::chrono::steady_clock::now();
        const dp_status_t mine = dp_wait(req);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
        // The record completed before the write-back: ours is right.
        if (mine == DP_OK) {
            EXPECT_EQ(result, std::vector<int32_t>(values.size(), 7));
        }
        dp_request_free(req);
        const int code = victim.finish(20);
        EXPECT_NE(code, 0) << victim.output;
        std::printf("the victim: exit %d, wait %s\n", code, victim.said["wait"].c_str());
        dp_team_destroy(team);
        dp_finalize(ctx);
        ASSERT_TRUE(r.agent->running());
        MixedTeam after(r, {true, true}, "unmap-after", DP_MEMORY_RDMA);
        ASSERT_TRUE(after.joined());
        expect_served(after);
    }
    expect_fds_back(*r.agent, idle_fds);
}

// The agent's file descriptors under a small RLIMIT_NOFILE, spent by one
// remote rdma member's teams (each a relay, a proxy attached as a client, a
// board and a libfabric endpoint in the agent: 18 fds with the tcp
// provider): a team that would not fit is refused with a status, and the
// log names the limit; no open fails unchecked ("Too many open files"),
// nobody hangs, and once they are closed a team forms again.
TEST(RemoteTeamTest, RemoteTeamsCountInTheAgentsFdBudget) {
    RemoteAgent r({"-l", "40"}, true, true, "ulimit -n 160 && exec");
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    dp_config_t c = r.config();
    c.memory_mode = DP_MEMORY_RDMA;
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&c, &ctx), DP_OK);
    std::vector<dp_team_t *> teams;
    dp_status_t refused = DP_OK;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 24 && refused == DP_OK; ++i) {
        dp_team_t *t = nullptr;
        refused = dp_team_create_timeout(ctx, ("fd-" + std::to_string(i)).c_str(), 0, 1, 5000, &t);
        if (refused == DP_OK) teams.push_back(t);
    }
    EXPECT_NE(refused, DP_OK) << teams.size() << " teams fit under 160 fds";
    EXPECT_GE(teams.size(), 2u);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
    // The teams that formed work.
    for (dp_team_t *t : teams) {
        int32_t v[3] = {1, 2, 3}, out[3] = {};
        EXPECT_EQ(dp_allreduce(v, out, 3, DP_INT32, DP_SUM, t), DP_OK);
        EXPECT_EQ(out[2], 3);
    }
    for (dp_team_t *t : teams) dp_team_destroy(t);
    dp_team_t *again = nullptr;
    EXPECT_TRUE(eventually(
        [&] {
            if (dp_team_create_timeout(ctx, "fd-again", 0, 1, 5000, &again) != DP_OK) return false;
            return true;
        },
        10000));
    if (again) dp_team_destroy(again);
    dp_finalize(ctx);
    ASSERT_TRUE(r.agent->alive());
    std::ifstream log(r.agent->log_path());
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("file descriptors in use (RLIMIT_NOFILE"), std::string::npos) << text;
    EXPECT_EQ(text.find("Too many open files"), std::string::npos) << text;
}

static int threads_of_this_process() {
    int n = 0;
    if (DIR *d = opendir("/proc/self/task")) {
        while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

// Memory mode rdma: a context's teams share one RMA endpoint and its
// progress thread (Context::exposed_memory): three teams cost the thread
// three staged teams cost, plus one; and each is served bit-exact.
TEST(RemoteTeamTest, RdmaTeamsOfOneContextShareItsEndpoint) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    Env key("DEPUTY_KEY", r.key.path());
    int added[2] = {};
    for (int rdma = 0; rdma < 2; ++rdma) {
        dp_config_t c = r.config();
        c.memory_mode = rdma ? DP_MEMORY_RDMA : DP_MEMORY_STAGED;
        dp_context_t *ctx = nullptr;
        ASSERT_EQ(dp_init(&c, &ctx), DP_OK);
        const int before = threads_of_this_process();
        std::vector<dp_team_t *> teams(3, nullptr);
        for (int i = 0; i < 3; ++i)
            ASSERT_EQ(dp_team_create_timeout(ctx, ("share-" + std::to_string(rdma) + "-" +
                                                   std::to_string(i)).c_str(),
                                             0, 1, 5000, &teams[i]),
                      DP_OK);
        added[rdma] = threads_of_this_process() - before;
        for (dp_team_t *t : teams) {
            int32_t v[5] = {1, 2, 3, 4, 5}, out[5] = {};
            EXPECT_EQ(dp_allreduce(v, out, 5, DP_INT32, DP_SUM, t), DP_OK);
            EXPECT_EQ(std::memcmp(v, out, sizeof v), 0);
            dp_team_destroy(t);
        }
        dp_finalize(ctx);
    }
    EXPECT_EQ(added[1], added[0] + 1) << "staged " << added[0] << ", rdma " << added[1];
}

// Memory mode rdma's refusals on the client's side, each naming what to change.
TEST(RemoteTeamTest, RdmaModeAsksForARemoteAgentAndAProviderThatExists) {
    RemoteAgent r;
    ASSERT_TRUE(r.agent->running());
    // With a local agent: refused at dp_init.
    dp_config_t local = r.agent->config();
    local.memory_mode = DP_MEMORY_RDMA;
    dp_context_t *ctx = nullptr;
    EXPECT_EQ(dp_init(&local, &ctx), DP_ERR_INVALID);
    {
        Env memory("DEPUTY_MEMORY", "rdma");
        EXPECT_EQ(dp_init(&local, &ctx), DP_ERR_INVALID);
    }
    // A provider this host lacks: dp_team_create says so, the context lives.
    Env key("DEPUTY_KEY", r.key.path());
    dp_config_t remote = r.config();
    remote.memory_mode = DP_MEMORY_RDMA;
    remote.fabric_provider = "nosuchprovider";
    ASSERT_EQ(dp_init(&remote, &ctx), DP_OK);
    EXPECT_EQ(dp_memory_mode(ctx), DP_MEMORY_RDMA);
    dp_team_t *team = nullptr;
    EXPECT_EQ(dp_team_create_timeout(ctx, "rdma-no-provider", 0, 1, 2000, &team),
              DP_ERR_UNSUPPORTED);
    // The mover's operations go staged in an rdma context.
    std::vector<uint8_t> a(4096), b(4096, 0);
    for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 13 + 1);
    dp_mover_t *mover = nullptr;
    ASSERT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
    alignas(32) dp_completion_t record{};
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.flags = DP_FLAG_COMPLETION;
    d.size = a.size();
    d.src = reinterpret_cast<uint64_t>(a.data());
    d.dst = reinterpret_cast<uint64_t>(b.data());
    d.completion = reinterpret_cast<uint64_t>(&record);
    ASSERT_EQ(dp_mover_submit(mover, 0, &d), DP_OK);
    ASSERT_EQ(dp_mover_wait(mover, &record, DP_WAIT_YIELD, 10'000'000'000), DP_OK);
    EXPECT_EQ(record.status, DP_COMP_SUCCESS);
    EXPECT_EQ(b, a);
    dp_mover_close(mover);
    dp_finalize(ctx);
}

}  // namespace
