#include "mpi/offload_requests.h"

#include "mpi/runtime.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace deputy::mpi {
namespace {

struct OffloadRequest {
    RequestKind kind;
    CommTeam *team;
    RangePins pins;
    Post post;  // kept to post again after DP_ERR_RETRY
    Finish then;
    dp_request_t *dp = nullptr;
    MPI_Request handle = MPI_REQUEST_NULL;
    dp_status_t status = DP_OK;
    dp_msg_status_t message{};  // a receive's, once complete
    // Released by whichever comes last of MPI's free function and this
    // library's MPI_Grequest_complete: MPI says the free function runs
    // after the completion, and Open MPI holds to it, but MPICH runs it
    // within MPI_Request_free on a request still pending (an MPI_Isend
    // freed at once, a persistent request freed while started).
    std::atomic<int> holders{2};
};

// The MPI error of a deputy status.
int mpi_error(dp_status_t st) {
    return st == DP_OK ? MPI_SUCCESS : st == DP_ERR_TRUNCATED ? MPI_ERR_TRUNCATE : MPI_ERR_OTHER;
}

// The team's slots a request of this kind takes, and how many there are.
std::atomic<int> &in_flight(const RequestKind &kind, CommTeam *team) {
    return kind.p2p ? team->p2p_in_flight : team->in_flight;
}
int max_in_flight(const RequestKind &kind) {
    return kind.p2p ? DP_P2P_MAX_OUTSTANDING : DP_TEAM_MAX_OUTSTANDING;
}

std::mutex g_mutex;                       // g_pending
std::vector<OffloadRequest *> g_pending;  // posted, not yet complete
std::atomic<int> g_pending_count{0};      // the progress hook's fast "nothing to do"
bool g_hooked = false;

// Everything the request held goes, except the request itself while MPI
// may still query it. Not under g_mutex: Open MPI may call the free
// function from inside MPI_Grequest_complete.
void release(OffloadRequest *r) {
    release_memory(r->pins);
    team_use_end(r->team);
    delete r;
}

int query_status(void *state, MPI_Status *status) {
    auto *r = static_cast<OffloadRequest *>(state);
    // What Open MPI 4.1 and MPICH 4.0 leave in the status of their own
    // nonblocking collectives and sends (source and tag 0, no elements);
    // a receive's message.
    fill_status(r->message, mpi_error(r->status), status);
    return status->MPI_ERROR;
}

// Drops one of the request's two holders (OffloadRequest::holders).
void let_go(OffloadRequest *r) {
    if (r->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) release(r);
}

int free_request(void *state) {
    let_go(static_cast<OffloadRequest *>(state));
    return MPI_SUCCESS;
}

int cancel_request(void *, int) { return MPI_SUCCESS; }  // a collective cannot be cancelled

void report_failure(const RequestKind &kind, dp_status_t st) {
    // A truncated receive is the program's error, which MPI reports as
    // MPI_ERR_TRUNCATE (and its error handler acts on): nothing to add.
    if (st == DP_ERR_TRUNCATED) return;
    warn(fmt::format("{} offloaded to deputy failed: {} ({})", kind.mpi_name, dp_strerror(st),
                     dp_status_name(st)));
}

// Posts r->post, waiting (and progressing the others) while this member
// has all of the team's slots of its kind in flight.
dp_status_t post(OffloadRequest *r) {
    std::atomic<int> &slots = in_flight(r->kind, r->team);
    while (slots.fetch_add(1, std::memory_order_acq_rel) >= max_in_flight(r->kind)) {
        slots.fetch_sub(1, std::memory_order_acq_rel);
        progress_requests();
        sched_yield();
    }
    dp_status_t st = r->post(&r->dp);
    if (st != DP_OK) slots.fetch_sub(1, std::memory_order_acq_rel);
    return st;
}

// A finished request's message (a receive's), before its dp request goes.
void keep_message(OffloadRequest *r, dp_status_t st) {
    if (r->kind.receive && (st == DP_OK || st == DP_ERR_TRUNCATED))
        dp_request_status(r->dp, &r->message);
}


uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// MPI's wait loops call the progress engine back to back. Spinning there
// takes the core the agent needs where ranks and agent share cores (the
// default on a node whose every core runs a rank), so once a thread has
// found nothing done for kSpinNs in a row, each further empty turn gives
// its core away: the same poll-then-sleep that dp_wait does. Sporadic
// calls (an MPI_Test between compute slices) never sleep.
constexpr uint64_t kSpinNs = 20000;
constexpr uint64_t kBackToBackNs = 5000;
void idle_turn(int completed) {
    thread_local uint64_t first_empty = 0, last_call = 0;
    const uint64_t now = now_ns();
    if (completed || now - last_call > kBackToBackNs) first_empty = now;
    last_call = now;
    if (!completed && now - first_empty > kSpinNs) {
        // sched_yield measured better than a 10 us nanosleep here (1-4 MiB
        // iallreduce on 2 ranks sharing 2 cores with the agent: docs/mpi.md).
        sched_yield();
        last_call = now_ns();
    }
}

#if defined(OPEN_MPI)
using ProgressCallback = int (*)(void);
int progress_hook() {
    if (g_pending_count.load(std::memory_order_relaxed) == 0) return 0;
    const int completed = progress_requests();
    idle_turn(completed);
    return completed;
}
int start_grequest(OffloadRequest *r, MPI_Request *request) {
    return PMPI_Grequest_start(query_status, free_request, cancel_request, r, request);
}
#elif defined(MPICH)
int poll_request(void *, MPI_Status *) {
    idle_turn(progress_requests());
    return MPI_SUCCESS;
}
// MPICH calls this from MPI_Wait* on requests of this kind; it must return
// once at least one of them completed (or the timeout passed).
int wait_requests(int count, void **states, double timeout, MPI_Status *) {
    const double start = PMPI_Wtime();
    for (;;) {
        const int completed = progress_requests();
        for (int i = 0; i < count; ++i) {
            auto *r = static_cast<OffloadRequest *>(states[i]);
            std::lock_guard lock(g_mutex);
            if (std::find(g_pending.begin(), g_pending.end(), r) == g_pending.end()) return MPI_SUCCESS;
        }
        if (timeout > 0 && PMPI_Wtime() - start > timeout) return MPI_SUCCESS;
        idle_turn(completed);
    }
}
int start_grequest(OffloadRequest *r, MPI_Request *request) {
    return MPIX_Grequest_start(query_status, free_request, cancel_request, poll_request,
                               wait_requests, r, request);
}
#else
#error "libdeputy-mpi knows Open MPI and MPICH"
#endif

}  // namespace

