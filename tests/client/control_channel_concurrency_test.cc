// The client's control channel (client/control_channel.h) shared by many
// threads, against a scripted agent on the other end of a socketpair: each
// answer reaches the thread whose request it answers, joins answered out of
// order included; a closed socket, a missing answer or an answer nobody
// asked for fails every waiter at once; a team's fds past one message
// arrive in TEAM_VIEWS, and views out of place break the channel; and
// waiting costs no CPU.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel/control.h"
#include "channel/socket_io.h"
#include "client/control_channel.h"
#include "common/timing.h"

namespace {

using deputy::UniqueFd;
using deputy::channel::MsgType;
using deputy::client::ControlChannel;
namespace control = deputy::channel::control;

constexpr int64_t kSlice = 50'000'000;  // the reader looks at the agent every 50 ms

struct Frame {
    MsgType type = MsgType::kInvalid;
    std::vector<uint8_t> payload;
};

// The agent's end: reads frames and answers them as a test says.
class FakeAgent {
  public:
    explicit FakeAgent(UniqueFd fd) : fd_(std::move(fd)) {}
    bool read(Frame *f, int64_t timeout_ns = 5'000'000'000) {
        return control::recv_message(fd_.get(), control::kMaxControlMessage, &f->type, &f->payload,
                                     nullptr, 0, nullptr, timeout_ns, "fake agent") == DP_OK;
    }
    void send(MsgType type, const std::vector<uint8_t> &payload) {
        std::lock_guard<std::mutex> lock(send_mutex_);
        ASSERT_EQ(control::send_message(fd_.get(), type, payload, nullptr, 0, 1'000'000'000,
                                        "fake agent"),
                  DP_OK);
    }
    // REPLY whose reason is the request's payload, as text: its asker can
    // tell it is its own.
    void reply_echo(const Frame &f) {
        std::vector<uint8_t> out;
        control::encode(control::Reply{DP_OK, std::string(f.payload.begin(), f.payload.end())},
                        &out);
        send(MsgType::kReply, out);
    }
    void send_fds(MsgType type, const std::vector<uint8_t> &payload, const std::vector<int> &fds) {
        std::lock_guard<std::mutex> lock(send_mutex_);
        ASSERT_EQ(control::send_message(fd_.get(), type, payload, fds.data(), fds.size(),
                                        1'000'000'000, "fake agent"),
                  DP_OK);
    }
    void ready(uint64_t join_id, uint32_t team_id) {
        std::vector<uint8_t> out;
        control::encode(control::TeamReady{join_id, DP_OK, team_id, ""}, &out);
        send(MsgType::kTeamReady, out);
    }
    void close() { fd_.reset(); }

  private:
    UniqueFd fd_;
    std::mutex send_mutex_;
};

// A started channel on one end of a socketpair; counts its lost reports.
struct Pair {
    ControlChannel channel;
    std::unique_ptr<FakeAgent> agent;
    std::atomic<int> lost{0};
    std::string lost_why;
    std::atomic<int> checks{0};

