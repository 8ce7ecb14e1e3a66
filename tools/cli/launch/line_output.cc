#include "cli/launch/line_output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace deputy::launch {

void write_all(int fd, const std::string &data) {
    static bool broken[3] = {false, false, false};
    if (fd >= 0 && fd < 3 && broken[fd]) return;
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {  // a stream someone left non-blocking
            pollfd p{fd, POLLOUT, 0};
            ::poll(&p, 1, 100);
            continue;
        }
        if (n <= 0) {
            if (fd >= 0 && fd < 3) broken[fd] = true;
            return;
        }
        done += size_t(n);
    }
}

void LineSink::on_readable() {
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(pipe_.get(), buf, sizeof buf);
        if (n > 0) {
            pending_.append(buf, size_t(n));
            emit(false);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        close();  // EOF, or an error that ends this stream the same way
        return;
    }
}

void LineSink::close() {
    emit(true);
    pipe_.reset();
}

void LineSink::emit(bool flush_partial) {
    std::string out;
    size_t start = 0;
    for (;;) {
        size_t nl = pending_.find('\n', start);
        size_t len = nl == std::string::npos ? pending_.size() - start : nl - start;
        if (nl == std::string::npos && len < kMaxLine && !(flush_partial && len > 0)) break;
        if (len > kMaxLine) len = kMaxLine;
        out += prefix_;
        out.append(pending_, start, len);
        out += '\n';
        start += len;
        if (start < pending_.size() && pending_[start] == '\n') ++start;
        if (start >= pending_.size()) break;
    }
    pending_.erase(0, start);
    if (!out.empty()) write_all(out_fd_, out);
}

}  // namespace deputy::launch
