// `deputy doctor`'s vocabulary: what one check found on this machine, how
// much it matters to deputy, and the command or boot option that changes
// it. Each *_checks.cc file adds the findings of one area.
#pragma once

#include <string>
#include <vector>

namespace deputy::doctor {

enum class Status {
    ok,    // there and usable
    info,  // a fact (no action)
    warn,  // an optional path is missing or limited: deputy runs without it
    fail,  // something deputy needs is missing: it will not run as configured
};
const char *status_name(Status s);

struct Finding {
    std::string area;   // "cpu", "memory", "dsa", "fabric", "mpi", "agent"
    std::string check;  // what was looked at, e.g. "simd", "ptrace_scope"
    Status status = Status::info;
    std::string found;  // what is there, in a sentence
    std::string fix;    // the command or setting that changes it ("" when none is needed)
};

// Where the checks look. `root` prefixes every /sys and /proc file read
// (a fake tree for tests), except DSA's: libaccel-config reads the real
// /sys; the agent is asked at `socket`.
struct Probe {
    std::string root;
    std::string socket;
    double agent_timeout_s = 1.0;
    // root + path
    std::string at(const std::string &path) const { return root + path; }
    // The file's first line (trailing whitespace gone); false with *error
    // naming the file and errno's text when it cannot be read.
    bool read_line(const std::string &path, std::string *line, std::string *error) const;
    // The names in a directory (no "." and ".."), sorted; empty when it
    // does not exist or cannot be read (*error then says which).
    std::vector<std::string> list(const std::string &path, std::string *error) const;
    bool exists(const std::string &path) const;
};

void check_host(const Probe &p, std::vector<Finding> *out);
void check_dsa(const Probe &p, std::vector<Finding> *out);
void check_fabric(const Probe &p, std::vector<Finding> *out);
void check_mpi(const Probe &p, std::vector<Finding> *out);
void check_agent(const Probe &p, std::vector<Finding> *out);

}  // namespace deputy::doctor
