#include "common/cli_common.h"

#include <algorithm>

#include "common/log.h"
#include "common/units.h"

namespace deputy::cli {
namespace {

// What every size flag accepts (common/units.h), as each message says it.
constexpr const char *kSizeExamples = "64, 4k, 2m, 1g";

CLI::Validator level_validator() {
    return CLI::Validator(
        [](std::string &value) -> std::string {
            if (log::parse_level(value)) return {};
            return "log level '" + value + "' is not one of " + log::level_choices() +
                   " (numbers or names)";
        },
        "LEVEL", "log level");
}

}  // namespace

void add_log_flags(CLI::App &app, LogFlags *flags) {
    app.add_option("-l,--log-level", flags->log_level,
                   "tool log level: 10 DISABLE, 20 CRITICAL, 30 ERROR, 40 WARNING, 50 INFO, "
                   "60 DEBUG, 70 TRACE")
        ->check(level_validator())
        ->capture_default_str();
    app.add_option("--sdk-log-level", flags->sdk_log_level,
                   "library log level (same scale; default DEPUTY_LOG_LEVEL or 40)")
        ->check(level_validator());
    app.add_option("--log-format", flags->log_format,
                   "log lines: plain, or doca ([time][thread][logger][level][file:line][function] "
                   "message, as DOCA's sample programs print them)")
        ->check(CLI::IsMember({"plain", "doca"}))
        ->capture_default_str();
}

void apply_log_flags(const LogFlags &flags) {
    log::set_format(*log::parse_format(flags.log_format));
    log::set_app_level(*log::parse_level(flags.log_level));
    if (!flags.sdk_log_level.empty()) log::set_sdk_level(*log::parse_level(flags.sdk_log_level));
}

CLI::Validator size_validator() {
    return CLI::Validator(
        [](std::string &value) -> std::string {
            if (units::parse_size(value)) return {};
            return "size '" + value + "' is not a byte count (examples: " + kSizeExamples +
                   ")";
        },
        "SIZE", "size");
}

void usage_error(const std::string &message) { throw CLI::ValidationError(message); }

std::string not_a_size(const std::string &flag, const std::string &text) {
    return flag + " " + text + ": not a size (examples: " + kSizeExamples + ")";
}

uint64_t parse_size(const std::string &flag, const std::string &text) {
    auto size = units::parse_size(text);
    if (!size) usage_error(not_a_size(flag, text));
    return *size;
}

std::vector<uint64_t> parse_size_list(const std::string &flag, const std::string &text) {
    std::vector<uint64_t> sizes;
    for (size_t at = 0;;) {
        const size_t comma = std::min(text.find(',', at), text.size());
        sizes.push_back(parse_size(flag, text.substr(at, comma - at)));
        if (comma == text.size()) return sizes;
        at = comma + 1;
    }
}

}  // namespace deputy::cli
