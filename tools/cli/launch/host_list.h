// The hosts of a `deputy mpirun` job, by name, in order: what the mpirun
// arguments' hostfiles and host lists name, and what a DPU hostfile names
// (`--dpu-hostfile`: line i is the DPU that serves host i). The rank shim
// then finds which of them it runs on.
//
// A hostfile line is a host name followed by anything (Open MPI's
// `node1 slots=4`, Hydra's `node1:4`); '#' starts a comment; blank lines
// are skipped. A host list is comma-separated (`-H a,b:2`). A name given
// twice counts once, where it first appears, as mpirun merges the slots.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace deputy::launch {

// The names in hostfile `path`, or false with `*error` naming the file.
// `dedupe`: a name given twice counts once (the hosts of a job); a DPU
// hostfile keeps every line, since its line i pairs with host i.
bool read_hostfile(const std::string &path, bool dedupe, std::vector<std::string> *names,
                   std::string *error);

// The hosts of mpirun's host options ({"--hostfile", F} and {"--host",
// "a,b"} pairs, as MpirunCommandLine::hosts holds them), in order.
bool read_host_names(const std::vector<std::string> &host_options,
                     std::vector<std::string> *names, std::string *error);

// A list of names as one text, comma-separated (a host list's form, and
// how deputy mpirun hands the hosts and DPUs to the rank shim), and back.
std::string comma_text(const std::vector<std::string> &names);
std::vector<std::string> comma_names(const std::string &text);

// Which entry of `names` this machine is: one equal to `hostname` (or to
// its first label, case aside); else the first that resolves to one of
// `local_addresses` other than a loopback one; else the first that
// resolves to a loopback address (a one-host job named `localhost`). -1 if
// none. `resolve` gives a name's addresses as text (getaddrinfo).
int match_local_host(const std::vector<std::string> &names, const std::string &hostname,
                     const std::vector<std::string> &local_addresses,
                     const std::function<std::vector<std::string>(const std::string &)> &resolve);

// The same for this machine: gethostname, getifaddrs, getaddrinfo. On -1,
// `*error` names the host name, its addresses and the entries.
int find_local_host(const std::vector<std::string> &names, std::string *error);

}  // namespace deputy::launch