bool requests_start() {
#if defined(OPEN_MPI)
    // Exported by Open MPI's libopen-pal (every 4.x and 5.x): looked up at
    // run time so that linking needs only libmpi.
    auto reg = reinterpret_cast<int (*)(ProgressCallback)>(
        dlsym(RTLD_DEFAULT, "opal_progress_register"));
    if (!reg || reg(progress_hook) != 0) {
        warn("Open MPI's opal_progress_register was not found: nonblocking collectives go to MPI");
        return false;
    }
#endif
    g_hooked = true;
    return true;
}

namespace {
// The requests this thread is in MPI_Wait or MPI_Waitall for.
thread_local std::vector<MPI_Request> t_in_wait;

bool in_wait(MPI_Request request) {
    return std::find(t_in_wait.begin(), t_in_wait.end(), request) != t_in_wait.end();
}
}  // namespace

InWait::InWait(const MPI_Request *requests, int count)
    : requests_(requests), count_(count), previous_size_(t_in_wait.size()) {
    // Nothing of ours outstanding: none of them can be deputy's.
    if (g_pending_count.load(std::memory_order_relaxed) == 0 || !requests || count <= 0) return;
    t_in_wait.insert(t_in_wait.end(), requests, requests + count);
}

InWait::~InWait() { t_in_wait.resize(previous_size_); }

void InWait::leave_pending() {
    if (t_in_wait.size() == previous_size_ || g_pending_count.load(std::memory_order_relaxed) == 0)
        return;
    // The teams of this wait's requests still pending, each kept alive by
    // a use of its own: the leave may wait for teammates' reads, which must
    // not happen under g_mutex (a teammate's read can need its own
    // process's progress, and that one ours). The array as the wait left
    // it, not the handles it was given: a request completed in the wait is
    // freed, and its handle may already name another thread's request.
    std::vector<CommTeam *> teams;
    std::vector<dp_team_t *> dp_teams;
    {
        std::lock_guard lock(g_mutex);
        for (OffloadRequest *r : g_pending)
            if (r->dp && std::find(teams.begin(), teams.end(), r->team) == teams.end() &&
                std::find(requests_, requests_ + count_, r->handle) != requests_ + count_) {
                team_use_begin(r->team);
                teams.push_back(r->team);
                dp_teams.push_back(r->team->team);
            }
    }
    if (!dp_teams.empty())
        (void)dp_teams_leave_wait(dp_teams.data(), dp_teams.size());  // lost agent: tests say so
    for (CommTeam *team : teams) team_use_end(team);
}