    explicit Pair(int64_t answer_timeout_ns = 5'000'000'000) {
        int sv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        agent = std::make_unique<FakeAgent>(UniqueFd(sv[1]));
        ControlChannel::Hooks hooks;
        hooks.check_alive = [this] {
            ++checks;
            return DP_OK;
        };
        hooks.lost = [this](const std::string &why) {
            lost_why = why;
            ++lost;
            channel.fail();  // as Context::mark_lost does
        };
        channel.start(UniqueFd(sv[0]), kSlice, answer_timeout_ns, std::move(hooks));
    }
};

control::TeamJoin join_of(uint32_t team) {
    return control::TeamJoin{0, "team-" + std::to_string(team), "secret", 0, 2, 0};
}

// 16 threads join 16 teams; 8 more send in-order requests again and again
// meanwhile. The agent answers each request at once and the joins only
// when all 16 are in, last first: every thread gets its own answer.
TEST(ControlChannel, AnswersReachTheirThreadsWhateverTheOrder) {
    Pair p;
    constexpr int kJoins = 16, kAskers = 8, kRequests = 200;
    std::thread agent([&] {
        std::vector<control::TeamJoin> joins;
        int requests = 0;
        Frame f;
        while ((joins.size() < size_t(kJoins) || requests < kAskers * kRequests) &&
               p.agent->read(&f)) {
            if (f.type == MsgType::kTeamJoin) {
                control::TeamJoin m;
                std::string error;
                ASSERT_EQ(control::decode(f.payload.data(), f.payload.size(), &m, &error), DP_OK)
                    << error;
                joins.push_back(m);
                if (joins.size() == size_t(kJoins))
                    for (auto j = joins.rbegin(); j != joins.rend(); ++j)
                        p.agent->ready(j->join_id, uint32_t(std::stoul(j->key.substr(5))) + 1000);
            } else {
                ++requests;
                p.agent->reply_echo(f);
            }
        }
    });
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < kJoins; ++k)
        threads.emplace_back([&, k] {
            control::TeamReady ready;
            if (p.channel.join(join_of(uint32_t(k)), &ready, 5'000'000'000) != DP_OK ||
                ready.status != DP_OK || ready.team_id != uint32_t(k) + 1000)
                ++wrong;
        });
    for (int a = 0; a < kAskers; ++a)
        threads.emplace_back([&, a] {
            for (int i = 0; i < kRequests; ++i) {
                const std::string tag = "asker " + std::to_string(a) + " #" + std::to_string(i);
                MsgType type;
                std::vector<uint8_t> answer;
                control::Reply reply;
                std::string error;
                if (p.channel.request(MsgType::kRegister,
                                      std::vector<uint8_t>(tag.begin(), tag.end()), &type,
                                      &answer) != DP_OK ||
                    type != MsgType::kReply ||
                    control::decode(answer.data(), answer.size(), &reply, &error) != DP_OK ||
                    reply.reason != tag)
                    ++wrong;
            }
        });
    for (auto &t : threads) t.join();
    agent.join();
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(p.lost, 0) << p.lost_why;
}

// The agent's end closes while 6 threads wait for joins and 2 for in-order
// answers: all 8 get DP_ERR_AGENT_LOST at once, the context hears it once,
// and later requests fail the same way without touching the socket.
TEST(ControlChannel, ClosedSocketFailsEveryWaiterAtOnce) {
    Pair p;
    std::atomic<int> arrived{0};
    std::thread agent([&] {
        Frame f;
        while (arrived < 8 && p.agent->read(&f)) ++arrived;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        p.agent->close();
    });
    std::vector<dp_status_t> status(8, DP_OK);
    std::vector<int64_t> returned_ns(8);
    std::vector<std::thread> threads;
    for (int k = 0; k < 8; ++k)
        threads.emplace_back([&, k] {
            if (k < 6) {
                control::TeamReady ready;
                status[k] = p.channel.join(join_of(uint32_t(k)), &ready, 5'000'000'000);
            } else {
                MsgType type;
                std::vector<uint8_t> answer;
                status[k] = p.channel.request(MsgType::kDeregister, {1, 2, 3}, &type, &answer);
            }
            returned_ns[k] = int64_t(deputy::timing::now_ns());
        });
    agent.join();
    const int64_t closed_ns = int64_t(deputy::timing::now_ns());
    for (auto &t : threads) t.join();
    for (int k = 0; k < 8; ++k) {
        EXPECT_EQ(status[k], DP_ERR_AGENT_LOST) << "thread " << k;
        EXPECT_LT(returned_ns[k] - closed_ns, 1'000'000'000) << "thread " << k;
    }
    EXPECT_EQ(p.lost, 1);
    EXPECT_NE(p.lost_why.find("closed"), std::string::npos) << p.lost_why;
    MsgType type;
    std::vector<uint8_t> answer;
    EXPECT_EQ(p.channel.request(MsgType::kRegister, {}, &type, &answer), DP_ERR_AGENT_LOST);
}

// No answer within the answer timeout: the waiting request and the joins
// waiting beside it fail, and the context is told why.
TEST(ControlChannel, MissingAnswerFailsEveryWaiter) {
    Pair p(300'000'000);
    std::thread agent([&] {
        Frame f;
        for (int i = 0; i < 3 && p.agent->read(&f); ++i) {
        }
    });
    std::vector<dp_status_t> status(3, DP_OK);
    std::vector<std::thread> threads;
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < 2; ++k)
        threads.emplace_back([&, k] {
            control::TeamReady ready;
            status[k] = p.channel.join(join_of(uint32_t(k)), &ready, 30'000'000'000);
        });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    threads.emplace_back([&] {
        MsgType type;
        std::vector<uint8_t> answer;
        status[2] = p.channel.request(MsgType::kRegister, {}, &type, &answer);
    });
    for (auto &t : threads) t.join();
    agent.join();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    for (dp_status_t s : status) EXPECT_EQ(s, DP_ERR_AGENT_LOST);
    EXPECT_GE(ms, 300);
    EXPECT_LT(ms, 3000);
    EXPECT_EQ(p.lost, 1);
    EXPECT_NE(p.lost_why.find("no answer to REGISTER within 300 ms"), std::string::npos)
        << p.lost_why;
}

// A TEAM_READY for a join nobody waits for, and a REPLY with no request
// waiting: the stream is out of step, every waiter fails.
TEST(ControlChannel, AnswerNobodyAskedForBreaksTheChannel) {
    for (const bool reply : {false, true}) {
        Pair p;
        std::thread agent([&] {
            Frame f;
            if (!p.agent->read(&f)) return;
            if (reply) {
                p.agent->reply_echo(f);  // to a join: nobody waits for a REPLY
            } else {
                p.agent->ready(4242, 1);
            }
        });
        control::TeamReady ready;
        EXPECT_EQ(p.channel.join(join_of(1), &ready, 5'000'000'000), DP_ERR_AGENT_LOST);
        agent.join();
        EXPECT_EQ(p.lost, 1);
        EXPECT_NE(p.lost_why.find(reply ? "REPLY with no request" : "join 4242"),
                  std::string::npos)
            << p.lost_why;
    }
}

// A team of 200 members with a board, pools and heaps: 401 fds, the first
// 250 with TEAM_READY, the rest with TEAM_VIEWS. Then what a confused agent
// could do: views for another join, a frame between the two, more fds than
// the views need. `step` picks the case.
enum class Views { whole, other_join, frame_between, too_many };

void team_views(Views step) {
    Pair p;
    constexpr uint32_t kSize = 200;
    constexpr size_t kFds = 1 + 2 * kSize;
    std::vector<UniqueFd> files;
    for (size_t i = 0; i < kFds + 1; ++i) {
        files.emplace_back(memfd_create("views-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        ASSERT_EQ(ftruncate(files.back().get(), 4096), 0);
        ASSERT_EQ(fcntl(files.back().get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    }
    std::thread agent([&] {
        Frame f;
        control::TeamJoin m;
        std::string error;
        if (!p.agent->read(&f) ||
            control::decode(f.payload.data(), f.payload.size(), &m, &error) != DP_OK)
            return;
        control::TeamReady ready{m.join_id, DP_OK, 7, ""};
        ready.board_bytes = 4096;
        ready.pools.assign(kSize, control::PoolView{0x1000, 4096, 0, 4096, 0x9000, 4096});
        std::vector<uint8_t> out;
        control::encode(ready, &out);
        std::vector<int> fds;
        for (const UniqueFd &f : files) fds.push_back(f.get());
        const size_t first = deputy::channel::sock::kMaxFdsPerMessage;
        p.agent->send_fds(MsgType::kTeamReady, out, {fds.begin(), fds.begin() + first});
        if (step == Views::frame_between) p.agent->reply_echo(f);
        out.clear();
        control::encode_team_views(step == Views::other_join ? m.join_id + 1 : m.join_id, &out);
        const size_t rest = kFds - first + (step == Views::too_many ? 1 : 0);
        p.agent->send_fds(MsgType::kTeamViews, out,
                          {fds.begin() + long(first), fds.begin() + long(first + rest)});
    });
    control::TeamReady ready;
    std::vector<deputy::Segment> segments;
    const dp_status_t st = p.channel.join(join_of(1), &ready, &segments, 5'000'000'000);
    agent.join();
    if (step == Views::whole) {
        ASSERT_EQ(st, DP_OK);
        EXPECT_EQ(ready.team_id, 7u);
        ASSERT_EQ(segments.size(), kFds);
        for (const deputy::Segment &s : segments) EXPECT_TRUE(s.valid() && s.size() == 4096);
        EXPECT_EQ(p.lost, 0);
        return;
    }
    EXPECT_EQ(st, DP_ERR_AGENT_LOST);
    EXPECT_EQ(p.lost, 1);
    const char *want = step == Views::other_join      ? "which waits for none"
                       : step == Views::frame_between ? "before the rest of join"
                                                      : "remaining views";
    EXPECT_NE(p.lost_why.find(want), std::string::npos) << p.lost_why;
}

TEST(ControlChannel, ATeamsFdsPastOneMessageArriveWithTeamViews) { team_views(Views::whole); }
TEST(ControlChannel, ViewsForAnotherJoinBreakTheChannel) { team_views(Views::other_join); }
TEST(ControlChannel, AFrameBetweenATeamsViewsBreaksTheChannel) {
    team_views(Views::frame_between);
}
TEST(ControlChannel, MoreViewsThanTheTeamNeedsBreakTheChannel) { team_views(Views::too_many); }

// Eight threads waiting for joins for half a second: one of them polls
// the socket in slices, the others sleep. The process's CPU time stays
// far below what one spinning thread would burn.
TEST(ControlChannel, WaitersSleep) {
    Pair p;
    std::atomic<int> arrived{0};
    std::thread agent([&] {
        Frame f;
        std::vector<uint64_t> ids;
        while (ids.size() < 8 && p.agent->read(&f)) {
            control::TeamJoin m;
            std::string error;
            ASSERT_EQ(control::decode(f.payload.data(), f.payload.size(), &m, &error), DP_OK);
            ids.push_back(m.join_id);
            ++arrived;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        for (uint64_t id : ids) p.agent->ready(id, 7);
    });
    const uint64_t cpu0 = deputy::timing::process_cpu_ns();
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int k = 0; k < 8; ++k)
        threads.emplace_back([&, k] {
            control::TeamReady ready;
            ok += p.channel.join(join_of(uint32_t(k)), &ready, 5'000'000'000) == DP_OK &&
                  ready.team_id == 7;
        });
    for (auto &t : threads) t.join();
    agent.join();
    const double cpu_ms = double(deputy::timing::process_cpu_ns() - cpu0) / 1e6;
    EXPECT_EQ(ok, 8);
    EXPECT_LT(cpu_ms, 150) << "waiting threads spin";
    // The reader looked at the agent between its slices.
    EXPECT_GE(p.checks, 2);
}

}  // namespace
