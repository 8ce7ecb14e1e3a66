// `deputy doctor`: every check of tools/cli/doctor/*_checks.cc, as a table for
// people or JSON for scripts. Exit 0 when everything deputy needs is there
// (no check failed), 1 otherwise; warnings are optional paths missing.
#include "cli/doctor/doctor_command.h"

#include <deputy/version.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/cli_common.h"
#include "common/log.h"
#include "cli/doctor/finding.h"

namespace deputy::tools {
namespace {

struct DoctorFlags {
    bool json = false;
    doctor::Probe probe;
    cli::LogFlags log;
};

int run(const DoctorFlags &f) {
    std::vector<doctor::Finding> all;
    doctor::check_host(f.probe, &all);
    doctor::check_dsa(f.probe, &all);
    doctor::check_fabric(f.probe, &all);
    doctor::check_mpi(f.probe, &all);
    doctor::check_agent(f.probe, &all);
    size_t counts[4] = {};
    for (const auto &x : all) ++counts[size_t(x.status)];
    const bool ok = counts[size_t(doctor::Status::fail)] == 0;
    if (f.json) {
        nlohmann::json j;
        j["version"] = DEPUTY_VERSION_STRING;
        j["ok"] = ok;
        j["findings"] = nlohmann::json::array();
        for (const auto &x : all)
            j["findings"].push_back({{"area", x.area},
                                     {"check", x.check},
                                     {"status", doctor::status_name(x.status)},
                                     {"found", x.found},
                                     {"fix", x.fix}});
        for (auto s : {doctor::Status::ok, doctor::Status::info, doctor::Status::warn,
                       doctor::Status::fail})
            j["counts"][doctor::status_name(s)] = counts[size_t(s)];
        std::printf("%s\n", j.dump(2).c_str());
        return ok ? 0 : 1;
    }
    std::printf("deputy doctor %s: what this machine offers deputy's paths\n\n",
                DEPUTY_VERSION_STRING);
    std::printf("%-7s %-26s %-5s %s\n", "area", "check", "", "found (-> what changes it)");
    for (const auto &x : all) {
        std::printf("%-7s %-26s %-5s %s\n", x.area.c_str(), x.check.c_str(),
                    doctor::status_name(x.status), x.found.c_str());
        if (!x.fix.empty() && x.status != doctor::Status::ok)
            std::printf("%-7s %-26s %-5s -> %s\n", "", "", "", x.fix.c_str());
    }
    std::printf("\n%zu ok, %zu info, %zu warn, %zu fail: %s\n", counts[0], counts[1], counts[2],
                counts[3],
                ok ? "everything deputy needs is here (warnings: optional paths)"
                   : "deputy cannot run here as it is (see fail)");
    return ok ? 0 : 1;
}

}  // namespace

void register_doctor(CLI::App &app) {
    auto f = std::make_shared<DoctorFlags>();
    CLI::App *cmd = app.add_subcommand(
        "doctor", "what this machine offers each of deputy's paths (CPU, memory, DSA, fabric, "
                  "MPI, agent) and what to change");
    cmd->add_flag("--json", f->json, "the findings as JSON");
    cmd->add_option("--socket", f->probe.socket,
                    "the agent to ask (default as for `deputy agent`)");
    cmd->add_option("--timeout", f->probe.agent_timeout_s, "seconds to wait for the agent")
        ->capture_default_str();
    cmd->add_option("--root", f->probe.root,
                    "read /sys and /proc under this directory instead (a copy or a fake tree); "
                    "the DSA checks always read the real /sys (through libaccel-config, as the "
                    "mover's idxd backend does)");
    cli::add_log_flags(*cmd, &f->log);
    cmd->callback([f] {
        cli::apply_log_flags(f->log);
        // An agent that does not answer is a finding here, not a library error.
        if (f->log.sdk_log_level.empty()) log::set_sdk_level(*log::parse_level("20"));
        const int rc = run(*f);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::tools
