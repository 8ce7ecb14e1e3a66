// `--json FILE` (tools/common/cli_json): every flag can come from a JSON
// object, the command line wins, and a bad key or value is an error naming it.
#include "common/cli_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/cli_common.h"

namespace {

// The shape of a deputy subcommand: ints, a size with suffixes, a string, a
// flag, a list, plus the shared log flags.
struct Options {
    int iterations = 1;
    uint32_t count = 2;
    double ratio = 0.5;
    std::string msg_size = "4k";
    std::string name = "default";
    bool verify = false;
    std::vector<int> cpus;
    deputy::cli::LogFlags log;
};

class CliJsonTest : public ::testing::Test {
  protected:
    void SetUp() override {
        app_.add_option("-i,--iterations", opt_.iterations, "iterations");
        app_.add_option("-n,--count", opt_.count, "buffer count");
        app_.add_option("--ratio", opt_.ratio, "a float");
        app_.add_option("-s,--msg-size", opt_.msg_size, "transfer size")
            ->check(deputy::cli::size_validator());
        app_.add_option("--name", opt_.name, "a string");
        app_.add_flag("-v,--verify", opt_.verify, "a flag");
        app_.add_option("-k,--cpus", opt_.cpus, "a list");
        deputy::cli::add_log_flags(app_, &opt_.log);
        deputy::cli::add_json_config(app_);
    }

    void TearDown() override {
        for (const std::string &path : files_) std::remove(path.c_str());
    }

    // Writes `text` to a fresh file and returns its path.
    std::string write_json(const std::string &text) {
        char path[] = "/tmp/deputy_cli_json_XXXXXX";
        int fd = mkstemp(path);
        EXPECT_GE(fd, 0);
        close(fd);
        std::ofstream(path) << text;
        files_.push_back(path);
        return path;
    }

    // Parses argv (without the program name); rethrows CLI11's errors.
    void parse(std::vector<std::string> args) {
        std::vector<const char *> argv = {"deputy-test"};
        for (const std::string &a : args) argv.push_back(a.c_str());
        app_.parse(int(argv.size()), argv.data());
    }

    // Parses and returns the error message; fails the test if parsing worked.
    std::string parse_error(std::vector<std::string> args) {
        try {
            parse(std::move(args));
        } catch (const CLI::ParseError &e) {
            return e.what();
        }
        ADD_FAILURE() << "parse succeeded";
        return {};
    }

    CLI::App app_{"cli_json test"};
    Options opt_;
    std::vector<std::string> files_;
};

TEST_F(CliJsonTest, NoFileKeepsDefaults) {
    parse({});
    EXPECT_EQ(opt_.iterations, 1);
    EXPECT_EQ(opt_.msg_size, "4k");
    EXPECT_EQ(opt_.name, "default");
    EXPECT_FALSE(opt_.verify);
    EXPECT_TRUE(opt_.cpus.empty());
}

TEST_F(CliJsonTest, FileSetsEveryKind) {
    std::string path = write_json(R"({
        "iterations": 17,
        "count": 9,
        "ratio": 2.25,
        "msg-size": "2m",
        "name": "from-file",
        "verify": true,
        "cpus": [1, 3, 5],
        "log-level": "debug"
    })");
    parse({"--json", path});
    EXPECT_EQ(opt_.iterations, 17);
    EXPECT_EQ(opt_.count, 9u);
    EXPECT_EQ(opt_.ratio, 2.25);
    EXPECT_EQ(opt_.msg_size, "2m");
    EXPECT_EQ(deputy::cli::parse_size("-s", opt_.msg_size), 2u << 20);
    EXPECT_EQ(opt_.name, "from-file");
    EXPECT_TRUE(opt_.verify);
    EXPECT_EQ(opt_.cpus, (std::vector<int>{1, 3, 5}));
    EXPECT_EQ(opt_.log.log_level, "debug");
}

TEST_F(CliJsonTest, FalseFlagAndNumericSize) {
    std::string path = write_json(R"({"verify": false, "msg-size": 65536, "iterations": -3})");
    parse({"--json", path});
    EXPECT_FALSE(opt_.verify);
    EXPECT_EQ(opt_.msg_size, "65536");
    EXPECT_EQ(opt_.iterations, -3);
}

