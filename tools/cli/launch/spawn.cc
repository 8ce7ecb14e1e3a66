#include "cli/launch/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/affinity.h"

extern char **environ;

namespace deputy::launch {
namespace {

std::vector<char *> pointers(const std::vector<std::string> &strings) {
    std::vector<char *> out;
    out.reserve(strings.size() + 1);
    for (const std::string &s : strings) out.push_back(const_cast<char *>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// What the child reports through the pipe when it cannot run the program.
struct ChildFailure {
    int stage;  // kExec or kBind
    int err;
};
constexpr int kExec = 0;
constexpr int kBind = 1;

// A CPU mask made before fork (CPU_ALLOC allocates).
struct ForkMask {
    cpu_set_t *set = nullptr;
    size_t bytes = 0;
    explicit ForkMask(const std::vector<int> &cpus) {
        if (cpus.empty()) return;
        int most = 0;
        for (int cpu : cpus) most = std::max(most, cpu);
        set = CPU_ALLOC(size_t(most) + 1);
        bytes = CPU_ALLOC_SIZE(size_t(most) + 1);
        CPU_ZERO_S(bytes, set);
        for (int cpu : cpus)
            if (cpu >= 0) CPU_SET_S(size_t(cpu), bytes, set);
    }
    ~ForkMask() {
        if (set) CPU_FREE(set);
    }
    ForkMask(const ForkMask &) = delete;
    ForkMask &operator=(const ForkMask &) = delete;
};

// Runs in the child between fork and execve: async-signal-safe calls only.
[[noreturn]] void exec_child(const SpawnSpec &spec, char *const *argv, char *const *envp,
                             pid_t parent, int report_fd, const ForkMask &mask) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);  // the launcher ignores it; exec keeps ignored signals ignored
    if (spec.parent_death_signal) {
        prctl(PR_SET_PDEATHSIG, spec.parent_death_signal);
        if (getppid() != parent) _exit(127);  // the launcher died before prctl
    }
    ChildFailure failure{kExec, 0};
    int &err = failure.err;
    if (mask.set && sched_setaffinity(0, mask.bytes, mask.set) != 0) failure = {kBind, errno};
    if (!err && spec.stdin_fd >= 0 && dup2(spec.stdin_fd, STDIN_FILENO) < 0) err = errno;
    if (!err && spec.stdout_fd >= 0 && dup2(spec.stdout_fd, STDOUT_FILENO) < 0) err = errno;
    if (!err && spec.stderr_fd >= 0 && dup2(spec.stderr_fd, STDERR_FILENO) < 0) err = errno;
    if (!err && spec.keep_fd >= 0 && fcntl(spec.keep_fd, F_SETFD, 0) != 0) err = errno;
    if (!err) {
        execve(spec.path.c_str(), argv, envp);
        err = errno;
    }
    [[maybe_unused]] ssize_t n = write(report_fd, &failure, sizeof failure);
    _exit(failure.stage == kExec && err == ENOENT ? 127 : 126);
}

}  // namespace

pid_t spawn(const SpawnSpec &spec, std::string *error, int *exit_code) {
    // Everything that allocates happens before fork.
    std::vector<char *> argv = pointers(spec.argv);
    std::vector<char *> envp = pointers(spec.env);
    const ForkMask mask(spec.cpus);
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        *error = std::string("pipe: ") + std::strerror(errno);
        *exit_code = 1;
        return -1;
    }
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        *error = std::string("fork: ") + std::strerror(errno);
        *exit_code = 1;
        close(report[0]);
        close(report[1]);
        return -1;
    }
    if (pid == 0) {
        close(report[0]);
        exec_child(spec, argv.data(), envp.data(), parent, report[1], mask);
    }
    close(report[1]);
    setpgid(pid, pid);  // also here: no window in which a forwarded signal misses the child
    ChildFailure failure{kExec, 0};
    ssize_t n;
    do {
        n = read(report[0], &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n <= 0) return pid;  // the pipe closed on exec: the program runs
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (failure.stage == kBind) {
        *error = "cannot bind it to CPUs " + affinity::format_cpu_list(spec.cpus) + ": " +
                 std::strerror(failure.err);
        *exit_code = 126;
        return -1;
    }
    *error = "cannot execute '" + spec.path + "': " + std::strerror(failure.err);
    *exit_code = failure.err == ENOENT ? 127 : 126;
    return -1;
}

std::string find_program(const std::string &name) {
    if (name.empty()) return {};
    if (name.find('/') != std::string::npos) return name;
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    for (;;) {
        size_t end = dirs.find(':', start);
        std::string dir =
            dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (dir.empty()) dir = ".";
        std::string candidate = dir + "/" + name;
        struct stat st;
        if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            access(candidate.c_str(), X_OK) == 0)
            return candidate;
        if (end == std::string::npos) return {};
        start = end + 1;
    }
}

std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> out;
    std::error_code ec;
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    for (const auto &task : std::filesystem::directory_iterator(tasks, ec)) {
        std::ifstream in(task.path() / "children");
        for (pid_t child; in >> child;) out.push_back(child);
    }
    return out;
}

void kill_tree(pid_t pid, int sig) {
    std::vector<pid_t> tree{pid};
    for (size_t i = 0; i < tree.size() && tree.size() < 100000; ++i)
        for (pid_t child : children_of(tree[i])) tree.push_back(child);
    for (pid_t p : tree) {
        kill(-p, sig);  // fails harmlessly when p leads no group
        kill(p, sig);
    }
}

std::string command_line(const std::vector<std::string> &argv,
                         const std::vector<std::string> &verbatim) {
    std::string out;
    for (const std::string &arg : argv) {
        std::string plain = arg;
        for (const std::string &v : verbatim)
            for (size_t at; !v.empty() && (at = plain.find(v)) != std::string::npos;)
                plain.erase(at, v.size());
        const bool safe = !arg.empty() && plain.find_first_not_of(
                                              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789_@%+=:,./-") == std::string::npos;
        if (!out.empty()) out += ' ';
        if (safe) {
            out += arg;
            continue;
        }
        out += '\'';
        for (char c : arg) {
            if (c == '\'') out += "'\\''";
            else out += c;
        }
        out += '\'';
    }
    return out;
}

std::vector<std::string> environment_with(const std::vector<std::string> &overrides) {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
        std::string entry(*e);
        std::string name = entry.substr(0, entry.find('='));
        bool replaced = false;
        for (const std::string &o : overrides)
            if (o.compare(0, name.size() + 1, name + "=") == 0) replaced = true;
        if (!replaced) env.push_back(std::move(entry));
    }
    env.insert(env.end(), overrides.begin(), overrides.end());
    return env;
}

}  // namespace deputy::launch
