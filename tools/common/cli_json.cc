#include "common/cli_json.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace deputy::cli {
namespace {

using nlohmann::json;

// Why not CLI11's own config-file support: in CLI11 2.1 only the root app
// reads its config file, and our flags live on subcommands (`deputy bench
// mover --json f`). So `--json` is an option whose callback, run after the
// command line was parsed, feeds the file's values to the options the
// command line left unset, through the same add_result/run_callback path
// CLI11 uses for config files (validators and conversions included).

std::string describe(const json &value) {
    std::string dumped = value.dump();
    if (dumped.size() > 40) dumped = dumped.substr(0, 37) + "...";
    return std::string(value.type_name()) + " " + dumped;
}

// Scalars become the strings CLI11 would have seen on the command line.
std::string to_input(const json &value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
    return value.dump();
}

CLI::Option *find_option(CLI::App &app, const std::string &key) {
    if (key.empty() || key == "json" || key == "help") return nullptr;
    std::string dashed = key;
    for (char &c : dashed)
        if (c == '_') c = '-';
    CLI::Option *option = app.get_option_no_throw("--" + dashed);
    if (option == nullptr && key.size() == 1) option = app.get_option_no_throw("-" + key);
    if (option != nullptr && !option->get_configurable()) return nullptr;
    return option;
}

std::string valid_keys(const CLI::App &app) {
    std::string out;
    for (const CLI::Option *option : app.get_options()) {
        if (!option->get_configurable() || option->get_lnames().empty()) continue;
        const std::string &name = option->get_lnames().front();
        if (name == "json" || name == "help") continue;
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

void check_type(const std::string &key, const CLI::Option &option, const json &value) {
    const std::string type = option.get_type_name();
    auto fail = [&](const char *expected) {
        throw CLI::ConfigError("--json: key '" + key + "' expects " + expected + ", got " +
                               describe(value));
    };
    if (option.get_expected_min() == 0) {  // a flag
        if (!value.is_boolean()) fail("true or false");
        return;
    }
    if (value.is_array()) {
        if (option.get_expected_max() <= 1) fail("a single value");
        for (const json &element : value)
            if (element.is_object() || element.is_array() || element.is_null())
                fail("an array of scalars");
        return;
    }
    if (value.is_object() || value.is_null()) fail("a value");
    if (type.rfind("UINT", 0) == 0) {
        if (!value.is_number_unsigned()) fail("a non-negative integer");
    } else if (type.rfind("INT", 0) == 0) {
        if (!value.is_number_integer()) fail("an integer");
    } else if (type.rfind("FLOAT", 0) == 0) {
        if (!value.is_number()) fail("a number");
    } else if (value.is_boolean()) {
        fail("a string or number");
    }
}

// DOCA's programs read a file of groups ({"doca_general_flags": {...},
// "doca_program_flags": {...}}) whose keys are the flags' names, so a user
// of its samples can bring that file as it is: the groups are opened into
// one object of flags. A flag given twice is refused, never overridden.
constexpr const char *kGroups[] = {"doca_general_flags", "doca_program_flags"};

json open_groups(const json &doc, const std::string &path) {
    json flat = json::object();
    auto put = [&](const std::string &key, const json &value) {
        if (flat.contains(key))
            throw CLI::ConfigError("--json " + path + ": key '" + key + "' is given twice");
        flat[key] = value;
    };
    for (const auto &[key, value] : doc.items()) {
        const bool group = std::find(std::begin(kGroups), std::end(kGroups), key) !=
                           std::end(kGroups);
        if (!group) {
            put(key, value);
            continue;
        }
        if (!value.is_object())
            throw CLI::ConfigError("--json " + path + ": '" + key +
                                   "' expects an object {\"flag-name\": value}, got " +
                                   describe(value));
        for (const auto &[inner, inner_value] : value.items()) put(inner, inner_value);
    }
    return flat;
}

void apply_json_file(CLI::App &app, const std::string &path) {
    std::ifstream in(path);
    if (!in) throw CLI::ConfigError("--json " + path + ": cannot read the file");
    json doc;
    try {
        doc = json::parse(in, nullptr, true, /*ignore_comments=*/true);
    } catch (const json::parse_error &e) {
        throw CLI::ConfigError("--json " + path + ": not valid JSON: " + e.what());
    }
    if (!doc.is_object())
        throw CLI::ConfigError("--json " + path + ": expected one JSON object {\"flag-name\": value}");
    doc = open_groups(doc, path);
    // Check every key before applying any, so a bad file changes nothing.
    std::vector<std::pair<CLI::Option *, const json *>> updates;
    for (const auto &[key, value] : doc.items()) {
        CLI::Option *option = find_option(app, key);
        if (option == nullptr)
            throw CLI::ConfigError("--json: unknown key '" + key + "'; valid keys: " + valid_keys(app));
        check_type(key, *option, value);
        updates.emplace_back(option, &value);
    }
    for (auto [option, value] : updates) {
        if (option->count() > 0) continue;  // the command line wins
        const std::string key = option->get_lnames().empty() ? option->get_snames().front()
                                                            : option->get_lnames().front();
        try {
            if (option->get_expected_min() == 0) {
                option->add_result(option->get_flag_value(key, to_input(*value)));
            } else if (value->is_array()) {
                std::vector<std::string> inputs;
                for (const json &element : *value) inputs.push_back(to_input(element));
                option->add_result(inputs);
            } else {
                option->add_result(to_input(*value));
            }
            option->run_callback();
        } catch (const CLI::ConfigError &) {
            throw;
        } catch (const CLI::Error &e) {
            throw CLI::ConfigError("--json: key '" + key + "': " + e.what());
        }
    }
}

}  // namespace

void add_json_config(CLI::App &app) {
    app.add_option_function<std::string>(
           "--json", [&app](const std::string &path) { apply_json_file(app, path); },
           "read flags from a JSON object {\"flag-name\": value} (or DOCA's "
           "{\"doca_general_flags\": {...}, \"doca_program_flags\": {...}}); command-line "
           "flags override it")
        ->configurable(false)
        ->type_name("FILE");
}

}  // namespace deputy::cli
