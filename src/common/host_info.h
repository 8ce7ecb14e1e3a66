// What a results file needs to say about where it was measured.
#pragma once

#include <nlohmann/json.hpp>

namespace deputy {

// {"hostname", "kernel", "cpu_model", "cpus", "deputy_version", "isa",
//  "timestamp"} for benchmark JSON.
nlohmann::json host_info();

}  // namespace deputy
