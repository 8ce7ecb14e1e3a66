#include "cli/launch/secrets.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/fd.h"

namespace deputy::launch {

std::string random_hex(size_t bytes) {
    std::vector<unsigned char> buf(bytes);
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return {};
        got += size_t(n);
    }
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : buf) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

bool write_token_file(const std::string &path, const std::string &token, std::string *error) {
    if (token.empty()) {
        *error = "the kernel gave no random bytes for the agent's token";
        return false;
    }
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    const std::string line = token + "\n";
    if (!fd || write(fd.get(), line.data(), line.size()) != ssize_t(line.size())) {
        *error = "cannot write the token file " + path + ": " + std::strerror(errno);
        return false;
    }
    return true;
}

}  // namespace deputy::launch
