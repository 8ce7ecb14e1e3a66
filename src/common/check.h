// DP_CHECK: propagate a failing dp_status_t and leave a trail. Each level a
// failure passes through logs one debug line (file:line and the expression),
// so `-l 60` shows the whole path of an error without a debugger.
#pragma once

#include <deputy/status.h>

#include "common/log.h"

#define DP_CHECK(expr)                                                                      \
    do {                                                                                    \
        dp_status_t dp_check_status_ = (expr);                                              \
        if (dp_check_status_ < 0) {                                                         \
            DP_LOG_DEBUG("{}:{}: {} -> {}", __FILE__, __LINE__, #expr,                      \
                         dp_status_name(dp_check_status_));                                 \
            return dp_check_status_;                                                        \
        }                                                                                   \
    } while (0)

// Return `status` after logging why at error level.
#define DP_FAIL(status, ...)                                                                \
    do {                                                                                    \
        DP_LOG_ERROR(__VA_ARGS__);                                                          \
        return (status);                                                                    \
    } while (0)
