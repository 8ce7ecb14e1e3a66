#include "agent/socket_dir.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deputy::agent {

dp_status_t check_socket_dir(const std::string &dir, std::string *error) {
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) {
        *error = fmt::format("agent socket directory {}: {}", dir, std::strerror(errno));
        return DP_ERR_IO;
    }
    if (!S_ISDIR(st.st_mode)) {
        *error = fmt::format("agent socket directory {} is not a directory (a symlink?)", dir);
        return DP_ERR_DENIED;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        *error = fmt::format("agent socket directory {} is mode {:04o} owned by uid {}: it must "
                             "be private to uid {} (chmod 700 {}, or choose another --socket)",
                             dir, st.st_mode & 07777, st.st_uid, geteuid(), dir);
        return DP_ERR_DENIED;
    }
    return DP_OK;
}

dp_status_t prepare_socket_dir(const std::string &socket_path, std::string *error) {
    if (!socket_path.empty() && socket_path[0] == '@') return DP_OK;
    const size_t slash = socket_path.rfind('/');
    if (socket_path.empty() || slash == std::string::npos || slash + 1 == socket_path.size()) {
        *error = fmt::format("agent socket '{}': give an absolute path to a file", socket_path);
        return DP_ERR_INVALID;
    }
    const std::string dir = slash == 0 ? "/" : socket_path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        *error = fmt::format("agent socket directory {}: mkdir: {}", dir, std::strerror(errno));
        return DP_ERR_IO;
    }
    return check_socket_dir(dir, error);
}

}  // namespace deputy::agent
