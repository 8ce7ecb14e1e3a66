// The message of the RailError `f` throws, or "" when it throws none: the
// rail tests compare it with the exact text a user sees.
#pragma once

#include <string>

#include "bench/rail/rail_error.h"

namespace deputy::rail {

template <typename F>
std::string error_of(F f) {
    try {
        f();
    } catch (const RailError &e) {
        return e.what();
    }
    return "";
}

}  // namespace deputy::rail
