// Sizes with suffixes, as dsa_perf_micros and the OSU tools take them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deputy::units {

// "4096", "4k", "4K", "2m", "1g", "64KiB" -> bytes (binary multiples).
// nullopt for anything else or on overflow.
std::optional<uint64_t> parse_size(std::string_view text);

// 4096 -> "4K", 1536 -> "1536", 3<<20 -> "3M": exact, shortest binary suffix.
std::string format_size(uint64_t bytes);

}  // namespace deputy::units
