// The agent's socket directory must be private: a directory owned by the
// agent's user with no access for group or others (0700), so only that user
// can even reach the socket. The agent creates it when missing and refuses
// to start in one that is not private, saying how to fix it.
#pragma once

#include <deputy/status.h>

#include <string>

namespace deputy::agent {

// For a socket path: creates its directory (mode 0700) if missing, then
// checks owner and mode. "@name" (abstract socket, tests only) is accepted
// as is. DP_ERR_DENIED or DP_ERR_IO with *error naming the path.
dp_status_t prepare_socket_dir(const std::string &socket_path, std::string *error);

// An existing directory's owner and mode, as prepare_socket_dir checks them
// (`deputy doctor` asks before any agent runs).
dp_status_t check_socket_dir(const std::string &dir, std::string *error);

}  // namespace deputy::agent
