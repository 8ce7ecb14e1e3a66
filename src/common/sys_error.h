// DP_FAIL_ERRNO: DP_FAIL for a failed system call, with strerror(errno)
// appended. errno is captured first, on purpose: in `logger().error(fmt,
// strerror(errno))` the logger call is evaluated before its arguments, and
// the first use of a logger (isatty on its stream) overwrites errno.
#pragma once

#include <cerrno>
#include <cstring>

#include "common/check.h"

#define DP_FAIL_ERRNO(status, format, ...)                                                \
    do {                                                                                  \
        const int dp_errno_ = errno;                                                      \
        DP_LOG_ERROR(format ": {}" __VA_OPT__(, ) __VA_ARGS__, std::strerror(dp_errno_)); \
        return (status);                                                                  \
    } while (0)
