#include "agent/fd_budget.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/resource.h>

namespace deputy::agent {

void FdBudget::init(std::string *note) {
    note->clear();
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
    if (r.rlim_cur < r.rlim_max) {
        const rlim_t was = r.rlim_cur;
        r.rlim_cur = r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &r) == 0)
            *note = fmt::format("file descriptors: soft limit raised from {} to the hard limit {}",
                                was, r.rlim_max);
        else
            getrlimit(RLIMIT_NOFILE, &r);
    }
    limit_ = r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : uint64_t(r.rlim_cur);
    at_start_ = count_open();
    if (limit_ < (1u << 16)) {
        const uint64_t clients = limit_ > 64 + kReserve ? (limit_ - 64 - kReserve) / kPerClient : 0;
        *note += fmt::format("{}file descriptors: RLIMIT_NOFILE is {}: about {} clients fit (fewer "
                             "with teams); past that, clients and teams are refused with a reason",
                             note->empty() ? "" : "; ", limit_, clients);
    }
}

uint64_t FdBudget::count_open() {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return UINT64_MAX;
    uint64_t n = 0;
    while (const dirent *e = readdir(d))
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n - 1;  // the directory's own fd
}

bool FdBudget::room_for(uint64_t more, uint64_t bound, uint64_t *in_use) const {
    *in_use = 0;
    // (2 reserves: counting costs, a margin does not.)
    if (bound < limit_ && more + 2 * kReserve <= limit_ - bound) return true;
    *in_use = count_open();
    return *in_use != UINT64_MAX && *in_use + more + kReserve <= limit_;
}

std::string FdBudget::why_full(uint64_t in_use) const {
    if (in_use == UINT64_MAX)
        return fmt::format("the agent is out of file descriptors (RLIMIT_NOFILE {}; raise `ulimit "
                           "-n` for it)",
                           limit_);
    return fmt::format("the agent has {} of its {} file descriptors in use (RLIMIT_NOFILE, {} kept "
                       "in reserve; raise `ulimit -n` for it)",
                       in_use, limit_, kReserve);
}

}  // namespace deputy::agent
