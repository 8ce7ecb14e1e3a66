#include "common/cli_json.h"

#include <nlohmann/json.hpp>

#include <sstream>

namespace deputy::cli {
namespace {

using nlohmann::json;

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

class JsonConfig : public CLI::Config {
public:
    explicit JsonConfig(CLI::App *app) : app_(app) {}

    std::string to_config(const CLI::App *, bool, bool, std::string) const override {
        return {};
    }

    std::vector<CLI::ConfigItem> from_config(std::istream &input) const override {
        json doc;
        try {
            doc = json::parse(input, nullptr, true, /*ignore_comments=*/true);
        } catch (const json::parse_error &e) {
            throw CLI::ConfigError(std::string("--json: not valid JSON: ") + e.what());
        }
        if (!doc.is_object())
            throw CLI::ConfigError("--json: the file must hold one JSON object of flag: value");
        std::vector<CLI::ConfigItem> items;
        for (const auto &[key, value] : doc.items()) {
            CLI::Option *option = find(key);
            if (option == nullptr)
                throw CLI::ConfigError("--json: unknown key '" + key + "'; valid keys: " +
                                       valid_keys());
            check_type(key, *option, value);
            CLI::ConfigItem item;
            item.name = option->get_lnames().empty() ? option->get_snames().front()
                                                      : option->get_lnames().front();
            if (value.is_array()) {
                for (const auto &element : value) item.inputs.push_back(to_input(element));
            } else {
                item.inputs.push_back(to_input(value));
            }
            items.push_back(std::move(item));
        }
        return items;
    }

private:
    CLI::Option *find(const std::string &key) const {
        if (key == "json" || key.empty()) return nullptr;
        std::string dashed = key;
        for (char &c : dashed)
            if (c == '_') c = '-';
        CLI::Option *option = app_->get_option_no_throw("--" + dashed);
        if (option == nullptr && key.size() == 1) option = app_->get_option_no_throw("-" + key);
        if (option != nullptr && !option->get_configurable()) return nullptr;
        return option;
    }

    std::string valid_keys() const {
        std::string out;
        for (const CLI::Option *option : app_->get_options()) {
            if (!option->get_configurable() || option->get_lnames().empty()) continue;
            const std::string &name = option->get_lnames().front();
            if (name == "json" || name == "help") continue;
            if (!out.empty()) out += ", ";
            out += name;
        }
        return out;
    }

    static void check_type(const std::string &key, const CLI::Option &option, const json &value) {
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

    CLI::App *app_;
};

}  // namespace

void add_json_config(CLI::App &app) {
    app.set_config("--json", "", "read flags from a JSON object {\"flag-name\": value}; "
                                 "command-line flags override it");
    app.config_formatter(std::make_shared<JsonConfig>(&app));
    app.allow_config_extras(CLI::config_extras_mode::error);
}

}  // namespace deputy::cli