int progress_requests() {
    if (g_pending_count.load(std::memory_order_relaxed) == 0) return 0;
    std::unique_lock lock(g_mutex, std::try_to_lock);
    if (!lock.owns_lock()) return 0;  // another thread is doing it
    std::vector<OffloadRequest *> done;
    for (size_t i = 0; i < g_pending.size();) {
        OffloadRequest *r = g_pending[i];
        int finished = 0;
        dp_status_t st = in_wait(r->handle) ? dp_test_in_wait(r->dp, &finished)
                                            : dp_test(r->dp, &finished);
        if (!finished && st == DP_OK) {
            ++i;
            continue;
        }
        keep_message(r, st);
        dp_request_free(r->dp);
        r->dp = nullptr;
        in_flight(r->kind, r->team).fetch_sub(1, std::memory_order_acq_rel);
        if (st == DP_ERR_RETRY) {  // the agent's queue was full: nothing was done
            st = post(r);
            if (st == DP_OK) {
                ++i;
                continue;
            }
        }
        r->status = st;
        done.push_back(r);
        g_pending[i] = g_pending.back();
        g_pending.pop_back();
    }
    g_pending_count.store(int(g_pending.size()), std::memory_order_relaxed);
    lock.unlock();
    for (OffloadRequest *r : done) {
        if (r->status != DP_OK) report_failure(r->kind, r->status);
        else if (r->then) r->then();
        PMPI_Grequest_complete(r->handle);
        let_go(r);
    }
    return int(done.size());
}

bool p2p_pending(MPI_Request request) {
    if (g_pending_count.load(std::memory_order_relaxed) == 0 || request == MPI_REQUEST_NULL)
        return false;
    progress_requests();  // one deputy finished is complete: nothing left to cancel
    std::lock_guard lock(g_mutex);
    return std::any_of(g_pending.begin(), g_pending.end(), [&](const OffloadRequest *r) {
        return r->handle == request && r->kind.p2p;
    });
}

void complete_finished(MPI_Request request) {
    if (g_pending_count.load(std::memory_order_relaxed) == 0 || request == MPI_REQUEST_NULL) return;
    {
        std::unique_lock lock(g_mutex, std::try_to_lock);
        if (!lock.owns_lock()) return;  // another thread progresses them
        if (std::none_of(g_pending.begin(), g_pending.end(),
                         [&](const OffloadRequest *r) { return r->handle == request; }))
            return;
    }
    progress_requests();
}

RequestKind request_kind(Operation op) {
    return {operation_info(op).mpi_name, &runtime().counters[size_t(op)].offloaded, false, false};
}

RequestKind request_kind(P2pCall call) {
    const bool receive =
        call == P2pCall::irecv || call == P2pCall::recv || call == P2pCall::recv_init;
    return {p2p_call_name(call), &runtime().p2p_offloaded[size_t(call)], true, receive};
}

void fill_status(const dp_msg_status_t &msg, int error, MPI_Status *status) {
    if (status == MPI_STATUS_IGNORE) return;
    PMPI_Status_set_elements(status, MPI_BYTE, int(msg.bytes));
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = msg.source;
    status->MPI_TAG = msg.tag;
    status->MPI_ERROR = error;
}

int start_request(const RequestKind &kind, CommTeam *team, RangePins pins, Post post_fn,
                  Finish then, MPI_Request *request) {
    auto *r = new OffloadRequest{kind, team, std::move(pins), std::move(post_fn), std::move(then)};
    team_use_begin(team);
    dp_status_t st = post(r);
    if (st != DP_OK) {
        report_failure(kind, st);
        release(r);
        return MPI_ERR_OTHER;
    }
    int rc = start_grequest(r, request);
    if (rc != MPI_SUCCESS) fatal("MPI_Grequest_start failed");
    r->handle = *request;
    std::lock_guard lock(g_mutex);
    g_pending.push_back(r);
    g_pending_count.store(int(g_pending.size()), std::memory_order_relaxed);
    if (kind.offloaded) count(*kind.offloaded);
    return MPI_SUCCESS;
}

int run_blocking(const RequestKind &kind, CommTeam *team, RangePins pins, const Post &post_fn,
                 const Finish &then, MPI_Status *status) {
    team_use_begin(team);
    dp_status_t st;
    OffloadRequest r{kind, team, {}, post_fn, {}};
    for (;;) {
        st = post(&r);
        if (st == DP_OK) {
            st = dp_wait(r.dp);
            keep_message(&r, st);
            dp_request_free(r.dp);
            in_flight(kind, team).fetch_sub(1, std::memory_order_acq_rel);
        }
        if (st != DP_ERR_RETRY) break;
        progress_requests();
    }
    if (st == DP_OK && then) then();
    release_memory(pins);
    team_use_end(team);
    // A blocking call's status carries no error field (MPI leaves it as is).
    if (status != MPI_STATUS_IGNORE) {
        const int kept = status->MPI_ERROR;
        fill_status(r.message, MPI_SUCCESS, status);
        status->MPI_ERROR = kept;
    }
    if (st != DP_OK) {
        report_failure(kind, st);
        return mpi_error(st);
    }
    if (kind.offloaded) count(*kind.offloaded);
    return MPI_SUCCESS;
}

void requests_stop() {
    while (g_pending_count.load() > 0) {
        progress_requests();
        sched_yield();
    }
#if defined(OPEN_MPI)
    if (g_hooked) {
        auto unreg = reinterpret_cast<int (*)(ProgressCallback)>(
            dlsym(RTLD_DEFAULT, "opal_progress_unregister"));
        if (unreg) unreg(progress_hook);
    }
#endif
    g_hooked = false;
}

}  // namespace deputy::mpi
