// src/common: status names, log levels, CPU lists and size units.
#include <deputy/log.h>
#include <deputy/status.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/affinity.h"
#include "common/log.h"
#include "common/units.h"

namespace {

using deputy::affinity::parse_cpu_list;
using deputy::units::format_size;
using deputy::units::parse_size;

struct StatusRow {
    dp_status_t status;
    const char *name;
};

// Every value of dp_status_t: the numbers are ABI, so they are spelled out.
const std::vector<StatusRow> kAllStatuses = {
    {DP_OK, "DP_OK"},
    {DP_INPROGRESS, "DP_INPROGRESS"},
    {DP_ERR_INVALID, "DP_ERR_INVALID"},
    {DP_ERR_TOO_LARGE, "DP_ERR_TOO_LARGE"},
    {DP_ERR_UNSUPPORTED, "DP_ERR_UNSUPPORTED"},
    {DP_ERR_MISMATCH, "DP_ERR_MISMATCH"},
    {DP_ERR_NO_AGENT, "DP_ERR_NO_AGENT"},
    {DP_ERR_AGENT_LOST, "DP_ERR_AGENT_LOST"},
    {DP_ERR_TIMEOUT, "DP_ERR_TIMEOUT"},
    {DP_ERR_DENIED, "DP_ERR_DENIED"},
    {DP_ERR_NOMEM, "DP_ERR_NOMEM"},
    {DP_ERR_RETRY, "DP_ERR_RETRY"},
    {DP_ERR_INTERNAL, "DP_ERR_INTERNAL"},
    {DP_ERR_IO, "DP_ERR_IO"},
    {DP_ERR_TRUNCATED, "DP_ERR_TRUNCATED"},
};

TEST(Status, AbiNumbersNeverChange) {
    EXPECT_EQ(DP_OK, 0);
    EXPECT_EQ(DP_INPROGRESS, 1);
    EXPECT_EQ(DP_ERR_INVALID, -1);
    EXPECT_EQ(DP_ERR_TOO_LARGE, -2);
    EXPECT_EQ(DP_ERR_UNSUPPORTED, -3);
    EXPECT_EQ(DP_ERR_MISMATCH, -4);
    EXPECT_EQ(DP_ERR_NO_AGENT, -5);
    EXPECT_EQ(DP_ERR_AGENT_LOST, -6);
    EXPECT_EQ(DP_ERR_TIMEOUT, -7);
    EXPECT_EQ(DP_ERR_DENIED, -8);
    EXPECT_EQ(DP_ERR_NOMEM, -9);
    EXPECT_EQ(DP_ERR_RETRY, -10);
    EXPECT_EQ(DP_ERR_INTERNAL, -11);
    EXPECT_EQ(DP_ERR_IO, -12);
    EXPECT_EQ(DP_ERR_TRUNCATED, -13);
}

TEST(Status, NameAndTextForEveryCode) {
    for (const StatusRow &row : kAllStatuses) {
        SCOPED_TRACE(row.name);
        EXPECT_STREQ(dp_status_name(row.status), row.name);
        const std::string text = dp_strerror(row.status);
        // The text starts with the name so a log line can be grepped by it,
        // then says something after ": ".
        ASSERT_EQ(text.rfind(std::string(row.name) + ": ", 0), 0u) << text;
        EXPECT_GT(text.size(), std::string(row.name).size() + 2) << text;
    }
}

TEST(Status, TextsAreDistinct) {
    for (size_t i = 0; i < kAllStatuses.size(); ++i)
        for (size_t j = i + 1; j < kAllStatuses.size(); ++j)
            EXPECT_STRNE(dp_strerror(kAllStatuses[i].status), dp_strerror(kAllStatuses[j].status));
}

TEST(Status, UnknownValues) {
    for (int value : {2, -14, 100, -100, INT_MAX, INT_MIN}) {
        SCOPED_TRACE(value);
        EXPECT_STREQ(dp_status_name(dp_status_t(value)), "DP_UNKNOWN");
        const char *text = dp_strerror(dp_status_t(value));
        ASSERT_NE(text, nullptr);
        EXPECT_STREQ(text, "DP_UNKNOWN: unknown status code");
    }
}

TEST(LogLevel, ParseNumbers) {
    for (int level = 10; level <= 70; level += 10) {
        auto parsed = deputy::log::parse_level(std::to_string(level));
        ASSERT_TRUE(parsed.has_value()) << level;
        EXPECT_EQ(*parsed, level);
        EXPECT_TRUE(deputy::log::is_valid_level(level));
    }
}

TEST(LogLevel, ParseNames) {
    struct Row {
        const char *text;
        int level;
    };
    for (const Row &row : {Row{"disable", 10}, Row{"CRITICAL", 20}, Row{"Error", 30},
                           Row{"warning", 40}, Row{"warn", 40}, Row{"WARN", 40}, Row{"info", 50},
                           Row{"DEBUG", 60}, Row{"trace", 70}, Row{"TrAcE", 70}}) {
        auto parsed = deputy::log::parse_level(row.text);
        ASSERT_TRUE(parsed.has_value()) << row.text;
        EXPECT_EQ(*parsed, row.level) << row.text;
    }
}

TEST(LogLevel, RejectsBadValues) {
    for (const char *text : {"", "0", "5", "15", "11", "69", "71", "80", "100", "0050", "-10",
                             "+10", " 10", "10 ", "1e1", "verbose", "warnings", "inf", "10x"}) {
        EXPECT_FALSE(deputy::log::parse_level(text).has_value()) << "'" << text << "'";
    }
    for (int level : {0, 1, 9, 11, 35, 75, 80, -10, INT_MAX})
        EXPECT_FALSE(deputy::log::is_valid_level(level)) << level;
}

TEST(LogLevel, NamesAndChoices) {
    EXPECT_STREQ(deputy::log::level_name(10), "DISABLE");
    EXPECT_STREQ(deputy::log::level_name(20), "CRITICAL");
    EXPECT_STREQ(deputy::log::level_name(30), "ERROR");
    EXPECT_STREQ(deputy::log::level_name(40), "WARNING");
    EXPECT_STREQ(deputy::log::level_name(50), "INFO");
    EXPECT_STREQ(deputy::log::level_name(60), "DEBUG");
    EXPECT_STREQ(deputy::log::level_name(70), "TRACE");
    EXPECT_STREQ(deputy::log::level_name(45), "?");
    EXPECT_EQ(deputy::log::level_choices(),
              "10 DISABLE, 20 CRITICAL, 30 ERROR, 40 WARNING, 50 INFO, 60 DEBUG, 70 TRACE");
}

// Restores the library level so the order of tests does not matter.
class SdkLevelTest : public ::testing::Test {
  protected:
    void SetUp() override { saved_ = dp_log_get_level(); }
    void TearDown() override { ASSERT_EQ(dp_log_set_level(saved_), DP_OK); }
    int saved_ = DP_LOG_WARNING;
};

TEST_F(SdkLevelTest, SetAndGetEveryLevel) {
    for (int level : {DP_LOG_DISABLE, DP_LOG_CRITICAL, DP_LOG_ERROR, DP_LOG_WARNING, DP_LOG_INFO,
                      DP_LOG_DEBUG, DP_LOG_TRACE}) {
        ASSERT_EQ(dp_log_set_level(level), DP_OK) << level;
        EXPECT_EQ(dp_log_get_level(), level);
        EXPECT_EQ(deputy::log::sdk_level(), level);
    }
    // The spdlog logger follows the numeric level.
    ASSERT_EQ(dp_log_set_level(DP_LOG_DISABLE), DP_OK);
    EXPECT_EQ(deputy::log::sdk().level(), spdlog::level::off);
    ASSERT_EQ(dp_log_set_level(DP_LOG_TRACE), DP_OK);
    EXPECT_EQ(deputy::log::sdk().level(), spdlog::level::trace);
    ASSERT_EQ(dp_log_set_level(DP_LOG_WARNING), DP_OK);
    EXPECT_EQ(deputy::log::sdk().level(), spdlog::level::warn);
}

TEST_F(SdkLevelTest, InvalidLevelIsRejectedAndKeepsTheOldOne) {
    ASSERT_EQ(dp_log_set_level(DP_LOG_ERROR), DP_OK);
    for (int level : {0, 15, 45, 80, -1, 1000}) {
        EXPECT_EQ(dp_log_set_level(level), DP_ERR_INVALID) << level;
        EXPECT_EQ(dp_log_get_level(), DP_LOG_ERROR);
        EXPECT_EQ(deputy::log::sdk().level(), spdlog::level::err);
    }
}

TEST(LogLevel, AppLevel) {
    const int saved = deputy::log::app_level();
    EXPECT_TRUE(deputy::log::set_app_level(60));
    EXPECT_EQ(deputy::log::app_level(), 60);
    EXPECT_EQ(deputy::log::app().level(), spdlog::level::debug);
    EXPECT_FALSE(deputy::log::set_app_level(55));
    EXPECT_EQ(deputy::log::app_level(), 60);
    EXPECT_TRUE(deputy::log::set_app_level(saved));
}

// DEPUTY_LOG_LEVEL is read once, when the sdk logger is first used, which in
// this process has already happened: it is checked in a child process that
// runs the logger for the first time (a death test forks before running it).
void exit_with_initial_level() {
    std::exit(dp_log_get_level());
}

TEST(LogLevelEnv, NumberNameAndBadValue) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    struct Row {
        const char *env;
        int level;
    };
    for (const Row &row : {Row{"60", 60}, Row{"trace", 70}, Row{"ERROR", 30}, Row{"10", 10},
                           Row{"bogus", 40}, Row{"45", 40}, Row{"", 40}}) {
        SCOPED_TRACE(row.env);
        ASSERT_EQ(setenv("DEPUTY_LOG_LEVEL", row.env, 1), 0);
        EXPECT_EXIT(exit_with_initial_level(), ::testing::ExitedWithCode(row.level), "");
    }
    // A bad value is reported, not silently dropped.
    ASSERT_EQ(setenv("DEPUTY_LOG_LEVEL", "bogus", 1), 0);
    EXPECT_EXIT(exit_with_initial_level(), ::testing::ExitedWithCode(40),
                "ignoring DEPUTY_LOG_LEVEL=bogus");
    ASSERT_EQ(unsetenv("DEPUTY_LOG_LEVEL"), 0);
    EXPECT_EXIT(exit_with_initial_level(), ::testing::ExitedWithCode(40), "");
}

