#include "common/result_document.h"

#include <deputy/log.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/host_info.h"

namespace deputy::cli {

nlohmann::json result_document(const std::string &benchmark, nlohmann::json config,
                               const nlohmann::json &versions, nlohmann::json results) {
    nlohmann::json all = {{"deputy", dp_version()}};
    for (const auto &[key, value] : versions.items()) all[key] = value;
    return {{"benchmark", benchmark},
            {"schema", 1},
            {"config", std::move(config)},
            {"versions", std::move(all)},
            {"host", host_info()},
            {"results", std::move(results)}};
}

bool write_json_file(const std::string &flag, const std::string &path, const nlohmann::json &doc,
                     std::string *error) {
    std::ofstream out(path, std::ios::trunc);
    if (!out) {
        *error = fmt::format("{} {}: cannot open it for writing: {}", flag, path,
                             std::strerror(errno));
        return false;
    }
    out << doc.dump(2) << "\n";
    if (!out.flush()) {
        *error = fmt::format("{} {}: cannot write the file", flag, path);
        return false;
    }
    return true;
}

}  // namespace deputy::cli
