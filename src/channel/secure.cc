#include "channel/secure.h"

#include <sodium.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "common/check.h"

namespace deputy::channel::secure {
namespace {

static_assert(kOverhead == crypto_secretstream_xchacha20poly1305_ABYTES);
static_assert(kKeyBytes == crypto_generichash_KEYBYTES);

using State = crypto_secretstream_xchacha20poly1305_state;
constexpr size_t kHeaderBytes = crypto_secretstream_xchacha20poly1305_HEADERBYTES;
constexpr size_t kPkBytes = crypto_kx_PUBLICKEYBYTES;
constexpr size_t kExchangeBytes = 4 + kPkBytes;
constexpr size_t kConfirmBytes = 32;
constexpr uint8_t kTagMessage = crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
constexpr uint8_t kTagFinal = crypto_secretstream_xchacha20poly1305_TAG_FINAL;

// Session keys, wiped when they go out of scope.
struct Secret {
    uint8_t bytes[32];
    Secret() { std::memset(bytes, 0, sizeof(bytes)); }
    ~Secret() { sodium_memzero(bytes, sizeof(bytes)); }
};

void derive(const Key &psk, const char *label, const uint8_t kx_key[32], const uint8_t *pk_i,
            const uint8_t *pk_r, uint8_t out[32]) {
    crypto_generichash_state h;
    crypto_generichash_init(&h, psk.bytes.data(), psk.bytes.size(), 32);
    crypto_generichash_update(&h, reinterpret_cast<const uint8_t *>(label), std::strlen(label));
    if (kx_key != nullptr) crypto_generichash_update(&h, kx_key, 32);
    crypto_generichash_update(&h, pk_i, kPkBytes);
    crypto_generichash_update(&h, pk_r, kPkBytes);
    crypto_generichash_final(&h, out, 32);
    sodium_memzero(&h, sizeof(h));
}

// Bytes left uninitialised until written.
class Buffer {
  public:
    explicit Buffer(size_t n) : bytes_(std::make_unique_for_overwrite<uint8_t[]>(n)), size_(n) {}
    uint8_t *data() { return bytes_.get(); }
    size_t size() const { return size_; }

  private:
    std::unique_ptr<uint8_t[]> bytes_;
    size_t size_;
};

class SecureTransport final : public Transport {
  public:
    SecureTransport(std::unique_ptr<Transport> inner)
        : inner_(std::move(inner)),
          max_message_(inner_->max_message() - kOverhead),
          send_buf_(inner_->max_message()),
          recv_buf_(inner_->max_message()) {}
    // (Buffers left uninitialised: a session commits only the pages its
    // messages reach, not 2 x max_message as soon as it exists.)
    ~SecureTransport() override {
        sodium_memzero(&tx_, sizeof(tx_));
        sodium_memzero(&rx_, sizeof(rx_));
    }

    dp_status_t handshake(const Key &key, Role role, int64_t timeout_ns);

    dp_status_t send(MsgType type, const void *payload, size_t length, int64_t timeout_ns) override;
    dp_status_t recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                     int64_t timeout_ns) override;
    size_t max_message() const override { return max_message_; }
    void shutdown() override { inner_->shutdown(); }
    std::string kind() const override { return "secure+" + inner_->kind(); }
    std::string peer() const override { return inner_->peer(); }
    size_t buffer_bytes() const override { return inner_->buffer_bytes(); }

  private:
    // Ends the session: both directions stop, the peer sees the close.
    dp_status_t end_session(dp_status_t status) {
        int expected = DP_OK;
        broken_.compare_exchange_strong(expected, status);
        inner_->shutdown();
        return status;
    }
    dp_status_t expect(MsgType want, size_t want_bytes, const Deadline &deadline, const char *step);