TEST_F(CliJsonTest, UnderscoreAliasAndOneLetterKeys) {
    std::string path = write_json(R"({"msg_size": "64k", "i": 4, "log_level": 60})");
    parse({"--json", path});
    EXPECT_EQ(opt_.msg_size, "64k");
    EXPECT_EQ(opt_.iterations, 4);
    EXPECT_EQ(opt_.log.log_level, "60");
}

TEST_F(CliJsonTest, CommandLineOverridesFile) {
    std::string path = write_json(
        R"({"iterations": 17, "msg_size": "2m", "name": "file", "cpus": [1, 2], "count": 3})");
    // The file may come before or after the flags it loses to.
    parse({"-i", "5", "--json", path, "--name", "cli", "-k", "7", "-s", "1k"});
    EXPECT_EQ(opt_.iterations, 5);
    EXPECT_EQ(opt_.name, "cli");
    EXPECT_EQ(opt_.cpus, (std::vector<int>{7}));
    EXPECT_EQ(opt_.msg_size, "1k");
    EXPECT_EQ(opt_.count, 3u);  // not on the command line: the file's
}

TEST_F(CliJsonTest, CommandLineFlagOverridesFileFalse) {
    std::string path = write_json(R"({"verify": false})");
    parse({"--json", path, "-v"});
    EXPECT_TRUE(opt_.verify);
}

TEST_F(CliJsonTest, UnknownKeyIsNamed) {
    std::string path = write_json(R"({"iterations": 2, "itterations": 3})");
    std::string error = parse_error({"--json", path});
    EXPECT_NE(error.find("unknown key 'itterations'"), std::string::npos) << error;
    // The message lists what is valid, so a typo is easy to fix.
    EXPECT_NE(error.find("valid keys: iterations, count, ratio, msg-size, name, verify, cpus, "
                         "log-level, sdk-log-level"),
              std::string::npos)
        << error;
    // Every key is checked before any is applied: a bad file changes nothing.
    EXPECT_EQ(opt_.iterations, 1);
}

TEST_F(CliJsonTest, JsonKeyItselfIsNotAFlagOfTheFile) {
    std::string path = write_json(R"({"json": "/etc/passwd"})");
    std::string error = parse_error({"--json", path});
    EXPECT_NE(error.find("unknown key 'json'"), std::string::npos) << error;
}

TEST_F(CliJsonTest, WrongTypesNameTheKey) {
    struct Row {
        const char *json;
        const char *message;
    };
    for (const Row &row : {
             Row{R"({"iterations": "five"})", "key 'iterations' expects an integer, got string"},
             Row{R"({"iterations": 1.5})", "key 'iterations' expects an integer, got number"},
             Row{R"({"iterations": true})", "key 'iterations' expects an integer, got boolean"},
             Row{R"({"count": -1})", "key 'count' expects a non-negative integer, got number"},
             Row{R"({"ratio": "x"})", "key 'ratio' expects a number, got string"},
             Row{R"({"verify": 1})", "key 'verify' expects true or false, got number"},
             Row{R"({"verify": "yes"})", "key 'verify' expects true or false, got string"},
             Row{R"({"name": true})", "key 'name' expects a string or number, got boolean"},
             Row{R"({"name": {"a": 1}})", "key 'name' expects a value, got object"},
             Row{R"({"name": null})", "key 'name' expects a value, got null"},
             Row{R"({"iterations": [1, 2]})", "key 'iterations' expects a single value, got array"},
             Row{R"({"msg_size": false})",
                 "key 'msg_size' expects a string or number, got boolean"},
             Row{R"({"cpus": [[1]]})", "key 'cpus' expects an array of scalars, got array"},
             Row{R"({"cpus": ["one"]})", "key 'cpus'"},
         }) {
        SCOPED_TRACE(row.json);
        std::string path = write_json(row.json);
        // A fresh app per case: CLI11 keeps parse results between calls.
        CLI::App app{"t"};
        Options opt;
        app.add_option("-i,--iterations", opt.iterations);
        app.add_option("-n,--count", opt.count);
        app.add_option("--ratio", opt.ratio);
        app.add_option("-s,--msg-size", opt.msg_size)->check(deputy::cli::size_validator());
        app.add_option("--name", opt.name);
        app.add_flag("-v,--verify", opt.verify);
        app.add_option("-k,--cpus", opt.cpus);
        deputy::cli::add_json_config(app);
        std::vector<const char *> argv = {"t", "--json", path.c_str()};
        try {
            app.parse(int(argv.size()), argv.data());
            ADD_FAILURE() << "parse succeeded";
        } catch (const CLI::ParseError &e) {
            EXPECT_NE(std::string(e.what()).find(row.message), std::string::npos) << e.what();
        }
    }
}

