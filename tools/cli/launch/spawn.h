// Starting one child process for `deputy launch` (a rank or the job's agent):
// fork + execve with the child in its own process group, the launcher's
// blocked signals unblocked, SIGPIPE back to its default, and a signal to
// the child when the launcher dies (PR_SET_PDEATHSIG), so even a SIGKILLed
// launcher leaves no rank behind. exec failures come back to the parent
// through a close-on-exec pipe, so "no such program" is an error here, not a
// rank that exits 127 with nothing said.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <string>
#include <vector>

namespace deputy::launch {

struct SpawnSpec {
    std::string path;               // what to execve (already resolved, see find_program)
    std::vector<std::string> argv;  // argv[0] included
    std::vector<std::string> env;   // the complete environment, "NAME=value"
    int stdin_fd = -1;              // -1: inherit the launcher's
    int stdout_fd = -1;
    int stderr_fd = -1;
    int parent_death_signal = SIGKILL;  // sent to the child if the launcher dies
    std::vector<int> cpus;              // bind the child to these CPUs before exec; empty: inherit
    int keep_fd = -1;  // a close-on-exec fd the child keeps across exec (under its number)
};

// Returns the child's pid (its own process group leader), or -1 with
// `*error` set ("cannot execute 'x': Permission denied", "cannot bind it to
// CPUs 5: Invalid argument") and `*exit_code` what a shell would return for
// it (127 not found, 126 not executable or not bindable).
pid_t spawn(const SpawnSpec &spec, std::string *error, int *exit_code);

// Resolves a program name the way execvp would (a name with a '/' is taken
// as is; otherwise the first executable match in $PATH). Empty when nothing
// matches.
std::string find_program(const std::string &name);

// The children of `pid` (every thread's, from /proc/<pid>/task/*/children).
std::vector<pid_t> children_of(pid_t pid);

// Sends `sig` to `pid`'s process group and to every process below it
// (children, theirs, ...) and their groups, all found before the first
// signal. For a child that did not stop in time: mpirun puts every rank in
// a process group of its own, so signalling mpirun's group alone would
// leave its ranks running. Best effort: a process forking meanwhile escapes.
void kill_tree(pid_t pid, int sig);

// `argv` as one line a POSIX shell would split back into it (arguments
// with other characters than [A-Za-z0-9_@%+=:,./-] single-quoted), for
// messages and `deputy mpirun --dry-run`. Substrings in `verbatim` (the
// dry run's "<dir>" placeholders) do not cause quoting.
std::string command_line(const std::vector<std::string> &argv,
                         const std::vector<std::string> &verbatim = {});

// The launcher's environment with `overrides` ("NAME=value") replacing or
// adding entries.
std::vector<std::string> environment_with(const std::vector<std::string> &overrides);

}  // namespace deputy::launch
