// The command line that runs one of this build's programs (deputy, the
// hostile client) from a test. Natively that is the program itself; in a
// cross build whose tests run under qemu-user (docs/arm.md) it is the
// emulator's words first, since qemu-user runs one binary and does not
// follow exec to another of the target's.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace deputy::testing {

inline std::vector<std::string> target_command(std::vector<std::string> args) {
    std::vector<std::string> words;
    std::istringstream emulator(DEPUTY_TEST_EMULATOR);
    for (std::string word; emulator >> word;) words.push_back(word);
    words.insert(words.end(), args.begin(), args.end());
    return words;
}

// The same for a command line sh runs (popen, system): `command` starts
// with the program's path.
inline std::string target_shell(const std::string &command) {
    const std::string emulator = DEPUTY_TEST_EMULATOR;
    return emulator.empty() ? command : emulator + " " + command;
}

// Whether the tests run under an emulator: what it cannot emulate (another
// architecture's mpirun starting the target's programs) is skipped.
inline bool under_emulator() { return DEPUTY_TEST_EMULATOR[0] != '\0'; }

}  // namespace deputy::testing
