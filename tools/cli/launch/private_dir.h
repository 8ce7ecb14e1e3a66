// The private directory of the agents a launcher starts (their sockets and,
// until they have read it, their token): a fresh mkdtemp directory, mode
// 0700, named <prefix>XXXXXX under $TMPDIR, or under /tmp when $TMPDIR is
// too long for a socket path inside it (sockaddr_un holds 108 bytes).
#pragma once

#include <string>

namespace deputy::launch {

// Returns the new directory's path, or empty with `*error` set.
std::string make_private_dir(const std::string &prefix, std::string *error);

// Removes `dir` and what is in it; says so on stderr (as `tool`) when it
// cannot. Nothing for an empty `dir`.
void remove_private_dir(const std::string &dir, const std::string &tool);

}  // namespace deputy::launch
