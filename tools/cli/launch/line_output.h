// `--output prefix`: a rank's stdout or stderr arrives through a pipe and
// leaves on the launcher's own stream one whole line at a time, each line
// starting with "[rank] ". The launcher is the only writer of its streams
// and writes complete lines only, so lines of different ranks never mix.
// A line longer than kMaxLine is cut into kMaxLine pieces, each a line of
// its own; a last line without '\n' gets one when the pipe closes.
#pragma once

#include <cstddef>
#include <string>

#include "common/fd.h"

namespace deputy::launch {

class LineSink {
  public:
    static constexpr size_t kMaxLine = 64 * 1024;

    LineSink(UniqueFd pipe, int out_fd, std::string prefix)
        : pipe_(std::move(pipe)), out_fd_(out_fd), prefix_(std::move(prefix)) {}

    int fd() const { return pipe_.get(); }
    bool open() const { return pipe_.valid(); }
    // Reads what the pipe holds (non-blocking) and writes the complete lines.
    // At end of file it flushes the rest and closes the pipe.
    void on_readable();
    // Flushes the partial line and closes the pipe (used when waiting for
    // EOF takes too long).
    void close();

  private:
    void emit(bool flush_partial);

    UniqueFd pipe_;
    int out_fd_;
    std::string prefix_;
    std::string pending_;  // bytes after the last '\n' seen
};

// Writes all of `data` to `fd`; after EPIPE (the reader went away) the
// stream is dropped quietly, the job goes on.
void write_all(int fd, const std::string &data);

}  // namespace deputy::launch
