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

// How a line looks: kPlain "[12:00:00.123456] [app] [info] message";
// kDoca "[12:00:00:123456][tid][app][INF][file.cc:42][function] message",
// as DOCA's sample programs print it (file and function for the calls made
// through the macros below).
enum class Format { kPlain, kDoca };
// "plain" or "doca"; nullopt for anything else.
std::optional<Format> parse_format(std::string_view text);
// For both loggers, now and when they are first made.
void set_format(Format format);

spdlog::logger &sdk();
spdlog::logger &app();

// Return false for an invalid level (the logger keeps its level).
bool set_sdk_level(int level);
bool set_app_level(int level);
int sdk_level();
int app_level();

}  // namespace deputy::log

// Logging shorthands: each line carries its file, line and function (the
// DOCA format prints them). Trace in the library compiles out unless
// SPDLOG_ACTIVE_LEVEL asks for it: it sits on hot paths.
#define DP_LOG_AT(logger, lvl, ...) \
    SPDLOG_LOGGER_CALL(&(logger), ::spdlog::level::lvl, __VA_ARGS__)
#define DP_LOG_TRACE(...) SPDLOG_LOGGER_TRACE(&::deputy::log::sdk(), __VA_ARGS__)
#define DP_LOG_DEBUG(...) DP_LOG_AT(::deputy::log::sdk(), debug, __VA_ARGS__)
#define DP_LOG_INFO(...) DP_LOG_AT(::deputy::log::sdk(), info, __VA_ARGS__)
#define DP_LOG_WARN(...) DP_LOG_AT(::deputy::log::sdk(), warn, __VA_ARGS__)
#define DP_LOG_ERROR(...) DP_LOG_AT(::deputy::log::sdk(), err, __VA_ARGS__)
// The running tool's messages.
#define DP_APP_TRACE(...) DP_LOG_AT(::deputy::log::app(), trace, __VA_ARGS__)
#define DP_APP_DEBUG(...) DP_LOG_AT(::deputy::log::app(), debug, __VA_ARGS__)
#define DP_APP_INFO(...) DP_LOG_AT(::deputy::log::app(), info, __VA_ARGS__)
#define DP_APP_WARN(...) DP_LOG_AT(::deputy::log::app(), warn, __VA_ARGS__)
#define DP_APP_ERROR(...) DP_LOG_AT(::deputy::log::app(), err, __VA_ARGS__)
#define DP_APP_CRITICAL(...) DP_LOG_AT(::deputy::log::app(), critical, __VA_ARGS__)
