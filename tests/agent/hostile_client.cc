// The attacker of tests/agent/hostile_test.cc: a process of the agent's own
// user that does what a buggy or hostile client can do, through libdeputy
// or with its own socket and ring bytes. Each attack prints what it saw as
// "key value" lines and exits 0 when the agent behaved (refused, dropped
// it, or stayed correct), non-zero otherwise.
//
//   hostile_client SOCKET ATTACK [ARGS...]
//
// Attacks (see the test that runs each):
//   delta-race SECONDS      APPLY_DELTA while a thread rewrites the record
//   fork-exit               attach, fork, exit: the child keeps the socket
//   exit-with-work N MIB    queue N memmoves of MIB MiB, then _exit
//   coll-exit RANK OPS MIB  team of 2 (key "doomed"): post OPS allreduces; rank 1 exits
//   trickle                 send an ATTACH header one byte every 50 ms
//   no-read                 attached, send STAGED requests and never read
//   idle N SECONDS          hold N connections that never attach
//   join-flood N            TEAM_JOIN N distinct teams of 64
//   garbage N               push N garbage descriptors into the ring
//   big-pool                attach with a 1 GiB pool
//   batch-registered SECONDS   BATCHes over registered memory
//   join KEY RANK SIZE      join a team (secret from $DEPUTY_JOB_SECRET) and allreduce once
//   rdma-unmap ADDRESS      memory mode rdma on the remote agent at ADDRESS (DEPUTY_KEY):
//                           rank 0 of team "unmap-victim" of 2 posts an allreduce, unmaps
//                           its result buffer, and waits for the proxy's write into it
//   alltoallv-rewrite       rewrite an alltoallv's counts block after the agent took the post;
//                           then counts blocks outside the pool and of the wrong length;
//                           then a reduce_scatterv whose layout its plans cannot read
// Attacks that run until their standard input closes (same_user_test.cc),
// each first giving up every capability, so that root is an ordinary
// process of its uid:
//   fd-racer PID...         open every deputy memfd in /proc/PID/fd writable and map it
//   slot-flood CLIENTS JOINS   CLIENTS connections each joining JOINS teams of 2 that never form
//   fd-flood CONTEXTS TEAMS    CONTEXTS contexts each in TEAMS one-member teams
//   uffd-register SECONDS   register memory armed with userfaultfd, hold its fault SECONDS
//   uffd-register-crowd SECONDS   as many such registrations as the agent probes for one
//                           process at once, then one of ordinary memory beyond that bound
//   uffd-attach SECONDS     ATTACH naming an identity proof in memory armed with userfaultfd
//   uffd-park N             N memmoves out of registered memory armed with userfaultfd,
//                           then a DRAIN: the engines that take them wait on us
//   uffd-park-coll          an allreduce out of such memory on a one-member team, then another
//   churn N                 the victim: a decoy memfd, then (after a line on stdin) N
//                           attaches and N one-member teams
#include <deputy/deputy.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <dirent.h>
#include <linux/capability.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "channel/coll_post.h"
#include "channel/p2p_post.h"
#include "channel/socket_io.h"
#include "coll/collective.h"
#include "raw_client.h"

