// Flags every deputy command shares: -l/--log-level (the tool's own log),
// --sdk-log-level (the library's; DEPUTY_LOG_LEVEL is the fallback),
// --log-format; and
// the one way every command reads sizes and reports what a user mistyped.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace deputy::cli {

struct LogFlags {
    std::string log_level = "50";
    std::string sdk_log_level;  // empty: keep DEPUTY_LOG_LEVEL or the default
    std::string log_format = "plain";  // or "doca" (a command may default to it)
};

// Adds -l/--log-level and --sdk-log-level, both validated ("10".."70" or a
// name), and --log-format (plain or doca, for both logs).
void add_log_flags(CLI::App &app, LogFlags *flags);
// Applies parsed flags to the two loggers.
void apply_log_flags(const LogFlags &flags);

// A validator for "4096", "4k", "2m", "1g".
CLI::Validator size_validator();

// What a user mistyped, in one style: the flag and its value named, then
// what it accepts ("-s 4q: not a size (examples: 64, 4k, 2m, 1g)"). CLI11
// prints it and exits 105, as for its own checks.
[[noreturn]] void usage_error(const std::string &message);
// That message for a value of `flag` that is not a byte count.
std::string not_a_size(const std::string &flag, const std::string &text);
// A byte count given to `flag` ("4096", "4k", "2m", "1g"), else usage_error.
uint64_t parse_size(const std::string &flag, const std::string &text);
// Byte counts separated by commas ("64,4k,1m"), each as parse_size; at
// least one.
std::vector<uint64_t> parse_size_list(const std::string &flag, const std::string &text);

}  // namespace deputy::cli
