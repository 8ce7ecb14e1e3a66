#include "mpi/persistent_requests.h"

#include "mpi/runtime.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace deputy::mpi {

struct Persistent {
    CommTeam *team;
    MPI_Comm comm;  // its errors' handler
    Starter start;
    MPI_Request handle;                     // the program's: MPI's own, never started
    MPI_Request active = MPI_REQUEST_NULL;  // while started: the operation's (under g_mutex)
};

namespace {

std::mutex g_mutex;                                         // g_persistent, Persistent::active
std::unordered_map<MPI_Request, Persistent *> g_persistent;  // by the program's handle
std::atomic<int> g_count{0};                                // its size, for persistent_any

Persistent *find(MPI_Request request) {  // g_mutex held
    if (request == MPI_REQUEST_NULL) return nullptr;
    auto it = g_persistent.find(request);
    return it == g_persistent.end() ? nullptr : it->second;
}

}  // namespace

int persistent_create(CommTeam *team, MPI_Comm comm, Starter start, MPI_Request *request) {
    MPI_Request handle = MPI_REQUEST_NULL;
    const int rc = PMPI_Send_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &handle);
    if (rc != MPI_SUCCESS) return rc;
    team_use_begin(team);
    auto *p = new Persistent{team, comm, std::move(start), handle};
    {
        std::lock_guard lock(g_mutex);
        g_persistent.emplace(handle, p);
        g_count.store(int(g_persistent.size()), std::memory_order_relaxed);
    }
    *request = handle;
    return MPI_SUCCESS;
}

bool persistent_any() { return g_count.load(std::memory_order_relaxed) != 0; }

bool persistent_start(MPI_Request request, int *rc) {
    if (!persistent_any()) return false;
    Persistent *p;
    bool active;
    {
        std::lock_guard lock(g_mutex);
        p = find(request);
        if (!p) return false;
        active = p->active != MPI_REQUEST_NULL;
    }
    if (active) {
        // Erroneous (MPI 3.1, 3.9): MPICH's own MPI_Start returns
        // MPI_ERR_REQUEST too (Open MPI 4.1's does not check).
        warn("MPI_Start: the persistent request is active already (started, and not yet "
             "completed by a wait or a test)");
        *rc = MPI_ERR_REQUEST;
        PMPI_Comm_call_errhandler(p->comm, *rc);
        return true;
    }
    MPI_Request operation = MPI_REQUEST_NULL;
    *rc = p->start(&operation);
    if (*rc == MPI_SUCCESS) {
        std::lock_guard lock(g_mutex);
        p->active = operation;
    }
    return true;
}

bool persistent_free(MPI_Request *request) {
    if (!persistent_any() || !request) return false;
    Persistent *p;
    {
        std::lock_guard lock(g_mutex);
        p = find(*request);
        if (!p) return false;
        // Out of the table before MPI may give its handle to another request.
        g_persistent.erase(p->handle);
        g_count.store(int(g_persistent.size()), std::memory_order_relaxed);
    }
    // An operation in progress goes on: MPI frees its request once it is
    // complete, and offload_requests.cc releases deputy's side then.
    if (p->active != MPI_REQUEST_NULL) PMPI_Request_free(&p->active);
    PMPI_Request_free(&p->handle);
    team_use_end(p->team);
    delete p;
    *request = MPI_REQUEST_NULL;
    return true;
}

RequestView::RequestView(MPI_Request *requests, int count)
    : requests_(requests), count_(count), view_(requests) {
    if (!persistent_any() || !requests || count <= 0) return;
    std::lock_guard lock(g_mutex);
    for (int i = 0; i < count; ++i) {
        Persistent *p = find(requests[i]);
        if (!p) continue;
        if (ours_.empty()) {
            ours_.assign(size_t(count), nullptr);
            copy_.assign(requests, requests + count);
            view_ = copy_.data();
        }
        ours_[size_t(i)] = p;
        if (p->active != MPI_REQUEST_NULL) copy_[size_t(i)] = p->active;
    }
}

RequestView::~RequestView() {
    if (ours_.empty()) return;
    std::lock_guard lock(g_mutex);
    for (int i = 0; i < count_; ++i) {
        Persistent *p = ours_[size_t(i)];
        if (!p) {
            requests_[i] = copy_[size_t(i)];
            continue;
        }
        // MPI freed the operation's request, complete: the persistent
        // request is inactive again, its status given.
        if (copy_[size_t(i)] == MPI_REQUEST_NULL) p->active = MPI_REQUEST_NULL;
        requests_[i] = p->handle;
    }
}

}  // namespace deputy::mpi
