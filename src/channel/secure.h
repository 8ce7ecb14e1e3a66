// The secure session: wraps any transport in authenticated encryption with
// libsodium. X25519 key exchange (crypto_kx) with fresh ephemeral keys per
// session, mixed with a pre-shared key from a file the operator gives
// (key_file.h), then one XChaCha20-Poly1305 secretstream per direction.
//
// Why a pre-shared key (and not per-side static key pairs): one file to make
// and copy to both ends (host and DPU), symmetric roles, and no PKI; the
// ephemeral exchange still gives forward secrecy (a key file stolen later
// does not decrypt recorded sessions). The price: whoever holds the file can
// act as either end, so it is protected like an ssh private key.
//
// Handshake (inner frames; "i" = initiator, the connecting side, "r" = responder):
//   both  KEY_EXCHANGE  u16 version | u8 role (0 i, 1 r) | u8 0 | 32-byte X25519 public key
//   both  derive  k_ir = BLAKE2b-256(key = PSK, "deputy-secure-v1 i->r" | kx key | pk_i | pk_r)
//                 k_ri likewise with "r->i" and the other kx key
//   both  STREAM_HEADER  secretstream header of its sending stream (24 bytes)
//   both  KEY_CONFIRM    first sealed frame: BLAKE2b-256("deputy-secure-v1 confirm" | pk_i | pk_r)
// Each side sends one frame and reads the peer's before sending the next, so
// the handshake never has two frames queued per direction (a 64-byte shm ring
// holds one). A peer with another key fails KEY_CONFIRM: DP_ERR_DENIED.
//
// After the handshake every message is one sealed frame: the inner frame keeps
// the message type in clear (it is bound to the frame as associated data, so
// changing it fails authentication) and carries ciphertext + 17 bytes.
// END is sealed with TAG_FINAL. What ends the session (both directions shut
// down, every later call returns the same status):
//   - a frame that fails authentication: altered, replayed, reordered, forged,
//     or from another session                                 -> DP_ERR_DENIED
//   - END without TAG_FINAL, TAG_FINAL on another type, or any frame after
//     the final one                                          -> DP_ERR_DENIED
//   - the connection ending before the peer's END (truncation, or the peer
//     died)                                                  -> DP_ERR_AGENT_LOST
#pragma once

#include <memory>

#include "channel/key_file.h"
#include "channel/transport.h"

namespace deputy::channel::secure {

enum class Role { kInitiator, kResponder };

// Bytes a sealed frame adds to its message (the secretstream tag + MAC).
inline constexpr size_t kOverhead = 17;

// Runs the handshake over `inner` within the timeout and returns the secure
// transport that owns it. Its max_message() is inner->max_message() minus
// kOverhead. Errors: DP_ERR_DENIED (peer has another key, or is not running a
// secure session: the message says which), DP_ERR_TIMEOUT, inner errors.
dp_status_t establish(std::unique_ptr<Transport> inner, const Key &key, Role role,
                      int64_t timeout_ns, std::unique_ptr<Transport> *out);

}  // namespace deputy::channel::secure
