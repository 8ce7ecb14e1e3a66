#include "channel/key_file.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/check.h"
#include "common/fd.h"
#include "common/sys_error.h"

namespace deputy::channel::secure {
namespace {

constexpr const char *kPrefix = "deputy-psk-v1";

}  // namespace

Key::~Key() {
    sodium_memzero(bytes.data(), bytes.size());
}

dp_status_t ensure_sodium() {
    // sodium_init() is itself safe to call concurrently and repeatedly.
    static const int rc = sodium_init();
    if (rc < 0) DP_FAIL(DP_ERR_INTERNAL, "libsodium failed to initialise");
    return DP_OK;
}

const char *sodium_version() {
    return sodium_version_string();
}

dp_status_t load_key_file(const std::string &path, Key *out) {
    DP_CHECK(ensure_sodium());
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) DP_FAIL_ERRNO(DP_ERR_IO, "key file {}", path);
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) DP_FAIL_ERRNO(DP_ERR_IO, "key file {}", path);
    if (!S_ISREG(st.st_mode)) DP_FAIL(DP_ERR_INVALID, "key file {}: not a regular file", path);
    if (st.st_mode & (S_IRWXG | S_IRWXO))
        DP_FAIL(DP_ERR_DENIED,
                "key file {}: mode {:03o} lets group or others read it; run "
                "'chmod 600 {}'",
                path, unsigned(st.st_mode & 0777), path);
    if (st.st_size > 4096) DP_FAIL(DP_ERR_INVALID, "key file {}: larger than 4 KiB", path);
    std::string text(size_t(st.st_size), '\0');
    ssize_t n = read(fd.get(), text.data(), text.size());
    if (n != ssize_t(text.size())) DP_FAIL(DP_ERR_IO, "key file {}: short read", path);
    std::istringstream lines(text);
    std::string line;
    bool found = false;
    int number = 0;
    while (std::getline(lines, line)) {
        ++number;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        if (found) DP_FAIL(DP_ERR_INVALID, "key file {}:{}: more than one key line", path, number);
        const std::string prefix = std::string(kPrefix) + " ";
        if (line.rfind(prefix, 0) != 0)
            DP_FAIL(DP_ERR_INVALID, "key file {}:{}: expected '{} <64 hex digits>'", path, number,
                    kPrefix);
        std::string hex = line.substr(prefix.size());
        size_t bin_len = 0;
        const char *end = nullptr;
        if (hex.size() != 2 * kKeyBytes ||
            sodium_hex2bin(out->bytes.data(), out->bytes.size(), hex.data(), hex.size(), nullptr,
                           &bin_len, &end) != 0 ||
            bin_len != kKeyBytes)
            DP_FAIL(DP_ERR_INVALID, "key file {}:{}: the key must be exactly 64 hex digits", path,
                    number);
        found = true;
    }
    sodium_memzero(text.data(), text.size());
    if (!found) DP_FAIL(DP_ERR_INVALID, "key file {}: no '{}' line", path, kPrefix);
    return DP_OK;
}

dp_status_t generate_key_file(const std::string &path) {
    DP_CHECK(ensure_sodium());
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) DP_FAIL_ERRNO(DP_ERR_IO, "key file {} (an existing key is never overwritten)", path);
    Key key;
    randombytes_buf(key.bytes.data(), key.bytes.size());
    char hex[2 * kKeyBytes + 1];
    sodium_bin2hex(hex, sizeof(hex), key.bytes.data(), key.bytes.size());
    std::string text = std::string(
                           "# deputy secure-channel pre-shared key: copy to both ends, "
                           "keep mode 0600\n") +
                       kPrefix + " " + hex + "\n";
    sodium_memzero(hex, sizeof(hex));
    ssize_t n = write(fd.get(), text.data(), text.size());
    sodium_memzero(text.data(), text.size());
    if (n != ssize_t(text.size()) || fsync(fd.get()) != 0) {
        unlink(path.c_str());
        DP_FAIL(DP_ERR_IO, "key file {}: write failed", path);
    }
    return DP_OK;
}

}  // namespace deputy::channel::secure
