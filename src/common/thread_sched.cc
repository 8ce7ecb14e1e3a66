#include "common/thread_sched.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/affinity.h"

namespace deputy {

bool read_thread_sched(pid_t pid, pid_t tid, ThreadSched *out) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
    out->allowed_cpus = affinity::allowed_cpus(tid);
    // stat: "tid (comm) state ppid ...": the command may hold spaces and
    // parentheses, so fields are counted after the last ')'. Field 39
    // (processor) is the 37th after it.
    std::ifstream stat(dir + "/stat");
    std::string line;
    if (std::getline(stat, line)) {
        const size_t paren = line.rfind(')');
        if (paren != std::string::npos) {
            std::istringstream fields(line.substr(paren + 1));
            std::string field;
            for (int i = 3; i <= 39 && fields >> field; ++i)
                if (i == 39) out->last_cpu = std::stoi(field);
        }
    }
    std::ifstream schedstat(dir + "/schedstat");
    return bool(schedstat >> out->on_cpu_ns >> out->run_wait_ns >> out->timeslices);
}

pid_t current_tid() { return pid_t(syscall(SYS_gettid)); }

}  // namespace deputy
