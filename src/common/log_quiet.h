// A thread's library warnings and errors kept instead of logged.
//
// While a Quiet lives on a thread, what the library logs on that thread at
// warning level or above (DP_LOG_WARN, DP_LOG_ERROR, DP_FAIL) is kept, the
// last line, instead of written. For a caller that reports the failure
// itself in a line of its own that is rate-limited: the agent's gate, whose
// handshakes any peer on the network can fail at will, must not write a
// line per attempt. The library logger's sink does the keeping (log.cc), so
// the logging macros stay as they are. Scopes nest (the innermost keeps);
// each thread has its own; the tool's own logger (DP_APP_*) is untouched.
#pragma once

#include <string>

namespace deputy::log {

class Quiet {
  public:
    Quiet();
    ~Quiet();
    Quiet(const Quiet &) = delete;
    Quiet &operator=(const Quiet &) = delete;
    // The last line kept ("" when none).
    const std::string &last() const { return last_; }
    void keep(std::string line) { last_ = std::move(line); }

  private:
    std::string last_;
    Quiet *outer_;
};

// This thread's innermost Quiet, or nullptr.
Quiet *quiet_scope();

}  // namespace deputy::log