    std::unique_ptr<Transport> inner_;
    size_t max_message_;
    std::atomic<int> broken_{DP_OK};
    // Send side (one sending thread).
    State tx_{};
    Buffer send_buf_;
    bool tx_final_ = false;
    // Receive side (one receiving thread).
    State rx_{};
    Buffer recv_buf_;
    size_t recv_len_ = 0;
    bool rx_final_ = false;
    uint64_t rx_frames_ = 0;
    bool established_ = false;  // a close before this is a failed handshake, not truncation
};

// Receives one handshake frame of a given type and size into recv_buf_.
dp_status_t SecureTransport::expect(MsgType want, size_t want_bytes, const Deadline &deadline,
                                    const char *step) {
    MsgType type;
    dp_status_t s = inner_->recv(&type, recv_buf_.data(), recv_buf_.size(), &recv_len_,
                                 deadline.remaining_ns());
    if (s == DP_ERR_TIMEOUT)
        DP_FAIL(s, "secure handshake: timed out waiting for the peer's {}", step);
    DP_CHECK(s);
    if (type == want && recv_len_ == want_bytes) return DP_OK;
    if (type == MsgType::kHello)
        DP_FAIL(DP_ERR_DENIED,
                "secure handshake: the peer is not running a secure session (it "
                "sent HELLO in clear); enable --secure on both ends");
    if (type == MsgType::kError) {
        std::string reason(reinterpret_cast<const char *>(recv_buf_.data()), recv_len_);
        DP_FAIL(DP_ERR_DENIED, "secure handshake: the peer refused: {}", reason);
    }
    DP_FAIL(DP_ERR_DENIED, "secure handshake: expected {} ({} bytes), got {} ({} bytes)",
            msg_type_name(want), want_bytes, msg_type_name(type), recv_len_);
}

dp_status_t SecureTransport::handshake(const Key &key, Role role, int64_t timeout_ns) {
    DP_CHECK(ensure_sodium());
    Deadline deadline(timeout_ns);
    const bool initiator = role == Role::kInitiator;
    uint8_t pk[kPkBytes], peer_pk[kPkBytes];
    Secret sk, kx_rx, kx_tx, k_tx, k_rx, confirm;
    crypto_kx_keypair(pk, sk.bytes);

    uint8_t exchange[kExchangeBytes];
    put_u16(exchange, kProtocolVersion);
    exchange[2] = initiator ? 0 : 1;
    exchange[3] = 0;
    std::memcpy(exchange + 4, pk, kPkBytes);
    DP_CHECK(
        inner_->send(MsgType::kKeyExchange, exchange, sizeof(exchange), deadline.remaining_ns()));
    DP_CHECK(expect(MsgType::kKeyExchange, kExchangeBytes, deadline, "KEY_EXCHANGE"));
    const uint8_t *theirs = recv_buf_.data();
    if (get_u16(theirs) != kProtocolVersion)
        DP_FAIL(DP_ERR_DENIED,
                "secure handshake: the peer speaks protocol version {}, this side {}",
                get_u16(theirs), kProtocolVersion);
    if (theirs[2] != (initiator ? 1 : 0))
        DP_FAIL(DP_ERR_DENIED,
                "secure handshake: both ends claim to be the {} (is the frame "
                "reflected back?)",
                initiator ? "initiator" : "responder");
    std::memcpy(peer_pk, theirs + 4, kPkBytes);
    if (sodium_memcmp(peer_pk, pk, kPkBytes) == 0)
        DP_FAIL(DP_ERR_DENIED, "secure handshake: the peer's public key is our own (reflected)");

    // crypto_kx: the initiator is the "client". Its tx key is the
    // responder's rx key and the other way round.
    int rc = initiator
                 ? crypto_kx_client_session_keys(kx_rx.bytes, kx_tx.bytes, pk, sk.bytes, peer_pk)
                 : crypto_kx_server_session_keys(kx_rx.bytes, kx_tx.bytes, pk, sk.bytes, peer_pk);
    if (rc != 0) DP_FAIL(DP_ERR_DENIED, "secure handshake: the peer's public key is invalid");
    const uint8_t *pk_i = initiator ? pk : peer_pk;
    const uint8_t *pk_r = initiator ? peer_pk : pk;
    derive(key, initiator ? "deputy-secure-v1 i->r" : "deputy-secure-v1 r->i", kx_tx.bytes, pk_i,
           pk_r, k_tx.bytes);
    derive(key, initiator ? "deputy-secure-v1 r->i" : "deputy-secure-v1 i->r", kx_rx.bytes, pk_i,
           pk_r, k_rx.bytes);
    derive(key, "deputy-secure-v1 confirm", nullptr, pk_i, pk_r, confirm.bytes);

    // One frame in flight per direction at a time (send, then receive the
    // peer's): both sides send before they read, so two frames queued at once
    // could fill a small ring (64 bytes) on both sides and deadlock.
    uint8_t header[kHeaderBytes];
    crypto_secretstream_xchacha20poly1305_init_push(&tx_, header, k_tx.bytes);
    DP_CHECK(inner_->send(MsgType::kStreamHeader, header, sizeof(header), deadline.remaining_ns()));
    DP_CHECK(expect(MsgType::kStreamHeader, kHeaderBytes, deadline, "STREAM_HEADER"));
    if (crypto_secretstream_xchacha20poly1305_init_pull(&rx_, recv_buf_.data(), k_rx.bytes) != 0)
        DP_FAIL(DP_ERR_DENIED, "secure handshake: invalid stream header from the peer");
    DP_CHECK(send(MsgType::kKeyConfirm, confirm.bytes, kConfirmBytes, deadline.remaining_ns()));
    Secret got;
    size_t got_len = 0;
    MsgType type;
    dp_status_t s = recv(&type, got.bytes, sizeof(got.bytes), &got_len, deadline.remaining_ns());
    if (s == DP_ERR_DENIED ||
        (s == DP_OK && (type != MsgType::kKeyConfirm || got_len != kConfirmBytes ||
                        sodium_memcmp(got.bytes, confirm.bytes, kConfirmBytes) != 0)))
        DP_FAIL(DP_ERR_DENIED,
                "secure handshake: the peer does not hold the same key (its --key "
                "file differs), or the handshake was altered in transit");
    DP_CHECK(s);
    rx_frames_ = 0;
    established_ = true;
    return DP_OK;
}

dp_status_t SecureTransport::send(MsgType type, const void *payload, size_t length,
                                  int64_t timeout_ns) {
    if (int b = broken_.load(std::memory_order_relaxed); b != DP_OK) return dp_status_t(b);
    DP_CHECK(check_send_size(length, max_message_, "secure"));
    if (tx_final_)
        DP_FAIL(DP_ERR_INVALID, "secure: {} after END: the sending stream is finished",
                msg_type_name(type));
    const uint8_t ad = uint8_t(type);
    const uint8_t tag = type == MsgType::kEnd ? kTagFinal : kTagMessage;
    unsigned long long sealed = 0;
    crypto_secretstream_xchacha20poly1305_push(&tx_, send_buf_.data(), &sealed,
                                               static_cast<const uint8_t *>(payload), length, &ad,
                                               1, tag);
    if (tag == kTagFinal) tx_final_ = true;
    return inner_->send(type, send_buf_.data(), size_t(sealed), timeout_ns);
}

dp_status_t SecureTransport::recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                                  int64_t timeout_ns) {
    if (int b = broken_.load(std::memory_order_relaxed); b != DP_OK) return dp_status_t(b);
    MsgType t;
    size_t sealed = 0;
    dp_status_t s = inner_->recv(&t, recv_buf_.data(), recv_buf_.size(), &sealed, timeout_ns);
    if (s == DP_ERR_AGENT_LOST && !rx_final_ && established_) {
        DP_LOG_ERROR(
            "secure: the connection ended before the peer's END after {} frame(s): the "
            "stream is truncated (peer died, or frames were dropped)",
            rx_frames_);
        return end_session(s);
    }
    if (s != DP_OK) return s;
    const uint64_t frame = ++rx_frames_;
    if (rx_final_) {
        DP_LOG_ERROR("secure: {} frame after the peer's final frame: session ended",
                     msg_type_name(t));
        return end_session(DP_ERR_DENIED);
    }
    if (sealed < kOverhead) {
        DP_LOG_ERROR("secure: frame #{} ({}) of {} bytes is too short to be sealed", frame,
                     msg_type_name(t), sealed);
        return end_session(DP_ERR_DENIED);
    }
    if (sealed - kOverhead > capacity) {
        DP_LOG_ERROR("secure: a {}-byte message does not fit the {}-byte buffer given",
                     sealed - kOverhead, capacity);
        return end_session(DP_ERR_TOO_LARGE);
    }
    const uint8_t ad = uint8_t(t);
    unsigned long long opened = 0;
    uint8_t tag = 0;
    if (crypto_secretstream_xchacha20poly1305_pull(&rx_, static_cast<uint8_t *>(buffer), &opened,
                                                   &tag, recv_buf_.data(), sealed, &ad, 1) != 0) {
        DP_LOG_ERROR(
            "secure: frame #{} ({}, {} bytes) failed authentication: altered, replayed, "
            "reordered or forged; session ended",
            frame, msg_type_name(t), sealed);
        return end_session(DP_ERR_DENIED);
    }
    if ((t == MsgType::kEnd) != (tag == kTagFinal) || (tag != kTagFinal && tag != kTagMessage)) {
        DP_LOG_ERROR(
            "secure: frame #{} is {} with tag {}: END must carry the final tag and "
            "nothing else may; session ended",
            frame, msg_type_name(t), unsigned(tag));
        return end_session(DP_ERR_DENIED);
    }
    if (tag == kTagFinal) rx_final_ = true;
    *type = t;
    *length = size_t(opened);
    return DP_OK;
}

}  // namespace

dp_status_t establish(std::unique_ptr<Transport> inner, const Key &key, Role role,
                      int64_t timeout_ns, std::unique_ptr<Transport> *out) {
    if (!inner || inner->max_message() < kOverhead + 64)
        DP_FAIL(DP_ERR_INVALID, "secure: the inner transport's message limit is too small");
    auto t = std::make_unique<SecureTransport>(std::move(inner));
    dp_status_t s = t->handshake(key, role, timeout_ns);
    if (s != DP_OK) {
        t->shutdown();
        return s;
    }
    DP_LOG_DEBUG("secure: session established over {}", t->kind());
    *out = std::move(t);
    return DP_OK;
}

}  // namespace deputy::channel::secure
