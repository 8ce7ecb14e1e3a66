// Logging: two spdlog loggers with DOCA-style numeric levels.
//  - "sdk": the library's own messages; level from dp_log_set_level(),
//    --sdk-log-level, or DEPUTY_LOG_LEVEL.
//  - "app": the running tool's messages; level from -l/--log-level.
#pragma once

#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <string_view>

namespace deputy::log {

// Parses "10".."70" or a name (disable, critical, error, warning, info, debug,
// trace; any case). Returns nullopt for anything else.
std::optional<int> parse_level(std::string_view text);
// "WARNING" for 40, and so on; "?" for a non-level.
const char *level_name(int level);
// True for the seven valid numbers.
bool is_valid_level(int level);
// A short list for error messages: "10 DISABLE, 20 CRITICAL, ...".
std::string level_choices();

spdlog::logger &sdk();
spdlog::logger &app();

// Return false for an invalid level (the logger keeps its level).
bool set_sdk_level(int level);
bool set_app_level(int level);
int sdk_level();
int app_level();

}  // namespace deputy::log

// Library logging shorthands.
#define DP_LOG_TRACE(...) SPDLOG_LOGGER_TRACE(&::deputy::log::sdk(), __VA_ARGS__)
#define DP_LOG_DEBUG(...) ::deputy::log::sdk().debug(__VA_ARGS__)
#define DP_LOG_INFO(...) ::deputy::log::sdk().info(__VA_ARGS__)
#define DP_LOG_WARN(...) ::deputy::log::sdk().warn(__VA_ARGS__)
#define DP_LOG_ERROR(...) ::deputy::log::sdk().error(__VA_ARGS__)
