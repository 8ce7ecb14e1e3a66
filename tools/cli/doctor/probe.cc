// Probe: reading the machine's /sys and /proc files, under a root that a
// test may replace with a fake tree.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "cli/doctor/finding.h"

namespace deputy::doctor {

const char *status_name(Status s) {
    switch (s) {
        case Status::ok: return "ok";
        case Status::info: return "info";
        case Status::warn: return "warn";
        case Status::fail: return "fail";
    }
    return "?";
}

bool Probe::read_line(const std::string &path, std::string *line, std::string *error) const {
    // open + read, not a stream: a read that fails (a directory, a sysfs
    // attribute the driver refuses) must be an error, not an empty line.
    UniqueFd fd(::open(at(path).c_str(), O_RDONLY | O_CLOEXEC));
    char buf[4096];
    const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf) : -1;
    if (n < 0) {
        *error = "cannot read " + path + ": " + std::strerror(errno);
        return false;
    }
    line->assign(buf, size_t(n));
    if (const size_t nl = line->find('\n'); nl != std::string::npos) line->resize(nl);
    while (!line->empty() && std::isspace(static_cast<unsigned char>(line->back())))
        line->pop_back();
    return true;
}

std::vector<std::string> Probe::list(const std::string &path, std::string *error) const {
    std::vector<std::string> names;
    DIR *d = opendir(at(path).c_str());
    if (!d) {
        if (error) *error = "cannot list " + path + ": " + std::strerror(errno);
        return names;
    }
    while (dirent *e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

bool Probe::exists(const std::string &path) const {
    struct stat st;
    return stat(at(path).c_str(), &st) == 0;
}

}  // namespace deputy::doctor