TEST_F(CliJsonTest, InvalidJsonIsAClearError) {
    std::string path = write_json(R"({"iterations": 5,)");
    std::string error = parse_error({"--json", path});
    EXPECT_NE(error.find("--json " + path + ": not valid JSON"), std::string::npos) << error;
}

TEST_F(CliJsonTest, TopLevelMustBeAnObject) {
    std::string path = write_json(R"([{"iterations": 5}])");
    std::string error = parse_error({"--json", path});
    EXPECT_NE(error.find("--json " + path + ": expected one JSON object"), std::string::npos)
        << error;
}

TEST_F(CliJsonTest, CommentsAreAllowed) {
    std::string path =
        write_json("{\n  // why: 17 iterations warm the cache\n  \"iterations\": 17\n}");
    parse({"--json", path});
    EXPECT_EQ(opt_.iterations, 17);
}

TEST_F(CliJsonTest, MissingFileIsNamed) {
    std::string error = parse_error({"--json", "/nonexistent/deputy.json"});
    EXPECT_NE(error.find("/nonexistent/deputy.json"), std::string::npos) << error;
}

TEST_F(CliJsonTest, ValidatorsApplyToFileValues) {
    std::string path = write_json(R"({"msg_size": "4q"})");
    std::string error = parse_error({"--json", path});
    EXPECT_NE(error.find("size '4q' is not a byte count"), std::string::npos) << error;
}

TEST_F(CliJsonTest, LogLevelValidatedFromFile) {
    std::string path = write_json(R"({"log-level": 45})");
    std::string error = parse_error({"--json", path});
    EXPECT_NE(error.find("log level '45' is not one of"), std::string::npos) << error;
}

// A message naming the flag and its value, what a mistyped size gets
// from every command.
std::string size_error(const std::function<void()> &parse) {
    try {
        parse();
    } catch (const CLI::ValidationError &e) {
        return e.what();
    }
    return "(no error)";
}

TEST(CliCommon, SizeValidatorAndParse) {
    using deputy::cli::parse_size;
    using deputy::cli::parse_size_list;
    EXPECT_EQ(parse_size("-s", "4k"), 4096u);
    EXPECT_EQ(parse_size("-s", "3"), 3u);
    EXPECT_EQ(size_error([] { parse_size("--page-size", "4x"); }),
              "--page-size 4x: not a size (examples: 64, 4k, 2m, 1g)");
    EXPECT_EQ(parse_size_list("-s", "64,4k,1m"), (std::vector<uint64_t>{64, 4096, 1 << 20}));
    EXPECT_EQ(parse_size_list("--load", "2g"), (std::vector<uint64_t>{2ull << 30}));
    EXPECT_EQ(size_error([] { parse_size_list("-s", "64,4q"); }),
              "-s 4q: not a size (examples: 64, 4k, 2m, 1g)");
    EXPECT_EQ(size_error([] { parse_size_list("-s", "64,"); }),
              "-s : not a size (examples: 64, 4k, 2m, 1g)");
    CLI::App app{"t"};
    std::string size;
    app.add_option("-s", size)->check(deputy::cli::size_validator());
    std::vector<const char *> argv = {"t", "-s", "1g"};
    app.parse(int(argv.size()), argv.data());
    EXPECT_EQ(size, "1g");
}

TEST(CliCommon, LogFlagsFromCommandLine) {
    CLI::App app{"t"};
    deputy::cli::LogFlags flags;
    deputy::cli::add_log_flags(app, &flags);
    std::vector<const char *> argv = {"t", "-l", "trace", "--sdk-log-level", "30"};
    app.parse(int(argv.size()), argv.data());
    EXPECT_EQ(flags.log_level, "trace");
    EXPECT_EQ(flags.sdk_log_level, "30");

    CLI::App bad{"t"};
    deputy::cli::LogFlags bad_flags;
    deputy::cli::add_log_flags(bad, &bad_flags);
    std::vector<const char *> bad_argv = {"t", "--sdk-log-level", "71"};
    EXPECT_THROW(bad.parse(int(bad_argv.size()), bad_argv.data()), CLI::ValidationError);
}

}  // namespace
