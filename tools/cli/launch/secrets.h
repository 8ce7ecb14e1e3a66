// The random values a launcher hands out: agent tokens (DEPUTY_TOKEN) and
// job secrets (DEPUTY_JOB_SECRET), from getrandom.
#pragma once

#include <cstddef>
#include <string>

namespace deputy::launch {

// `bytes` random bytes (getrandom) as lowercase hex; empty if the kernel
// would not give any.
std::string random_hex(size_t bytes);

// Writes "<token>\n" to a new file `path` (mode 0600, O_EXCL: never through
// a name someone else made) for `deputy agent --token-file`. False with
// `*error` set on failure.
bool write_token_file(const std::string &path, const std::string &token, std::string *error);

}  // namespace deputy::launch
