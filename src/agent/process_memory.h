// Another process's memory through cross-memory attach (process_vm_readv /
// process_vm_writev): memory mode "direct", one copy, no shared mapping.
// The kernel checks ptrace access (same uid, and under Yama ptrace_scope=1
// the client must have named the agent with PR_SET_PTRACER).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace deputy::agent {

// Reads/writes exactly len bytes; false with *error naming errno or a short transfer.
bool read_process_memory(pid_t pid, uint64_t addr, void *dst, size_t len, std::string *error);
bool write_process_memory(pid_t pid, uint64_t addr, const void *src, size_t len,
                          std::string *error);

}  // namespace deputy::agent