TEST(CpuList, Parses) {
    struct Row {
        const char *text;
        std::vector<int> cpus;
    };
    for (const Row &row :
         {Row{"0", {0}}, Row{"0,2-3", {0, 2, 3}}, Row{"0-3", {0, 1, 2, 3}}, Row{"5,1", {5, 1}},
          Row{"2-2", {2}}, Row{"0,2-3,5", {0, 2, 3, 5}}, Row{"10-12,7", {10, 11, 12, 7}}}) {
        std::vector<int> cpus = {99};  // must be replaced, not appended to
        std::string error;
        ASSERT_EQ(parse_cpu_list(row.text, &cpus, &error), DP_OK) << row.text << ": " << error;
        EXPECT_EQ(cpus, row.cpus) << row.text;
    }
}

TEST(CpuList, ErrorsNameTheElement) {
    struct Row {
        const char *text;
        const char *element;  // quoted in the message
    };
    for (const Row &row : {Row{"0,x", "'x'"}, Row{"3-1", "'3-1'"}, Row{"0,,1", "''"},
                           Row{"1-", "'1-'"}, Row{"-1", "'-1'"}, Row{"0,2-3,a-b", "'a-b'"},
                           Row{"1,2,", "''"}, Row{"1.5", "'1.5'"}, Row{"0-1-2", "'0-1-2'"}}) {
        std::vector<int> cpus;
        std::string error;
        EXPECT_EQ(parse_cpu_list(row.text, &cpus, &error), DP_ERR_INVALID) << row.text;
        EXPECT_NE(error.find(std::string("bad CPU list element ") + row.element), std::string::npos)
            << row.text << " -> " << error;
    }
    std::vector<int> cpus;
    std::string error;
    EXPECT_EQ(parse_cpu_list("", &cpus, &error), DP_ERR_INVALID);
    EXPECT_EQ(error, "empty CPU list");
}

