#include "common/host_info.h"

#include <deputy/version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <string>

#include "common/affinity.h"

namespace deputy {
namespace {

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    }
    return "unknown";
}

}  // namespace

nlohmann::json host_info() {
    utsname u{};
    uname(&u);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    char stamp[32];
    std::time_t t = std::time(nullptr);
    std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return {{"hostname", host},
            {"kernel", std::string(u.sysname) + " " + u.release},
            {"machine", u.machine},
            {"cpu_model", cpu_model()},
            {"cpus", affinity::cpu_count()},
            {"deputy_version", DEPUTY_VERSION_STRING},
            {"timestamp", stamp}};
}

}  // namespace deputy
