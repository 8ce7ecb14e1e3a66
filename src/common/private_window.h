// A stretch of time during which no other process of the user can reach
// this one: not dumpable (PR_SET_DUMPABLE 0), its /proc/<pid>/fd,
// /proc/<pid>/mem and /proc/<pid>/environ become root's, and neither
// ptrace nor cross-memory attach (process_vm_readv) nor pidfd_getfd is
// allowed to anyone without CAP_SYS_PTRACE.
//
// Why: a segment a process receives must be mapped writable before it is
// closed to new writers (F_SEAL_FUTURE_WRITE), and between recvmsg() and
// the seal its fd sits in this process's fd table, where any process of
// the user could open it again writable (/proc/<pid>/fd/N needs read
// access only, which Yama's ptrace_scope 1 still grants). Receiving, mapping
// and closing (or sealing) inside a window leaves no moment at which the
// fd is reachable. The window lasts microseconds; cross-memory reads of
// this process by its agent meanwhile get EPERM, which the agent retries
// (agent/client_process.cc).
//
// Nesting is allowed (a count per process); a process that is not dumpable
// already (setuid, or its own choice) is left as it is.
#pragma once

namespace deputy {

class PrivateWindow {
  public:
    PrivateWindow();
    ~PrivateWindow();
    PrivateWindow(const PrivateWindow &) = delete;
    PrivateWindow &operator=(const PrivateWindow &) = delete;
};

}  // namespace deputy
