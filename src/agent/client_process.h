// Who a client is, as an identity that cannot be recycled: a pidfd for the
// process at the other end of its control socket, and cross-memory access
// (process_vm_readv/writev, memory mode "direct") that goes only to that
// process.
//
// A pid alone is not an identity: once its process exits and is reaped the
// kernel hands the number to the next process (pid_max is 32768 on many
// machines, cycled in seconds). A client that forks, exits and leaves its
// socket to the child would otherwise make the agent read and write whatever
// process got the number next. So:
//  - at connect, the agent takes a pidfd from the kernel's record of the
//    connection (SO_PEERPIDFD, Linux 6.5+). Older kernels: pidfd_open of
//    SO_PEERCRED's pid, and the ATTACH message proves it: the client names
//    32 random bytes in its own memory, which the agent reads back through
//    that pid *after* taking the pidfd (a recycled pid is another process,
//    which holds no such bytes). Where cross-memory attach is refused the
//    identity stays unverified and direct memory is refused with it;
//  - the pidfd is watched: when the process exits the session is dropped,
//    even if a child still holds the socket;
//  - every cross-memory access checks the pidfd before the system call, and
//    a read checks it again after (bytes read while the process died may
//    be another process's, and are discarded). The one window left is a
//    write whose target exits, is reaped and has its pid handed to another
//    process during the system call itself — which takes a full cycle of
//    pid_max process creations inside a few microseconds.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "channel/socket_io.h"
#include "common/fd.h"
#include "mover/stall_watch.h"

namespace deputy::agent {

inline constexpr size_t kProofBytes = 32;

class ClientProcess {
  public:
    // The process that connected `socket`. DP_ERR_DENIED (with *error) when
    // it already exited or no pidfd can be had.
    static dp_status_t open(int socket, const channel::sock::PeerCredentials &peer,
                            ClientProcess *out, std::string *error);

    // Proves a pidfd_open'ed identity: `seen` are the kProofBytes read
    // (through read(), off the service thread: memory_probe.h) at the
    // address the client's ATTACH named, `proof` the bytes it sent. False
    // with *error when they differ: the process behind the pid is not the
    // one that connected (refuse it).
    bool check_proof(const uint8_t *seen, const std::array<uint8_t, kProofBytes> &proof,
                     std::string *error);

    pid_t pid() const { return pid_; }
    int pidfd() const { return pidfd_.get(); }
    // Direct memory needs a verified identity.
    bool verified() const { return verified_; }
    // False once the process exited, or a cross-memory call found it
    // without an address space (it is exiting: the kernel tears the memory
    // down before the pidfd turns readable). Never blocks.
    bool alive() const;

    // Exactly len bytes, or false with *error (the process exited, the range
    // is not mapped or not readable/writable). `*written`: bytes that reached
    // the process before a write failed (a fault part-way). On an engine,
    // also false at once while another call into this process holds an
    // engine (mover/stall_watch.h): the process decides how long its pages
    // take, so it may hold the engines that entered, never more.
    bool read(uint64_t addr, void *dst, size_t len, std::string *error) const;
    bool write(uint64_t addr, const void *src, size_t len, size_t *written,
               std::string *error) const;

    // A client reached over the network (remote_gate.h): no process here,
    // so no pidfd, never verified (no direct memory), alive until its
    // connection ends, and every read or write refused.
    static std::shared_ptr<ClientProcess> remote();
    bool is_remote() const { return remote_; }

    // For tests: take the pidfd_open path even where SO_PEERPIDFD exists
    // ($DEPUTY_AGENT_NO_PEERPIDFD=1 in the agent's environment).
    static bool peer_pidfd_disabled();

  private:
    // The submitter as the engines' stall watch names it: every context of
    // one process is one submitter (a live pid names one process).
    uint64_t owner_key() const { return uint64_t(pid_); }
    bool refused(const mover::SubmitterCall &call, std::string *error) const;

    pid_t pid_ = 0;
    UniqueFd pidfd_;
    bool verified_ = false;
    bool remote_ = false;
    mutable std::atomic<bool> exiting_{false};  // ESRCH from process_vm_*, on any engine
    // A process_vm_* call on this process succeeded once: a later EPERM is
    // the client's private window (common/private_window.h), not Yama.
    mutable std::atomic<bool> reached_{false};
};

}  // namespace deputy::agent