TEST(Units, ParseSize) {
    struct Row {
        const char *text;
        uint64_t bytes;
    };
    for (const Row &row :
         {Row{"0", 0}, Row{"1", 1}, Row{"4096", 4096}, Row{"4k", 4096}, Row{"4K", 4096},
          Row{"2m", 2u << 20}, Row{"2M", 2u << 20}, Row{"1g", 1ull << 30}, Row{"1t", 1ull << 40},
          Row{"64KiB", 65536}, Row{"64kb", 65536}, Row{"64ki", 65536}, Row{"3MB", 3u << 20},
          Row{"18446744073709551615", UINT64_MAX}, Row{"16777215t", 16777215ull << 40}}) {
        auto parsed = parse_size(row.text);
        ASSERT_TRUE(parsed.has_value()) << row.text;
        EXPECT_EQ(*parsed, row.bytes) << row.text;
    }
}

TEST(Units, ParseSizeRejects) {
    for (const char *text : {"", "k", "-1", "4x", "4kk", "4 k", " 4", "1.5m", "b", "4p",
                             "18446744073709551616", "16777216t", "17179869184g", "4ib"}) {
        EXPECT_FALSE(parse_size(text).has_value()) << "'" << text << "'";
    }
}

TEST(Units, FormatSize) {
    EXPECT_EQ(format_size(0), "0");
    EXPECT_EQ(format_size(1), "1");
    EXPECT_EQ(format_size(1536), "1536");
    EXPECT_EQ(format_size(4096), "4K");
    EXPECT_EQ(format_size(3ull << 20), "3M");
    EXPECT_EQ(format_size(1ull << 30), "1G");
    EXPECT_EQ(format_size(5ull << 40), "5T");
    EXPECT_EQ(format_size(1ull << 50), "1024T");  // no suffix above T
    EXPECT_EQ(format_size(2097155), "2097155");
    // format then parse is the identity.
    for (uint64_t bytes : {uint64_t(0), uint64_t(7), uint64_t(65537), uint64_t(1) << 21,
                           (uint64_t(3) << 30) + 1024, uint64_t(1) << 50}) {
        auto parsed = parse_size(format_size(bytes));
        ASSERT_TRUE(parsed.has_value()) << bytes;
        EXPECT_EQ(*parsed, bytes);
    }
}

}  // namespace
