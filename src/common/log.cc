#include "common/log.h"

#include <deputy/log.h>
#include <deputy/version.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "common/log_quiet.h"

namespace deputy::log {
namespace {

struct LevelRow {
    int number;
    const char *name;
    const char *tag;  // the level as DOCA's logs print it
    spdlog::level::level_enum spd;
};

constexpr std::array<LevelRow, 7> kLevels{{
    {DP_LOG_DISABLE, "DISABLE", "", spdlog::level::off},
    {DP_LOG_CRITICAL, "CRITICAL", "CRIT", spdlog::level::critical},
    {DP_LOG_ERROR, "ERROR", "ERR", spdlog::level::err},
    {DP_LOG_WARNING, "WARNING", "WARN", spdlog::level::warn},
    {DP_LOG_INFO, "INFO", "INF", spdlog::level::info},
    {DP_LOG_DEBUG, "DEBUG", "DBG", spdlog::level::debug},
    {DP_LOG_TRACE, "TRACE", "TRC", spdlog::level::trace},
}};

const LevelRow *row_of(int level) {
    for (const auto &row : kLevels)
        if (row.number == level) return &row;
    return nullptr;
}

// %* in the DOCA pattern: the level's tag from the table above.
class LevelTag final : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg &msg, const std::tm &,
                spdlog::memory_buf_t &dest) override {
        for (const auto &row : kLevels) {
            if (row.spd != msg.level) continue;
            dest.append(std::string_view(row.tag));
            return;
        }
    }
    std::unique_ptr<custom_flag_formatter> clone() const override {
        return std::make_unique<LevelTag>();
    }
};

// The plain format, and the one DOCA's sample programs print
// ([time][thread][component][level][file:line][function] message), which
// the users of those samples read and grep.
void apply_pattern(spdlog::logger &logger, Format format) {
    switch (format) {
        case Format::kPlain:
            logger.set_pattern("[%H:%M:%S.%f] [%n] [%^%l%$] %v");
            return;
        case Format::kDoca: {
            auto formatter = std::make_unique<spdlog::pattern_formatter>();
            formatter->add_flag<LevelTag>('*').set_pattern(
                "[%H:%M:%S:%f][%t][%n][%*][%s:%#][%!] %v");
            logger.set_formatter(std::move(formatter));
            return;
        }
    }
}

Format g_format = Format::kPlain;

// Both loggers write to stderr so benchmark tables on stdout stay clean.
// Not registered in spdlog's registry: that one lives in libspdlog.so and
// is shared by every image of the process, and a program that links this
// code statically (deputy-bench-coll) while libdeputy.so is loaded too
// (preloaded by libdeputy-mpi under `deputy mpirun`) would register
// "deputy" twice, which spdlog answers with an exception: an abort.
thread_local Quiet *t_quiet = nullptr;

// The library logger's sink: a line at warning level or above goes to the
// thread's Quiet when it has one (log_quiet.h), to stderr otherwise.
class QuietAwareSink final : public spdlog::sinks::sink {
  public:
    void log(const spdlog::details::log_msg &msg) override {
        if (t_quiet != nullptr && msg.level >= spdlog::level::warn) {
            t_quiet->keep(std::string(msg.payload.data(), msg.payload.size()));
            return;
        }
        inner_->log(msg);
    }
    void flush() override { inner_->flush(); }
    void set_pattern(const std::string &pattern) override { inner_->set_pattern(pattern); }
    void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
        inner_->set_formatter(std::move(formatter));
    }

  private:
    std::shared_ptr<spdlog::sinks::sink> inner_ =
        std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
};

std::shared_ptr<spdlog::logger> make_logger(const char *name, int level, bool quiet_aware) {
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (quiet_aware) sink = std::make_shared<QuietAwareSink>();
    else sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto logger = std::make_shared<spdlog::logger>(name, std::move(sink));
    apply_pattern(*logger, g_format);
    logger->set_level(row_of(level)->spd);
    return logger;
}

int g_sdk_level = DP_LOG_WARNING;
int g_app_level = DP_LOG_INFO;

int initial_sdk_level() {
    const char *env = std::getenv("DEPUTY_LOG_LEVEL");
    if (env == nullptr || *env == '\0') return DP_LOG_WARNING;
    if (auto level = parse_level(env)) return *level;
    // A bad environment value must not be silent, nor fatal for a library.
    std::fprintf(stderr, "deputy: ignoring DEPUTY_LOG_LEVEL=%s (expected %s)\n", env,
                 level_choices().c_str());
    return DP_LOG_WARNING;
}

}  // namespace

std::optional<int> parse_level(std::string_view text) {
    if (text.empty()) return std::nullopt;
    if (std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit((unsigned char)c); })) {
        if (text.size() > 3) return std::nullopt;
        int number = std::atoi(std::string(text).c_str());
        return is_valid_level(number) ? std::optional<int>(number) : std::nullopt;
    }
    std::string upper(text);
    for (char &c : upper) c = static_cast<char>(std::toupper((unsigned char)c));
    if (upper == "WARN") upper = "WARNING";
    for (const auto &row : kLevels)
        if (upper == row.name) return row.number;
    return std::nullopt;
}

const char *level_name(int level) {
    const LevelRow *row = row_of(level);
    return row ? row->name : "?";
}

bool is_valid_level(int level) { return row_of(level) != nullptr; }

std::string level_choices() {
    std::string out;
    for (const auto &row : kLevels) {
        if (!out.empty()) out += ", ";
        out += std::to_string(row.number) + " " + row.name;
    }
    return out;
}

spdlog::logger &sdk() {
    static std::shared_ptr<spdlog::logger> logger = [] {
        g_sdk_level = initial_sdk_level();
        return make_logger("deputy", g_sdk_level, true);
    }();
    return *logger;
}

spdlog::logger &app() {
    static std::shared_ptr<spdlog::logger> logger = make_logger("app", g_app_level, false);
    return *logger;
}

bool set_sdk_level(int level) {
    const LevelRow *row = row_of(level);
    if (row == nullptr) return false;
    sdk().set_level(row->spd);
    g_sdk_level = level;
    return true;
}

bool set_app_level(int level) {
    const LevelRow *row = row_of(level);
    if (row == nullptr) return false;
    app().set_level(row->spd);
    g_app_level = level;
    return true;
}

std::optional<Format> parse_format(std::string_view text) {
    if (text == "plain") return Format::kPlain;
    if (text == "doca") return Format::kDoca;
    return std::nullopt;
}

void set_format(Format format) {
    g_format = format;
    apply_pattern(sdk(), format);
    apply_pattern(app(), format);
}

int sdk_level() {
    sdk();  // make sure DEPUTY_LOG_LEVEL was read
    return g_sdk_level;
}
int app_level() { return g_app_level; }

Quiet::Quiet() : outer_(t_quiet) { t_quiet = this; }
Quiet::~Quiet() { t_quiet = outer_; }
Quiet *quiet_scope() { return t_quiet; }

}  // namespace deputy::log

extern "C" dp_status_t dp_log_set_level(int level) {
    return deputy::log::set_sdk_level(level) ? DP_OK : DP_ERR_INVALID;
}

extern "C" int dp_log_get_level(void) { return deputy::log::sdk_level(); }

extern "C" const char *dp_version(void) { return DEPUTY_VERSION_STRING; }
