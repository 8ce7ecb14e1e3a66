// Key files for the secure session: a 32-byte pre-shared key that the
// operator generates once and copies to both ends (host and agent/DPU).
//
// Format: a text file, '#' comment lines and blank lines ignored, and one
// line "deputy-psk-v1 <64 hex digits>". Make one with
//     deputy bench channel --keygen FILE
// or with standard tools:
//     (umask 077; printf 'deputy-psk-v1 %s\n' "$(head -c32 /dev/urandom | xxd -p -c64)" > FILE)
// The file must not be readable or writable by group or others (like an ssh
// private key): anyone who reads it can impersonate either end.
#pragma once

#include <deputy/status.h>

#include <array>
#include <cstdint>
#include <string>

namespace deputy::channel::secure {

inline constexpr size_t kKeyBytes = 32;

struct Key {
    std::array<uint8_t, kKeyBytes> bytes{};
    ~Key();  // wipes the bytes
};

// Loads and checks a key file. DP_ERR_IO if it cannot be read, DP_ERR_DENIED
// if group or others may access it, DP_ERR_INVALID if malformed; each with a
// logged message naming the file and the fix.
dp_status_t load_key_file(const std::string &path, Key *out);

// Writes a fresh random key (libsodium's CSPRNG) to a new file with mode
// 0600. Refuses to overwrite an existing file (DP_ERR_IO).
dp_status_t generate_key_file(const std::string &path);

// Initialises libsodium once (thread-safe); DP_ERR_INTERNAL if it cannot.
dp_status_t ensure_sodium();

// The linked libsodium's version string, for results files.
const char *sodium_version();

}  // namespace deputy::channel::secure
