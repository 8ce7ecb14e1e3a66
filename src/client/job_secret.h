// The job's secret as the environment gives it, read once per process.
//
// A process of the same user can read another's environment
// (/proc/<pid>/environ needs only read access, which Yama's ptrace_scope 1
// grants) and open its fds through /proc/<pid>/fd, but not a socket's: so
// `deputy launch` hands each rank the secret on an inherited socket named
// by $DEPUTY_JOB_SECRET_FD, and this reads it, closes the socket and drops
// the variable. A secret given in $DEPUTY_JOB_SECRET instead (a launcher of
// the user's own) is copied, and the variable's bytes are overwritten in
// place, so that /proc/<pid>/environ no longer shows it, then unset.
//
// Either way the first call (dp_init's) takes it; later calls, from any
// thread, return the copy. Children started after that do not inherit it.
#pragma once

#include <deputy/status.h>

#include <string>

namespace deputy::client {

// DP_OK with *secret (empty: the environment gives none), or
// DP_ERR_INVALID naming what is wrong with $DEPUTY_JOB_SECRET_FD.
dp_status_t job_secret_from_environment(std::string *secret);

}  // namespace deputy::client
