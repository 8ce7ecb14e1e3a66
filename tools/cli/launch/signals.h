// The launcher's signals, read from a signalfd in its poll loop instead of
// handled asynchronously: SIGINT, SIGTERM and SIGHUP (to pass on to the
// ranks) and SIGCHLD (a rank or the agent ended). They are blocked while a
// SignalFd lives; children unblock them before exec (spawn.cc).
#pragma once

#include <signal.h>

#include <string>
#include <vector>

#include "common/fd.h"

namespace deputy::launch {

class SignalFd {
  public:
    SignalFd();   // blocks the signals; SIGPIPE is ignored (a closed stdout is not fatal)
    ~SignalFd();  // drains what is pending and restores the mask
    SignalFd(const SignalFd &) = delete;
    SignalFd &operator=(const SignalFd &) = delete;

    bool ok() const { return fd_.valid(); }
    int fd() const { return fd_.get(); }
    // Signals that arrived since the last call, in order (SIGCHLD included).
    std::vector<int> take();

  private:
    UniqueFd fd_;
    sigset_t old_mask_;
};

// "SIGINT" for 2 ("signal 64" when there is no name).
std::string signal_name(int sig);

}  // namespace deputy::launch
