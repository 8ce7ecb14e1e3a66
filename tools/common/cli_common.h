// Flags every deputy command shares: -l/--log-level (the tool's own log),
// --sdk-log-level (the library's; DEPUTY_LOG_LEVEL is the fallback) and
// size-with-suffix parsing for CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace deputy::cli {

struct LogFlags {
    std::string log_level = "50";
    std::string sdk_log_level;  // empty: keep DEPUTY_LOG_LEVEL or the default
};

// Adds -l/--log-level and --sdk-log-level, both validated ("10".."70" or a name).
void add_log_flags(CLI::App &app, LogFlags *flags);
// Applies parsed flags to the two loggers.
void apply_log_flags(const LogFlags &flags);

// A validator for "4096", "4k", "2m", "1g".
CLI::Validator size_validator();
// Parses a value size_validator() accepted.
uint64_t parse_size_or_die(const std::string &text);

}  // namespace deputy::cli
