#include "client/job_secret.h"

#include <poll.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "channel/control.h"
#include "common/check.h"

extern char **environ;

namespace deputy::client {
namespace {

constexpr const char *kFdVariable = "DEPUTY_JOB_SECRET_FD";
constexpr const char *kVariable = "DEPUTY_JOB_SECRET";

std::mutex g_mutex;
bool g_read = false;
dp_status_t g_status = DP_OK;
std::string g_secret;
std::string g_error;

// Overwrites the value of NAME=value where it lies (for the variables the
// process started with, the stack area /proc/<pid>/environ shows), then
// unsets it.
void erase_variable(const char *name) {
    const size_t len = std::strlen(name);
    for (char **e = environ; e && *e; ++e)
        if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            sodium_memzero(*e + len + 1, std::strlen(*e + len + 1));
    unsetenv(name);
}

// The launcher wrote the secret and closed its end: read to EOF (it is
// there already; a bound keeps a wrong fd from hanging dp_init).
dp_status_t read_secret_fd(const char *value, std::string *out, std::string *error) {
    char *end = nullptr;
    errno = 0;
    const long fd = std::strtol(value, &end, 10);
    if (errno || end == value || *end || fd < 0 || fd > 1 << 20) {
        *error = std::string("$") + kFdVariable + "=" + value + ": not a file descriptor";
        return DP_ERR_INVALID;
    }
    char buf[channel::control::kMaxTokenBytes + 1];
    size_t got = 0;
    for (;;) {
        pollfd p{int(fd), POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0) {
            *error = std::string("$") + kFdVariable + "=" + value +
                     ": nothing to read from it within 1 s";
            close(int(fd));
            return DP_ERR_INVALID;
        }
        const ssize_t n = read(int(fd), buf + got, sizeof buf - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *error = std::string("$") + kFdVariable + "=" + value + ": " + std::strerror(errno);
            close(int(fd));
            return DP_ERR_INVALID;
        }
        if (n == 0) break;
        got += size_t(n);
        if (got == sizeof buf) {
            *error = std::string("$") + kFdVariable + ": a secret of more than " +
                     std::to_string(channel::control::kMaxTokenBytes) + " bytes";
            close(int(fd));
            sodium_memzero(buf, sizeof buf);
            return DP_ERR_TOO_LARGE;
        }
    }
    close(int(fd));
    out->assign(buf, got);
    sodium_memzero(buf, sizeof buf);
    return DP_OK;
}

}  // namespace

dp_status_t job_secret_from_environment(std::string *secret) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_read) {
        g_read = true;
        if (const char *fd = std::getenv(kFdVariable); fd && *fd) {
            g_status = read_secret_fd(fd, &g_secret, &g_error);
            unsetenv(kFdVariable);
        } else if (const char *given = std::getenv(kVariable); given && *given) {
            g_secret = given;
        }
        erase_variable(kVariable);
    }
    if (g_status != DP_OK) DP_FAIL(g_status, "dp_init: {}", g_error);
    *secret = g_secret;
    return DP_OK;
}

}  // namespace deputy::client
