// The result document every benchmark writes with `--out FILE`: one frame
// (which benchmark, the schema, every flag resolved, the versions, the
// host, the rows), built here and written here, so that a reader
// (python/deputy_tools) finds the same keys in each.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace deputy::cli {

// {"benchmark", "schema": 1, "config", "versions": {"deputy": dp_version(),
// ...versions}, "host": host_info(), "results"}; a benchmark adds keys of
// its own to what this returns.
nlohmann::json result_document(const std::string &benchmark, nlohmann::json config,
                               const nlohmann::json &versions, nlohmann::json results);

// Writes `doc` to `path`, the value of `flag` (--out, --save-config), or
// returns false with *error naming both and why.
bool write_json_file(const std::string &flag, const std::string &path, const nlohmann::json &doc,
                     std::string *error);

}  // namespace deputy::cli
