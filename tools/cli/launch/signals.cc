#include "cli/launch/signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>

namespace deputy::launch {
namespace {

sigset_t handled() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
    return set;
}

}  // namespace

SignalFd::SignalFd() {
    // An inherited SIG_IGN for SIGCHLD would reap the ranks behind our back.
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t set = handled();
    sigprocmask(SIG_BLOCK, &set, &old_mask_);
    fd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
}

SignalFd::~SignalFd() {
    take();
    fd_.reset();
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalFd::take() {
    std::vector<int> out;
    signalfd_siginfo info;
    while (fd_ && read(fd_.get(), &info, sizeof info) == ssize_t(sizeof info))
        out.push_back(int(info.ssi_signo));
    return out;
}

std::string signal_name(int sig) {
    if (const char *abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
    return "signal " + std::to_string(sig);
}

}  // namespace deputy::launch