namespace {

namespace control = deputy::channel::control;
using deputy::channel::MsgType;
using deputy::testing::closed_by_agent;
using deputy::testing::RawClient;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void say(const char *key, const std::string &value) {
    std::printf("%s %s\n", key, value.c_str());
    std::fflush(stdout);
}

dp_config_t config_for(const char *socket, uint64_t pool = 1 << 20) {
    dp_config_t c = DP_CONFIG_INITIALIZER;
    c.agent = socket;
    c.pool_bytes = pool;
    return c;
}

dp_desc_t desc(uint8_t opcode, uint64_t src, uint64_t dst, uint64_t size) {
    dp_desc_t d{};
    d.opcode = opcode;
    d.src = src;
    d.dst = dst;
    d.size = size;
    return d;
}

// --- the attacks ---

int delta_race(const char *socket, double seconds) {
    dp_config_t config = config_for(socket, 1 << 20);
    dp_context_t *ctx;
    dp_mover_t *mover;
    if (dp_init(&config, &ctx) != DP_OK || dp_mover_attach(ctx, &mover) != DP_OK) return 2;
    // dst at the very end of the pool: an overrun would leave the segment.
    auto *pool = static_cast<uint8_t *>(dp_malloc(ctx, (1 << 20) - 64 * 4));
    auto *record = static_cast<uint8_t *>(dp_malloc(ctx, 64));
    auto *comp = static_cast<dp_completion_t *>(dp_malloc(ctx, 64));
    if (!pool || !record || !comp) return 2;
    const size_t dst_bytes = 4096;
    uint8_t *dst = pool + (1 << 20) - 64 * 4 - dst_bytes;
    std::memset(pool, 0xA5, (1 << 20) - 64 * 4 - dst_bytes);
    // A registered destination too: an overrun there is the agent's heap.
    std::vector<uint8_t> heap(dst_bytes + 8192, 0x5A);
    if (dp_mem_register(ctx, heap.data() + 4096, dst_bytes) != DP_OK) return 2;
    std::atomic<bool> stop{false};
    // One valid entry (granule 1); the racer flips its index to 0xffff.
    std::memset(record, 0, 10);
    record[0] = 1;
    std::thread racer([&] {
        auto *idx = reinterpret_cast<volatile uint8_t *>(record);
        while (!stop.load(std::memory_order_relaxed)) {
            idx[0] = 0xff;
            idx[1] = 0xff;
            idx[0] = 1;
            idx[1] = 0;
        }
    });
    uint64_t runs = 0, applied = 0, refused = 0, other = 0;
    const double end = now_s() + seconds;
    while (now_s() < end) {
        for (uint8_t *target : {dst, heap.data() + 4096}) {
            dp_desc_t d = desc(DP_OP_APPLY_DELTA, uint64_t(record), uint64_t(target), dst_bytes);
            d.aux = 10;
            d.flags = DP_FLAG_COMPLETION;
            d.completion = uint64_t(comp);
            std::memset(comp, 0, sizeof *comp);
            if (dp_mover_submit(mover, 0, &d) != DP_OK ||
                dp_mover_wait(mover, comp, DP_WAIT_YIELD, 2'000'000'000) != DP_OK) {
                stop = true;
                racer.join();
                say("error", "the agent stopped answering");
                return 1;
            }
            ++runs;
            if (comp->status == DP_COMP_SUCCESS)
                ++applied;
            else if (comp->status == DP_COMP_INVALID_FIELD)
                ++refused;
            else
                ++other;
        }
    }
    stop = true;
    racer.join();
    bool intact = true;
    for (size_t i = 0; i < 4096; ++i)
        intact &= heap[i] == 0x5A && heap[4096 + dst_bytes + i] == 0x5A;
    for (size_t i = 0; i < (1 << 20) - 64 * 4 - dst_bytes; ++i) intact &= pool[i] == 0xA5;
    say("runs", std::to_string(runs));
    say("applied", std::to_string(applied));
    say("refused", std::to_string(refused));
    say("other", std::to_string(other));
    say("own_guards", intact ? "intact" : "overwritten");
    dp_mover_close(mover);
    dp_finalize(ctx);
    return intact && other == 0 ? 0 : 1;
}

int fork_exit(const char *socket) {
    dp_config_t config = config_for(socket);
    dp_context_t *ctx;
    dp_mover_t *mover;
    if (dp_init(&config, &ctx) != DP_OK || dp_mover_attach(ctx, &mover) != DP_OK) return 2;
    auto *buf = static_cast<uint8_t *>(dp_malloc(ctx, 8192));
    auto *comp = static_cast<dp_completion_t *>(dp_malloc(ctx, 64));
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) return 2;
    if (child > 0) _exit(0);  // the attached process leaves; its child keeps the socket
    while (getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double gone = now_s();
    // The agent must drop the session: our requests fail, our ring is dead.
    std::vector<uint8_t> heap(4096, 1);
    dp_status_t reg = DP_OK;
    for (int i = 0; i < 40 && reg == DP_OK; ++i) {
        reg = dp_mem_register(ctx, heap.data(), heap.size());
        if (reg == DP_OK) {
            dp_mem_deregister(ctx, heap.data());
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    say("register", dp_status_name(reg));
    say("dropped_after_s", std::to_string(now_s() - gone));
    std::memset(buf, 7, 4096);
    std::memset(buf + 4096, 0, 4096);
    dp_desc_t d = desc(DP_OP_MEMMOVE, uint64_t(buf), uint64_t(buf + 4096), 4096);
    d.flags = DP_FLAG_COMPLETION;
    d.completion = uint64_t(comp);
    dp_mover_submit(mover, 0, &d);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const bool moved = buf[4096] == 7;
    say("memmove_after_drop", moved ? "executed" : "not executed");
    // The test waits for this line: our parent's exit status says nothing.
    say("verdict", reg != DP_OK && !moved ? "pass" : "fail");
    return reg != DP_OK && !moved ? 0 : 1;
}

int exit_with_work(const char *socket, int n, uint64_t mib) {
    dp_config_t config = config_for(socket, (2 * mib << 20) + (1 << 20));
    config.ring_size = 1024;
    dp_context_t *ctx;
    dp_mover_t *mover;
    if (dp_init(&config, &ctx) != DP_OK || dp_mover_attach(ctx, &mover) != DP_OK) return 2;
    auto *a = static_cast<uint8_t *>(dp_malloc(ctx, mib << 20));
    auto *b = static_cast<uint8_t *>(dp_malloc(ctx, mib << 20));
    auto *comp = static_cast<dp_completion_t *>(dp_malloc(ctx, 64));
    if (!a || !b || !comp) return 2;
    for (int i = 0; i < n; ++i) {
        dp_desc_t d = desc(DP_OP_MEMMOVE, uint64_t(a), uint64_t(b), mib << 20);
        d.flags = DP_FLAG_COMPLETION;
        d.completion = uint64_t(comp);
        while (dp_mover_submit(mover, 0, &d) == DP_ERR_RETRY) std::this_thread::yield();
    }
    say("queued", std::to_string(n));
    _exit(0);  // no dp_finalize: the work stays queued
}

int coll_exit(const char *socket, int rank, int ops, uint64_t mib) {
    dp_config_t config = config_for(socket, (2 * mib << 20) + (1 << 20));
    dp_context_t *ctx;
    dp_team_t *team;
    if (dp_init(&config, &ctx) != DP_OK) return 2;
    if (dp_team_create_timeout(ctx, "doomed", rank, 2, 10000, &team) != DP_OK) return 2;
    auto *src = static_cast<float *>(dp_malloc(ctx, mib << 20));
    auto *dst = static_cast<float *>(dp_malloc(ctx, mib << 20));
    if (!src || !dst) return 2;
    std::vector<dp_request_t *> reqs(size_t(ops), nullptr);
    for (int i = 0; i < ops; ++i)
        if (dp_iallreduce(src, dst, (mib << 20) / 4, DP_FLOAT32, DP_SUM, team, &reqs[i]) != DP_OK)
            return 2;
    say("posted", std::to_string(ops));
    if (rank == 1) _exit(0);  // dies with everything queued
    int lost = 0, ok = 0;
    for (dp_request_t *r : reqs) {
        const dp_status_t s = dp_wait(r);
        (s == DP_OK ? ok : lost) += 1;
        dp_request_free(r);
    }
    say("completed", std::to_string(ok));
    say("failed", std::to_string(lost));
    dp_team_destroy(team);
    dp_finalize(ctx);
    return lost > 0 ? 0 : 1;  // the team broke: the rest failed, nothing hung
}

int trickle(const char *socket) {
    RawClient c;
    if (!c.connect(socket)) return 2;
    uint8_t header[8];
    deputy::channel::encode_frame_header(header, MsgType::kAttach, 200);
    const double start = now_s();
    for (int i = 0; i < 200; ++i) {
        if (send(c.fd.get(), header + (i % 8), 1, MSG_NOSIGNAL) != 1 ||
            closed_by_agent(c.fd.get(), 0.05)) {
            say("dropped_after_s", std::to_string(now_s() - start));
            return 0;
        }
    }
    say("dropped_after_s", "never");
    return 1;
}

int no_read(const char *socket) {
    RawClient c;
    if (!c.attach(socket, 4 << 20)) return 2;
    int small = 4096;
    setsockopt(c.fd.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    // Memmoves of 512 KiB whose results come back over the socket.
    control::Staged staged;
    staged.desc = desc(DP_OP_MEMMOVE, 0x10000000, 0x20000000, 512 << 10);
    staged.sources.push_back({0x10000000, std::vector<uint8_t>(512 << 10, 3)});
    std::vector<uint8_t> payload;
    control::encode(staged, &payload);
    const double start = now_s();
    int sent = 0;
    // Our unread answers pile up; the agent must drop us (the socket then
    // breaks under our sends) rather than queue without end or wait.
    dp_status_t s = DP_OK;
    while (now_s() - start < 10) {
        s = control::send_message(c.fd.get(), MsgType::kStaged, payload, nullptr, 0, 200'000'000,
                                  "no-read");
        if (s == DP_OK)
            ++sent;
        else if (s != DP_ERR_TIMEOUT)
            break;
    }
    const bool dropped = s == DP_ERR_AGENT_LOST || s == DP_ERR_IO;
    say("sent", std::to_string(sent));
    say("dropped_after_s", dropped ? std::to_string(now_s() - start) : "never");
    return dropped ? 0 : 1;
}

int idle(const char *socket, int n, double seconds) {
    std::vector<deputy::UniqueFd> fds;
    for (int i = 0; i < n; ++i) {
        deputy::UniqueFd fd;
        if (deputy::channel::uds::connect_fd(socket, 1'000'000'000, &fd) != DP_OK) break;
        fds.push_back(std::move(fd));
    }
    say("opened", std::to_string(fds.size()));
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    int closed = 0;
    for (auto &fd : fds) closed += closed_by_agent(fd.get(), 0);
    say("closed_by_agent", std::to_string(closed));
    return 0;
}

int join_flood(const char *socket, int n) {
    RawClient c;
    if (!c.attach(socket)) return 2;
    int refused = 0, sent = 0, bad_answers = 0;
    std::string first_status, first_reason;
    std::vector<bool> answered(size_t(n) + 1);
    // Each answer must be a TEAM_READY refusing one join we sent, once.
    auto count = [&](MsgType type, const std::vector<uint8_t> &answer) {
        ++refused;
        control::TeamReady ready;
        std::string error;
        if (type != MsgType::kTeamReady ||
            control::decode(answer.data(), answer.size(), &ready, &error) != DP_OK ||
            ready.join_id == 0 || ready.join_id > uint64_t(n) || answered[ready.join_id]) {
            ++bad_answers;
            return;
        }
        answered[ready.join_id] = true;
        if (first_status.empty()) {
            first_status = dp_status_name(ready.status);
            first_reason = ready.reason;
        }
    };
    for (int i = 0; i < n; ++i) {
        control::TeamJoin m{uint64_t(i) + 1, "flood-" + std::to_string(i), "flood-secret", 0, 64,
                            60000};
        std::vector<uint8_t> payload;
        control::encode(m, &payload);
        if (control::send_message(c.fd.get(), MsgType::kTeamJoin, payload, nullptr, 0,
                                  1'000'000'000, "flood") != DP_OK)
            break;
        ++sent;
        // Refusals come back at once; joins that wait do not.
        MsgType type;
        std::vector<uint8_t> answer;
        while (control::recv_message(c.fd.get(), control::kMaxControlMessage, &type, &answer,
                                     nullptr, 0, nullptr, 0, "flood") == DP_OK)
            count(type, answer);
    }
    MsgType type;
    std::vector<uint8_t> answer;
    while (control::recv_message(c.fd.get(), control::kMaxControlMessage, &type, &answer, nullptr,
                                 0, nullptr, 200'000'000, "flood") == DP_OK)
        count(type, answer);
    say("sent", std::to_string(sent));
    say("refused", std::to_string(refused));
    say("bad_answers", std::to_string(bad_answers));
    say("status", first_status);
    say("reason", first_reason);
    return 0;
}

int garbage(const char *socket, int n) {
    RawClient c;
    if (!c.attach(socket)) return 2;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
    for (int i = 0; i < n; ++i) {
        dp_desc_t d;
        auto *w = reinterpret_cast<uint64_t *>(&d);
        for (int k = 0; k < 8; ++k) w[k] = next();
        // Half of them ask for a record nobody may write: each would be a log line.
        if (i % 2) {
            d.opcode = DP_OP_MEMMOVE;
            d.flags = DP_FLAG_COMPLETION;
            d.completion = 0x1000 + uint64_t(i) * 32;
        }
        c.push(d);
    }
    say("pushed", std::to_string(n));
    // Still attached and answered?
    std::vector<uint8_t> payload;
    control::encode_deregister(0x1234, &payload);
    const dp_status_t s = c.request(MsgType::kDeregister, payload);
    say("still_served", s == DP_ERR_INVALID ? "yes" : dp_status_name(s));
    return s == DP_ERR_INVALID ? 0 : 1;
}

int big_pool(const char *socket) {
    const double start = now_s();
    dp_config_t config = config_for(socket, 1ull << 30);
    // Its own answer may take seconds on a loaded machine (the agent faults
    // the pool in at a low priority): what is tested is that nobody else waits.
    config.lost_timeout_ms = 20000;
    dp_context_t *ctx;
    const dp_status_t s = dp_init(&config, &ctx);
    say("attach", dp_status_name(s));
    say("attach_s", std::to_string(now_s() - start));
    if (s != DP_OK) return 1;
    dp_finalize(ctx);
    return 0;
}

int batch_registered(const char *socket, double seconds) {
    dp_config_t config = config_for(socket);
    dp_context_t *ctx;
    dp_mover_t *mover;
    if (dp_init(&config, &ctx) != DP_OK || dp_mover_attach(ctx, &mover) != DP_OK) return 2;
    // 16 members of 256 KiB: 4 MiB per batch, so that one batch (a client
    // always has one descriptor through) stays well inside the bystander's
    // bound even under ASan.
    constexpr size_t kMember = 256 << 10;
    std::vector<uint8_t> heap(32 * kMember, 9);
    if (dp_mem_register(ctx, heap.data(), heap.size()) != DP_OK) return 2;
    auto *members = static_cast<dp_desc_t *>(dp_malloc(ctx, 16 * sizeof(dp_desc_t)));
    auto *comp = static_cast<dp_completion_t *>(dp_malloc(ctx, 64));
    for (int i = 0; i < 16; ++i)
        members[i] = desc(DP_OP_MEMMOVE, uint64_t(heap.data() + i * kMember),
                          uint64_t(heap.data() + (16 + i) * kMember), kMember);
    uint64_t batches = 0;
    const double end = now_s() + seconds;
    while (now_s() < end) {
        dp_desc_t b = desc(DP_OP_BATCH, uint64_t(members), 0, 16);
        b.flags = DP_FLAG_COMPLETION;
        b.completion = uint64_t(comp);
        std::memset(comp, 0, sizeof *comp);
        if (dp_mover_submit(mover, 0, &b) != DP_OK ||
            dp_mover_wait(mover, comp, DP_WAIT_YIELD, 5'000'000'000) != DP_OK ||
            comp->status != DP_COMP_SUCCESS)
            return 1;
        ++batches;
    }
    say("batches", std::to_string(batches));
    dp_mover_close(mover);
    dp_finalize(ctx);
    return 0;
}

int rdma_unmap(const char *address) {
    dp_config_t config = config_for(address);
    config.memory_mode = DP_MEMORY_RDMA;
    dp_context_t *ctx;
    if (dp_init(&config, &ctx) != DP_OK) return 2;
    dp_team_t *team = nullptr;
    const dp_status_t s = dp_team_create_timeout(ctx, "unmap-victim", 0, 2, 10000, &team);
    say("join", dp_status_name(s));
    if (s != DP_OK) return 1;
    const size_t bytes = 4 * size_t(sysconf(_SC_PAGESIZE));
    std::vector<int32_t> values(bytes / sizeof(int32_t), 3);
    void *result = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (result == MAP_FAILED) return 2;
    dp_request_t *req = nullptr;
    say("post", dp_status_name(dp_iallreduce(values.data(), result, values.size(), DP_INT32,
                                             DP_SUM, team, &req)));
    munmap(result, bytes);
    say("unmapped", "1");
    // The proxy's write lands in this process's provider, at a hole: a
    // fault here, or an error for this request; either is this process's.
    say("wait", dp_status_name(req ? dp_wait(req) : DP_ERR_INVALID));
    return 3;
}

int join(const char *socket, const char *key, int rank, int size) {
    dp_config_t config = config_for(socket);
    dp_context_t *ctx;
    if (dp_init(&config, &ctx) != DP_OK) return 2;
    dp_team_t *team = nullptr;
    const dp_status_t s = dp_team_create_timeout(ctx, key, rank, size, 3000, &team);
    say("join", dp_status_name(s));
    if (s != DP_OK) {
        dp_finalize(ctx);
        return 1;
    }
    auto *v = static_cast<int32_t *>(dp_malloc(ctx, 64));
    auto *out = static_cast<int32_t *>(dp_malloc(ctx, 64));
    for (int i = 0; i < 16; ++i) v[i] = 1000 + i;
    const dp_status_t r = dp_allreduce(v, out, 16, DP_INT32, DP_SUM, team);
    say("allreduce", dp_status_name(r));
    say("sum0", std::to_string(out[0]));
    dp_team_destroy(team);
    dp_finalize(ctx);
    return 0;
}

// A raw member's record, once the agent wrote it (or still pending after 5 s).
uint8_t wait_record(const dp_completion_t *r) {
    const double end = now_s() + 5;
    uint8_t st;
    while ((st = __atomic_load_n(&r->status, __ATOMIC_ACQUIRE)) == DP_COMP_PENDING && now_s() < end)
        std::this_thread::yield();
    return st;
}

// A team of 2 in this one process: rank 0 a raw client (its own ring and
// counts block), rank 1 through libdeputy. Rank 0 posts an alltoallv,
// proves the agent took the post (a NOOP pushed behind it completed: the
// agent takes a ring's slots in order and a post at once), then rewrites
// its counts block so that, read again, it would name a source far outside
// its pool and disagree with rank 1; only then does rank 1 post. An agent
// that read the block once runs the counts it copied: both succeed with
// the bytes of the original counts, and nothing between the blocks moves.
// Then two posts the agent must refuse on both ranks: a counts block
// outside rank 0's pool (DP_ERR_DENIED) and one of the wrong length
// (DP_ERR_INVALID).
// A team of 2 in this one process: rank 0 a raw client (its own ring, no
// library checks), rank 1 through libdeputy (a context of its own). False
// when either could not join.
struct RawPair {
    RawClient raw;
    dp_context_t *ctx = nullptr;
    dp_team_t *team = nullptr;
    uint32_t team_id = 0;  // as the agent named it to the raw member
};
bool join_raw_pair(const char *socket, const char *key, const char *secret, RawPair *pair) {
    if (!pair->raw.attach(socket)) return false;
    dp_config_t config = config_for(socket);
    config.job_secret = secret;
    if (dp_init(&config, &pair->ctx) != DP_OK) return false;
    dp_status_t joined = DP_ERR_INTERNAL;
    std::thread joiner([&] { joined = dp_team_create_timeout(pair->ctx, key, 1, 2, 5000, &pair->team); });
    control::TeamJoin m{1, key, secret, 0, 2, 5000};
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    MsgType type{};
    std::vector<uint8_t> answer;
    control::TeamReady ready;
    std::string error;
    // TEAM_READY brings the team's board and its members' pool views.
    std::vector<deputy::UniqueFd> board_fds(deputy::channel::sock::kMaxFdsPerMessage);
    size_t nfds = 0;
    const bool raw_joined =
        control::send_message(pair->raw.fd.get(), MsgType::kTeamJoin, payload, nullptr, 0,
                              2'000'000'000, "raw") == DP_OK &&
        control::recv_message(pair->raw.fd.get(), control::kMaxControlMessage, &type, &answer,
                              board_fds.data(), board_fds.size(), &nfds, 6'000'000'000,
                              "raw") == DP_OK &&
        type == MsgType::kTeamReady &&
        control::decode(answer.data(), answer.size(), &ready, &error) == DP_OK &&
        ready.join_id == 1 && ready.status == DP_OK;
    joiner.join();
    pair->team_id = ready.team_id;
    if (!raw_joined || joined != DP_OK) {
        say("join", "failed");
        return false;
    }
    return true;
}

int alltoallv_rewrite(const char *socket) {
    constexpr uint8_t kGap = 0x5A;
    RawPair pair;
    if (!join_raw_pair(socket, "rewrite", "rewrite-secret", &pair)) return 2;
    RawClient &raw = pair.raw;
    dp_context_t *ctx = pair.ctx;
    dp_team_t *team = pair.team;
    const uint32_t team_id = pair.team_id;
    // Rank 0's pool: records, its counts block, then src and dst (int32).
    uint8_t *pool = raw.pool();
    auto *record = reinterpret_cast<dp_completion_t *>(pool);
    auto *noop_record = reinterpret_cast<dp_completion_t *>(pool + 64);
    auto *block = reinterpret_cast<uint64_t *>(pool + 128);
    auto *src0 = reinterpret_cast<int32_t *>(pool + 4096);
    auto *dst0 = reinterpret_cast<int32_t *>(pool + 8192);
    // Rank 1's buffers.
    auto *src1 = static_cast<int32_t *>(dp_malloc(ctx, 4096));
    auto *dst1 = static_cast<int32_t *>(dp_malloc(ctx, 4096));
    if (!src1 || !dst1) return 2;
    for (int i = 0; i < 1024; ++i) src0[i] = 1000000 + i, src1[i] = 2000000 + i;
    std::memset(dst0, kGap, 4096);
    std::memset(dst1, kGap, 4096);
    // Rank 0: 100 to itself, 200 to rank 1; receives 100 and 50.
    // Rank 1: 50 to rank 0, 30 to itself; receives 200 and 30.
    const uint64_t counts0[8] = {100, 200, 0, 300, 100, 50, 10, 500};
    const size_t sc1[2] = {50, 30}, sd1[2] = {7, 100}, rc1[2] = {200, 30}, rd1[2] = {0, 400};
    auto post0 = [&](uint64_t counts_addr, uint32_t counts_bytes) {
        std::memset(record, 0, sizeof *record);
        deputy::channel::CollPost post{};
        post.opcode = uint8_t(deputy::channel::kCollPostBase +
                              uint8_t(deputy::coll::Collective::alltoallv));
        post.dtype = DP_INT32;
        post.team = team_id;
        post.completion = uint64_t(record);
        post.src = uint64_t(src0);
        post.dst = uint64_t(dst0);
        post.counts = counts_addr;
        post.counts_bytes = counts_bytes;
        dp_desc_t d;
        std::memcpy(&d, &post, sizeof d);
        raw.push(d);
    };
    auto post1 = [&](dp_status_t *status) {
        dp_request_t *req = nullptr;
        *status = dp_ialltoallv(src1, sc1, sd1, dst1, rc1, rd1, DP_INT32, team, &req);
        if (*status != DP_OK) return;
        int done = 0;
        const double end = now_s() + 5;
        while ((*status = dp_test(req, &done)) == DP_OK && !done && now_s() < end)
            std::this_thread::yield();
        if (!done) *status = DP_ERR_TIMEOUT;
        dp_request_free(req);
    };

    std::memcpy(block, counts0, sizeof counts0);
    post0(uint64_t(block), sizeof counts0);
    dp_desc_t noop{};
    noop.opcode = DP_OP_NOOP;
    noop.flags = DP_FLAG_COMPLETION;
    noop.completion = uint64_t(noop_record);
    raw.push(noop);
    if (wait_record(noop_record) != DP_COMP_SUCCESS) {
        say("noop", "not completed");
        return 1;
    }
    // The agent has the post. Read again, this would send 2^30 elements
    // from 4 GiB past rank 0's source and expect 51 elements from rank 1.
    block[1] = 1ull << 30;
    block[3] = 1ull << 30;
    block[5] = 51;
    say("rewritten", "yes");
    dp_status_t s1;
    post1(&s1);
    const uint8_t s0 = wait_record(record);
    say("rank0", deputy::channel::coll_status_name(s0));
    say("rank1", dp_status_name(s1));
    // The bytes of the counts as posted; every other destination byte as it was.
    std::vector<uint8_t> want0(4096, kGap), want1(4096, kGap);
    std::memcpy(want0.data() + 10 * 4, src0, 100 * 4);
    std::memcpy(want0.data() + 500 * 4, src1 + 7, 50 * 4);
    std::memcpy(want1.data(), src0 + 300, 200 * 4);
    std::memcpy(want1.data() + 400 * 4, src1 + 100, 30 * 4);
    const bool exact = std::memcmp(dst0, want0.data(), 4096) == 0 &&
                       std::memcmp(dst1, want1.data(), 4096) == 0;
    say("data", exact ? "exact" : "wrong");

    // A counts block outside rank 0's pool: refused on both ranks.
    std::memset(dst0, kGap, 4096);
    std::memset(dst1, kGap, 4096);
    post0(uint64_t(pool) + (64ull << 30), sizeof counts0);
    post1(&s1);
    say("outside_rank0", deputy::channel::coll_status_name(wait_record(record)));
    say("outside_rank1", dp_status_name(s1));
    // A counts block of another team's length: refused on both ranks.
    std::memcpy(block, counts0, sizeof counts0);
    post0(uint64_t(block), 2 * sizeof counts0);
    post1(&s1);
    say("length_rank0", deputy::channel::coll_status_name(wait_record(record)));
    say("length_rank1", dp_status_name(s1));
    const bool untouched = std::all_of(reinterpret_cast<uint8_t *>(dst0),
                                       reinterpret_cast<uint8_t *>(dst0) + 4096,
                                       [](uint8_t b) { return b == kGap; }) &&
                           std::all_of(reinterpret_cast<uint8_t *>(dst1),
                                       reinterpret_cast<uint8_t *>(dst1) + 4096,
                                       [](uint8_t b) { return b == kGap; });
    say("refused_untouched", untouched ? "yes" : "no");

    // reduce_scatterv (blocks 10 and 20 elements): rank 0's counts block
    // as its plans read it, then one with a gap before block 1, which no
    // plan may read (it would take another range than the one checked):
    // refused on both ranks, nothing written.
    const size_t rs_counts[2] = {10, 20};
    auto post_rs = [&](const uint64_t (&counts)[8], dp_status_t *s1_out) {
        std::memset(dst0, kGap, 4096);
        std::memset(dst1, kGap, 4096);
        std::memcpy(block, counts, sizeof counts);
        std::memset(record, 0, sizeof *record);
        deputy::channel::CollPost post{};
        post.opcode = uint8_t(deputy::channel::kCollPostBase +
                              uint8_t(deputy::coll::Collective::reduce_scatterv));
        post.dtype = DP_INT32;
        post.redop = DP_SUM;
        post.team = team_id;
        post.completion = uint64_t(record);
        post.src = uint64_t(src0);
        post.dst = uint64_t(dst0);
        post.counts = uint64_t(block);
        post.counts_bytes = sizeof counts;
        dp_desc_t d;
        std::memcpy(&d, &post, sizeof d);
        raw.push(d);
        dp_request_t *req = nullptr;
        *s1_out = dp_ireduce_scatterv(src1, dst1, rs_counts, DP_INT32, DP_SUM, team, &req);
        if (*s1_out != DP_OK) return;
        int done = 0;
        const double end = now_s() + 5;
        while ((*s1_out = dp_test(req, &done)) == DP_OK && !done && now_s() < end)
            std::this_thread::yield();
        if (!done) *s1_out = DP_ERR_TIMEOUT;
        dp_request_free(req);
    };
    const uint64_t rs_good[8] = {10, 20, 0, 10, 10, 10, 0, 0};
    post_rs(rs_good, &s1);
    say("rs_rank0", deputy::channel::coll_status_name(wait_record(record)));
    say("rs_rank1", dp_status_name(s1));
    bool rs_exact = true;
    for (int i = 0; i < 10; ++i) rs_exact &= dst0[i] == src0[i] + src1[i];
    for (int i = 0; i < 20; ++i) rs_exact &= dst1[i] == src0[10 + i] + src1[10 + i];
    say("rs_data", rs_exact ? "exact" : "wrong");
    const uint64_t rs_gap[8] = {10, 20, 0, 11, 10, 10, 0, 0};
    post_rs(rs_gap, &s1);
    say("rs_gap_rank0", deputy::channel::coll_status_name(wait_record(record)));
    say("rs_gap_rank1", dp_status_name(s1));
    const bool rs_untouched = std::all_of(reinterpret_cast<uint8_t *>(dst0),
                                          reinterpret_cast<uint8_t *>(dst0) + 4096,
                                          [](uint8_t b) { return b == kGap; }) &&
                              std::all_of(reinterpret_cast<uint8_t *>(dst1),
                                          reinterpret_cast<uint8_t *>(dst1) + 4096,
                                          [](uint8_t b) { return b == kGap; });
    say("rs_refused_untouched", rs_untouched ? "yes" : "no");
    dp_free(ctx, src1);
    dp_free(ctx, dst1);
    dp_team_destroy(team);
    dp_finalize(ctx);
    return exact && untouched && rs_exact && rs_untouched && s0 == DP_COMP_SUCCESS ? 0 : 1;
}

// Point-to-point posts a raw member writes by hand (channel/p2p_post.h),
// on a team whose other member is the library: fields out of range and
// buffers outside the member's memory are refused in its own record; a
// member that ignores the library's bound of open posts is told to post
// again (queue_full) and the agent keeps nothing more of it; the library
// member's sends then fill every receive the bound let in, bytes exact.
int p2p_raw(const char *socket) {
    RawPair pair;
    if (!join_raw_pair(socket, "p2p", "p2p-secret", &pair)) return 2;
    uint8_t *pool = pair.raw.pool();
    auto *records = reinterpret_cast<dp_completion_t *>(pool);
    auto *in = reinterpret_cast<uint64_t *>(pool + (64 << 10));
    auto post = [&](uint32_t i, uint8_t opcode, uint64_t buf, uint64_t bytes, int32_t peer,
                    int32_t tag, auto edit) {
        std::memset(&records[i], 0, sizeof records[i]);
        deputy::channel::P2pPost p{};
        p.opcode = opcode;
        p.team = pair.team_id;
        p.completion = uint64_t(&records[i]);
        p.buf = buf;
        p.bytes = bytes;
        p.peer = peer;
        p.tag = tag;
        edit(p);
        dp_desc_t d;
        std::memcpy(&d, &p, sizeof d);
        pair.raw.push(d);
    };
    using deputy::channel::kP2pProbe;
    using deputy::channel::kP2pRecv;
    using deputy::channel::kP2pSend;
    using deputy::channel::P2pPost;
    const uint64_t b = uint64_t(in);
    auto none = [](P2pPost &) {};
    post(0, kP2pSend, b, 8, 1, 0, [](P2pPost &p) { p.reserved0[1] = 1; });
    post(1, kP2pSend, b, 8, 2, 0, none);                // no rank 2
    post(2, kP2pSend, b, 8, DP_ANY_SOURCE, 0, none);    // a send names one rank
    post(3, kP2pSend, b, 8, 1, -1, none);               // and one tag
    post(4, kP2pProbe, b, 8, 1, 0, none);               // a probe has no buffer
    post(5, kP2pSend, b, 1ull << 40, 1, 0, none);
    post(6, kP2pSend, uint64_t(pool) + (64ull << 30), 64, 1, 0, none);
    post(7, kP2pRecv, b, 8, 1, 0, [&](P2pPost &p) { p.team = pair.team_id + 1000; });
    post(8, kP2pRecv, b, 8, 1, 0, [](P2pPost &p) { p.flags = deputy::channel::kP2pSynchronous; });
    post(9, kP2pSend, b, 8, 1, 0, [](P2pPost &p) { p.flags = 0x80; });  // no such flag
    const char *names[] = {"reserved", "peer", "any_source_send", "negative_tag", "probe_buffer",
                           "too_large", "outside", "other_team", "receive_flags",
                           "unknown_flag"};
    for (uint32_t i = 0; i < 10; ++i)
        say(names[i], deputy::channel::coll_status_name(wait_record(&records[i])));
    // One receive more than the bound, from the library member (rank 1).
    constexpr uint32_t kFirst = 16, kOpen = DP_P2P_MAX_OUTSTANDING;
    for (uint32_t k = 0; k <= kOpen; ++k)
        post(kFirst + k, kP2pRecv, b + 8 * k, 8, 1, 5, none);
    say("over_bound", deputy::channel::coll_status_name(wait_record(&records[kFirst + kOpen])));
    auto *out = static_cast<uint64_t *>(dp_malloc(pair.ctx, 8));
    if (!out) return 2;
    bool sent = true;
    for (uint32_t k = 0; k < kOpen; ++k) {
        *out = 0xD0000000ull + k;
        sent &= dp_send(out, 8, 0, 5, pair.team) == DP_OK;
    }
    say("sent", sent ? "yes" : "no");
    bool exact = true;
    for (uint32_t k = 0; k < kOpen; ++k)
        exact &= wait_record(&records[kFirst + k]) == DP_COMP_SUCCESS &&
                 in[k] == 0xD0000000ull + k && records[kFirst + k].result == 1 &&
                 records[kFirst + k].bytes_completed == 8;
    say("received", exact ? "exact" : "wrong");
    dp_free(pair.ctx, out);
    dp_team_destroy(pair.team);
    dp_finalize(pair.ctx);
    return sent && exact ? 0 : 1;
}

// --- attacks of a process of the same user, until stdin closes ---

// Root without capabilities is held to what any process of its uid may do:
// no CAP_SYS_PTRACE (an undumpable process's /proc/<pid>/fd and memory),
// no CAP_DAC_OVERRIDE.
bool drop_capabilities() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    return syscall(SYS_capset, &header, data) == 0;
}

bool stdin_open() {
    pollfd p{0, POLLIN, 0};
    return poll(&p, 1, 0) == 0;  // readable: EOF (the test closed it)
}

void hold_until_stdin_closes() {
    char c;
    while (read(0, &c, 1) > 0) {
    }
}

// Scans each PID's fd table over and over; every link to a deputy memfd
// (a client's segment, a team's board) is opened writable and mapped, and,
// failing that, opened read-only.
int fd_racer(const std::vector<pid_t> &pids) {
    say("capabilities_dropped", drop_capabilities() ? "yes" : "no");
    uint64_t scans = 0, seen = 0, opened = 0, readable = 0, writable = 0, decoys_writable = 0;
    std::string first;
    while (stdin_open()) {
        ++scans;
        for (pid_t pid : pids) {
            const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
            DIR *d = opendir(dir.c_str());
            if (!d) continue;
            while (const dirent *e = readdir(d)) {
                if (e->d_name[0] == '.') continue;
                const std::string path = dir + "/" + e->d_name;
                char target[256];
                const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
                if (n <= 0) continue;
                target[n] = 0;
                // The test's own decoy: proof that what can be reached is.
                if (std::strstr(target, "memfd:deputy-decoy")) {
                    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
                    void *at = fd < 0 ? MAP_FAILED
                                      : mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                    if (at != MAP_FAILED) ++decoys_writable, munmap(at, 4096);
                    if (fd >= 0) close(fd);
                    continue;
                }
                if (!std::strstr(target, "memfd:deputy-client") &&
                    !std::strstr(target, "memfd:deputy-team"))
                    continue;
                ++seen;
                int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
                if (fd >= 0) {
                    ++opened;
                    void *at = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                    if (at != MAP_FAILED) {
                        ++writable;
                        if (first.empty()) first = std::string(target) + " of pid " + std::to_string(pid);
                        munmap(at, 4096);
                    }
                    close(fd);
                } else if ((fd = open(path.c_str(), O_RDONLY | O_CLOEXEC)) >= 0) {
                    ++opened;
                    ++readable;
                    close(fd);
                }
            }
            closedir(d);
        }
    }
    say("scans", std::to_string(scans));
    say("seen", std::to_string(seen));
    say("opened", std::to_string(opened));
    say("readable", std::to_string(readable));
    say("writable", std::to_string(writable));
    say("decoys_writable", std::to_string(decoys_writable));
    if (!first.empty()) say("first_writable", first);
    return 0;
}

// CLIENTS raw connections, each sending JOINS joins of distinct teams of 2
// (the longest timeout the agent allows) that nobody else joins: slots held
// until stdin closes. First, one join with the longest timeout there is.
int slot_flood(const char *socket, int clients, int joins) {
    say("capabilities_dropped", drop_capabilities() ? "yes" : "no");
    std::vector<std::unique_ptr<RawClient>> held;
    int waiting = 0, refused = 0, bad = 0;
    std::string first_refusal;
    auto read_answers = [&](RawClient &c, int64_t timeout_ns) {
        MsgType type;
        std::vector<uint8_t> answer;
        while (control::recv_message(c.fd.get(), control::kMaxControlMessage, &type, &answer,
                                     nullptr, 0, nullptr, timeout_ns, "flood") == DP_OK) {
            control::TeamReady ready;
            std::string error;
            if (type != MsgType::kTeamReady ||
                control::decode(answer.data(), answer.size(), &ready, &error) != DP_OK) {
                ++bad;
                continue;
            }
            if (ready.join_id == 0) {
                say("huge_timeout", dp_status_name(ready.status));
                say("huge_timeout_reason", ready.reason);
                continue;
            }
            --waiting;
            ++refused;
            if (first_refusal.empty())
                first_refusal = std::string(dp_status_name(ready.status)) + ": " + ready.reason;
        }
    };
    for (int i = 0; i < clients; ++i) {
        auto c = std::make_unique<RawClient>();
        if (!c->attach(socket)) {
            say("attach_refused_at", std::to_string(i));
            break;
        }
        if (i == 0) {
            control::TeamJoin m{0, "squat-forever", "flooder-secret", 0, 2, UINT32_MAX};
            std::vector<uint8_t> payload;
            control::encode(m, &payload);
            control::send_message(c->fd.get(), MsgType::kTeamJoin, payload, nullptr, 0,
                                  1'000'000'000, "flood");
            read_answers(*c, 200'000'000);
        }
        for (int j = 0; j < joins; ++j) {
            control::TeamJoin m{uint64_t(j) + 1,
                                "slot-" + std::to_string(i) + "-" + std::to_string(j),
                                "flooder-secret", 0, 2, 600000};
            std::vector<uint8_t> payload;
            control::encode(m, &payload);
            if (control::send_message(c->fd.get(), MsgType::kTeamJoin, payload, nullptr, 0,
                                      1'000'000'000, "flood") != DP_OK)
                break;
            ++waiting;
            read_answers(*c, 0);
        }
        read_answers(*c, 50'000'000);
        held.push_back(std::move(c));
    }
    say("clients", std::to_string(held.size()));
    say("waiting", std::to_string(waiting));
    say("refused", std::to_string(refused));
    say("bad_answers", std::to_string(bad));
    say("first_refusal", first_refusal);
    hold_until_stdin_closes();
    return 0;
}

// Contexts and one-member teams until the agent refuses, holding them (and
// the descriptors they cost the agent) until stdin closes.
int fd_flood(const char *socket, int contexts, int teams) {
    say("capabilities_dropped", drop_capabilities() ? "yes" : "no");
    std::vector<dp_context_t *> ctxs;
    std::vector<dp_team_t *> made;
    dp_status_t init_refused = DP_OK, team_refused = DP_OK;
    for (int i = 0; i < contexts && init_refused == DP_OK; ++i) {
        dp_config_t config = config_for(socket, 1 << 20);
        config.job_secret = "fd-flood";
        dp_context_t *ctx = nullptr;
        if ((init_refused = dp_init(&config, &ctx)) != DP_OK) break;
        ctxs.push_back(ctx);
        for (int j = 0; j < teams; ++j) {
            dp_team_t *team = nullptr;
            const std::string key = "fd-" + std::to_string(i) + "-" + std::to_string(j);
            const dp_status_t st = dp_team_create_timeout(ctx, key.c_str(), 0, 1, 2000, &team);
            if (st != DP_OK) {
                if (team_refused == DP_OK) team_refused = st;
                break;
            }
            made.push_back(team);
        }
    }
    say("contexts", std::to_string(ctxs.size()));
    say("teams", std::to_string(made.size()));
    say("init_refused", dp_status_name(init_refused));
    say("team_refused", dp_status_name(team_refused));
    say("holding", "yes");
    hold_until_stdin_closes();
    for (dp_team_t *t : made) dp_team_destroy(t);
    for (dp_context_t *c : ctxs) dp_finalize(c);
    return 0;
}

// `pages` pages whose first touch waits for us (userfaultfd, missing
// pages): the uffd, or -1 having said why ("uffd unavailable: ...": it
// needs root or vm.unprivileged_userfaultfd = 1).
int arm_userfaultfd(size_t pages, void **area) {
    const int uffd = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (uffd < 0) {
        say("uffd", std::string("unavailable: ") + std::strerror(errno));
        return -1;
    }
    uffdio_api api{UFFD_API, 0, 0};
    const size_t bytes = pages * size_t(sysconf(_SC_PAGESIZE));
    *area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uffdio_register reg{{uint64_t(*area), bytes}, UFFDIO_REGISTER_MODE_MISSING, 0};
    if (ioctl(uffd, UFFDIO_API, &api) != 0 || *area == MAP_FAILED ||
        ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
        say("uffd", std::string("unavailable: ") + std::strerror(errno));
        close(uffd);
        return -1;
    }
    say("uffd", "armed");
    return uffd;
}

// Registers two pages armed with userfaultfd (missing pages): the agent's
// probe of the range faults, and the fault waits for us. We answer it only
// after SECONDS; meanwhile another context of ours registers ordinary
// memory, which must not wait behind it.
int uffd_register(const char *socket, double seconds) {
    void *area = nullptr;
    const int uffd = arm_userfaultfd(2, &area);
    if (uffd < 0) return 0;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    dp_config_t config = config_for(socket);
    dp_context_t *held = nullptr, *other = nullptr;
    if (dp_init(&config, &held) != DP_OK || dp_init(&config, &other) != DP_OK) return 2;
    std::atomic<int> held_status{1};
    const double start = now_s();
    std::thread registering([&] { held_status = dp_mem_register(held, area, 2 * page); });
    // The agent's probe faults: its event arrives, and we sit on it.
    pollfd p{uffd, POLLIN, 0};
    const bool faulted = poll(&p, 1, 5000) == 1;
    say("faulted", faulted ? "yes" : "no");
    std::vector<uint8_t> ordinary(1 << 16, 1);
    const double other_start = now_s();
    const dp_status_t other_status = dp_mem_register(other, ordinary.data(), ordinary.size());
    say("other_register", dp_status_name(other_status));
    say("other_register_ms", std::to_string(int((now_s() - other_start) * 1000)));
    while (now_s() - start < seconds) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    // Answer every fault with zero pages (the probe reads both pages).
    for (size_t i = 0; i < 2; ++i) {
        uffdio_zeropage zero{{uint64_t(area) + i * page, page}, 0, 0};
        ioctl(uffd, UFFDIO_ZEROPAGE, &zero);
    }
    registering.join();
    say("held_register", dp_status_name(dp_status_t(held_status.load())));
    dp_finalize(other);
    dp_finalize(held);
    close(uffd);
    return faulted && other_status == DP_OK ? 0 : 1;
}

// Holds as many of the agent's probes as it runs for one process
// (MemoryProbes::kMaxProbesPerProcess): that many contexts register two
// pages each armed with userfaultfd, and we sit on their faults. One more
// registration, of ordinary memory, finds the bound full: the agent
// answers "busy" and the library asks again until a probe is free, after
// SECONDS, when we answer the faults. It must succeed, not fail.
int uffd_register_crowd(const char *socket, double seconds) {
    constexpr int kHeld = 8;  // agent/memory_probe.h: kMaxProbesPerProcess
    void *area = nullptr;
    const int uffd = arm_userfaultfd(2 * kHeld, &area);
    if (uffd < 0) return 0;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    dp_config_t config = config_for(socket);
    dp_context_t *ctx[kHeld + 1] = {};
    for (dp_context_t *&c : ctx)
        if (dp_init(&config, &c) != DP_OK) return 2;
    std::atomic<int> held_status[kHeld];
    std::vector<std::thread> registering;
    for (int i = 0; i < kHeld; ++i) {
        held_status[i] = 1;
        registering.emplace_back([&, i] {
            held_status[i] = dp_mem_register(ctx[i], static_cast<char *>(area) + 2 * i * page,
                                             2 * page);
        });
    }
    // Every probe faults: one event each, and we sit on them.
    int faults = 0;
    const double start = now_s();
    while (faults < kHeld && now_s() - start < 5) {
        pollfd p{uffd, POLLIN, 0};
        if (poll(&p, 1, 100) != 1) continue;
        uffd_msg msg;
        while (read(uffd, &msg, sizeof msg) == ssize_t(sizeof msg))
            if (msg.event == UFFD_EVENT_PAGEFAULT) ++faults;
    }
    say("faults", std::to_string(faults));
    std::vector<uint8_t> ordinary(1 << 16, 1);
    std::atomic<int> extra_status{1};
    std::atomic<double> extra_ms{-1};
    const double extra_start = now_s();
    std::thread extra([&] {
        extra_status = dp_mem_register(ctx[kHeld], ordinary.data(), ordinary.size());
        extra_ms = (now_s() - extra_start) * 1000;
    });
    const double held_from = now_s();
    while (now_s() - held_from < seconds)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (size_t i = 0; i < 2 * kHeld; ++i) {
        uffdio_zeropage zero{{uint64_t(area) + i * page, page}, 0, 0};
        ioctl(uffd, UFFDIO_ZEROPAGE, &zero);
    }
    for (std::thread &t : registering) t.join();
    extra.join();
    int held_ok = 0;
    for (const std::atomic<int> &h : held_status) held_ok += h == DP_OK ? 1 : 0;
    say("held_ok", std::to_string(held_ok));
    say("extra_register", dp_status_name(dp_status_t(extra_status.load())));
    say("extra_register_ms", std::to_string(int(extra_ms.load())));
    for (dp_context_t *c : ctx) dp_finalize(c);
    close(uffd);
    return faults == kHeld && extra_status == DP_OK ? 0 : 1;
}

// Registers two pages armed with userfaultfd (filled first, so the probe
// passes), drops them again (MADV_DONTNEED: the next touch faults) and
// posts N memmoves out of them, then a DRAIN: the engines that take them
// wait in process_vm_readv for as long as we sit on the fault. Says
// "parked" once a fault arrived; then how many of the N completed (and how:
// those the agent refused while the others held its engines) and whether
// the DRAIN did, both while parked; holds until stdin closes, answers the
// faults, and says what every record ended as.
int uffd_park(const char *socket, int n) {
    void *area = nullptr;
    const int uffd = arm_userfaultfd(2, &area);
    if (uffd < 0) return 0;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    for (size_t i = 0; i < 2; ++i) {
        uffdio_zeropage zero{{uint64_t(area) + i * page, page}, 0, 0};
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &zero) != 0) return 2;
    }
    dp_config_t config = config_for(socket);
    dp_context_t *ctx;
    dp_mover_t *mover;
    if (dp_init(&config, &ctx) != DP_OK || dp_mover_attach(ctx, &mover) != DP_OK) return 2;
    if (dp_mem_register(ctx, area, 2 * page) != DP_OK) return 2;
    if (madvise(area, 2 * page, MADV_DONTNEED) != 0) return 2;
    auto *records = static_cast<dp_completion_t *>(dp_malloc(ctx, (n + 1) * 64));
    auto *out = static_cast<uint8_t *>(dp_malloc(ctx, 64));
    if (!records || !out) return 2;
    std::memset(records, 0, (n + 1) * 64);
    auto record = [&](int i) { return reinterpret_cast<dp_completion_t *>(
                                   reinterpret_cast<uint8_t *>(records) + i * 64); };
    for (int i = 0; i <= n; ++i) {
        dp_desc_t d = i < n ? desc(DP_OP_MEMMOVE, uint64_t(area) + (i % 2) * page, uint64_t(out), 64)
                            : desc(DP_OP_DRAIN, 0, 0, 0);
        d.flags = DP_FLAG_COMPLETION;
        d.completion = uint64_t(record(i));
        while (dp_mover_submit(mover, 0, &d) == DP_ERR_RETRY) std::this_thread::yield();
    }
    pollfd p{uffd, POLLIN, 0};
    const bool faulted = poll(&p, 1, 5000) == 1;
    say("parked", faulted ? "yes" : "no");
    // While parked: the agent relieves its engines and refuses the rest of
    // our calls; wait for what it finishes without us.
    const double end = now_s() + 3;
    auto done = [&] {
        int k = 0;
        for (int i = 0; i < n; ++i)
            k += __atomic_load_n(&record(i)->status, __ATOMIC_ACQUIRE) != 0;
        return k;
    };
    while (done() < n - 2 && now_s() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    int refused = 0;
    for (int i = 0; i < n; ++i) {
        const uint8_t st = __atomic_load_n(&record(i)->status, __ATOMIC_ACQUIRE);
        refused += st != 0 && st != DP_COMP_SUCCESS;
    }
    say("done_while_parked", std::to_string(done()));
    say("refused_while_parked", std::to_string(refused));
    say("drain_while_parked",
        __atomic_load_n(&record(n)->status, __ATOMIC_ACQUIRE) ? "complete" : "waiting");
    hold_until_stdin_closes();
    // Answer: the held calls return, and everything completes.
    for (size_t i = 0; i < 2; ++i) {
        uffdio_zeropage zero{{uint64_t(area) + i * page, page}, 0, 0};
        ioctl(uffd, UFFDIO_ZEROPAGE, &zero);
    }
    const int drained = dp_mover_wait(mover, record(n), DP_WAIT_YIELD, 5'000'000'000);
    say("drain", drained == DP_OK ? std::to_string(record(n)->status) : "timed out");
    say("done_after", std::to_string(done()));
    dp_mover_close(mover);
    dp_finalize(ctx);
    close(uffd);
    return faulted && drained == DP_OK ? 0 : 1;
}

// The same through a collective: two one-member teams, an allreduce of
// 16 ints out of the armed pages on the first (the engine, or whoever runs
// it, waits on us); once parked and past the agent's hold limit, another
// on the second team, which must fail rather than wait. Holds until stdin closes, then answers the fault.
int uffd_park_coll(const char *socket) {
    void *area = nullptr;
    const int uffd = arm_userfaultfd(1, &area);
    if (uffd < 0) return 0;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    uffdio_zeropage fill{{uint64_t(area), page}, 0, 0};
    if (ioctl(uffd, UFFDIO_ZEROPAGE, &fill) != 0) return 2;
    dp_config_t config = config_for(socket);
    config.job_secret = "uffd-park";
    dp_context_t *ctx;
    if (dp_init(&config, &ctx) != DP_OK) return 2;
    if (dp_mem_register(ctx, area, page) != DP_OK) return 2;
    dp_team_t *held = nullptr, *other = nullptr;
    if (dp_team_create_timeout(ctx, "uffd-held", 0, 1, 2000, &held) != DP_OK ||
        dp_team_create_timeout(ctx, "uffd-other", 0, 1, 2000, &other) != DP_OK)
        return 2;
    if (madvise(area, page, MADV_DONTNEED) != 0) return 2;
    auto *out = static_cast<int32_t *>(dp_malloc(ctx, 128));
    if (!out) return 2;
    dp_request_t *first = nullptr, *second = nullptr;
    if (dp_iallreduce(area, out, 16, DP_INT32, DP_SUM, held, &first) != DP_OK) return 2;
    pollfd p{uffd, POLLIN, 0};
    const bool faulted = poll(&p, 1, 5000) == 1;
    say("parked", faulted ? "yes" : "no");
    // Past the agent's engine_hold_ms (the test's 100 ms): the held engine
    // is relieved, and our next call into our memory is refused.
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const double start = now_s();
    dp_status_t second_status = DP_ERR_RETRY;
    int done = 0;
    if (dp_iallreduce(area, out + 16, 16, DP_INT32, DP_SUM, other, &second) == DP_OK) {
        while ((second_status = dp_test(second, &done)) == DP_OK && !done && now_s() - start < 5)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    say("second_while_parked", done ? dp_status_name(second_status) : "waiting");
    say("second_ms", std::to_string(int((now_s() - start) * 1000)));
    hold_until_stdin_closes();
    uffdio_zeropage zero{{uint64_t(area), page}, 0, 0};
    ioctl(uffd, UFFDIO_ZEROPAGE, &zero);
    say("first", dp_status_name(dp_wait(first)));
    dp_request_free(first);
    if (second) dp_request_free(second);
    dp_team_destroy(other);
    dp_team_destroy(held);
    dp_finalize(ctx);
    close(uffd);
    return faulted ? 0 : 1;
}

// An ATTACH whose identity proof lies in memory armed with userfaultfd
// (an agent without SO_PEERPIDFD reads the proof back): the read waits for
// us for SECONDS. Meanwhile another connection of ours attaches through
// libdeputy, which must not wait behind it. Then the fault is answered
// with zeros, which are not the proof: refused.
int uffd_attach(const char *socket, double seconds) {
    void *area = nullptr;
    const int uffd = arm_userfaultfd(1, &area);
    if (uffd < 0) return 0;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    control::Attach held;
    held.pool_bytes = 1 << 20;
    held.proof_addr = uint64_t(area);
    held.proof.fill(0x5a);
    RawClient raw;
    control::Reply refusal;
    std::atomic<bool> attached{false};
    const double start = now_s();
    std::thread attaching([&] { attached = raw.attach(socket, 0, &held, &refusal); });
    pollfd p{uffd, POLLIN, 0};
    const bool faulted = poll(&p, 1, 5000) == 1;
    say("faulted", faulted ? "yes" : "no");
    dp_config_t config = config_for(socket);
    dp_context_t *other = nullptr;
    const double other_start = now_s();
    const dp_status_t other_status = dp_init(&config, &other);
    say("other_attach", dp_status_name(other_status));
    say("other_attach_ms", std::to_string(int((now_s() - other_start) * 1000)));
    while (now_s() - start < seconds) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    uffdio_zeropage zero{{uint64_t(area), page}, 0, 0};
    ioctl(uffd, UFFDIO_ZEROPAGE, &zero);
    attaching.join();
    say("held_attach", attached ? "attached" : dp_status_name(refusal.status));
    say("held_reason", refusal.reason);
    if (other) dp_finalize(other);
    close(uffd);
    return faulted && other_status == DP_OK && !attached ? 0 : 1;
}

// The racer's victim, an ordinary process of the uid too: a memfd of its
// own outside any window (the decoy the racer must reach), then N
// dp_init/dp_finalize and N team formations once told to go.
int churn(const char *socket, int n) {
    drop_capabilities();
    const int decoy = memfd_create("deputy-decoy", MFD_CLOEXEC);
    if (decoy < 0 || ftruncate(decoy, 4096) != 0) return 2;
    say("ready", "yes");
    char c;
    if (read(0, &c, 1) != 1) return 2;
    int attaches = 0, teams = 0;
    for (int i = 0; i < n; ++i) {
        dp_config_t config = config_for(socket, 256 << 10);
        dp_context_t *ctx = nullptr;
        if (dp_init(&config, &ctx) != DP_OK) break;
        dp_finalize(ctx);
        ++attaches;
    }
    dp_config_t config = config_for(socket, 256 << 10);
    dp_context_t *ctx = nullptr;
    if (dp_init(&config, &ctx) == DP_OK) {
        for (int i = 0; i < n; ++i) {
            dp_team_t *team = nullptr;
            const std::string key = "raced-" + std::to_string(i);
            if (dp_team_create(ctx, key.c_str(), 0, 1, &team) != DP_OK) break;
            dp_team_destroy(team);
            ++teams;
        }
        dp_finalize(ctx);
    }
    say("done", std::to_string(attaches) + " attaches, " + std::to_string(teams) + " teams");
    hold_until_stdin_closes();
    close(decoy);
    return attaches == n && teams == n ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s SOCKET ATTACK [ARGS...]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const char *socket = argv[1];
    const std::string attack = argv[2];
    auto arg = [&](int i) { return i + 3 < argc ? argv[i + 3] : "0"; };
    if (attack == "delta-race") return delta_race(socket, std::atof(arg(0)));
    if (attack == "fork-exit") return fork_exit(socket);
    if (attack == "exit-with-work")
        return exit_with_work(socket, std::atoi(arg(0)), std::atoi(arg(1)));
    if (attack == "coll-exit")
        return coll_exit(socket, std::atoi(arg(0)), std::atoi(arg(1)), std::atoi(arg(2)));
    if (attack == "trickle") return trickle(socket);
    if (attack == "no-read") return no_read(socket);
    if (attack == "idle") return idle(socket, std::atoi(arg(0)), std::atof(arg(1)));
    if (attack == "join-flood") return join_flood(socket, std::atoi(arg(0)));
    if (attack == "garbage") return garbage(socket, std::atoi(arg(0)));
    if (attack == "big-pool") return big_pool(socket);
    if (attack == "batch-registered") return batch_registered(socket, std::atof(arg(0)));
    if (attack == "join") return join(socket, arg(0), std::atoi(arg(1)), std::atoi(arg(2)));
    if (attack == "alltoallv-rewrite") return alltoallv_rewrite(socket);
    if (attack == "rdma-unmap") return rdma_unmap(arg(0));
    if (attack == "p2p-raw") return p2p_raw(socket);
    if (attack == "fd-racer") {
        std::vector<pid_t> pids;
        for (int i = 3; i < argc; ++i) pids.push_back(pid_t(std::atoi(argv[i])));
        return fd_racer(pids);
    }
    if (attack == "slot-flood") return slot_flood(socket, std::atoi(arg(0)), std::atoi(arg(1)));
    if (attack == "fd-flood") return fd_flood(socket, std::atoi(arg(0)), std::atoi(arg(1)));
    if (attack == "churn") return churn(socket, std::atoi(arg(0)));
    if (attack == "uffd-register") return uffd_register(socket, std::atof(arg(0)));
    if (attack == "uffd-register-crowd") return uffd_register_crowd(socket, std::atof(arg(0)));
    if (attack == "uffd-attach") return uffd_attach(socket, std::atof(arg(0)));
    if (attack == "uffd-park") return uffd_park(socket, std::atoi(arg(0)));
    if (attack == "uffd-park-coll") return uffd_park_coll(socket);
    std::fprintf(stderr, "unknown attack %s\n", attack.c_str());
    return 2;
}
