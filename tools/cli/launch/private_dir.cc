#include "cli/launch/private_dir.h"

#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace deputy::launch {

std::string make_private_dir(const std::string &prefix, std::string *error) {
    // Room for "/", the prefix, the six random letters, "/agent-node<N>.sock"
    // (N up to 4 digits) and the terminating NUL: 28 bytes besides the two.
    const char *tmp = std::getenv("TMPDIR");
    std::string base = "/tmp";
    if (tmp && *tmp && std::strlen(tmp) + prefix.size() + 28 <= sizeof(sockaddr_un::sun_path))
        base = tmp;
    std::string templ = base + "/" + prefix + "XXXXXX";
    if (!mkdtemp(templ.data())) {  // mode 0700
        *error = "cannot create a directory for the agent (" + templ + "): " + std::strerror(errno);
        return {};
    }
    return templ;
}

void remove_private_dir(const std::string &dir, const std::string &tool) {
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec)
        std::fprintf(stderr, "%s: cannot remove %s: %s\n", tool.c_str(), dir.c_str(),
                     ec.message().c_str());
}

}  // namespace deputy::launch
