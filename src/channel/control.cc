#include "channel/control.h"

#include <deputy/coll.h>
#include <fmt/format.h>

#include <cctype>
#include <cstring>

#include "channel/socket_io.h"
#include "channel/team_board.h"
#include "channel/transport.h"
#include "common/check.h"

namespace deputy::channel::control {
namespace {

// Little-endian writer and a bounds-checked reader over a payload.
struct Writer {
    std::vector<uint8_t> *out;
    void u8(uint8_t v) { out->push_back(v); }
    void u16(uint16_t v) {
        size_t at = grow(2);
        put_u16(out->data() + at, v);
    }
    void u32(uint32_t v) {
        size_t at = grow(4);
        put_u32(out->data() + at, v);
    }
    void u64(uint64_t v) {
        size_t at = grow(8);
        put_u64(out->data() + at, v);
    }
    void bytes(const void *p, size_t n) {
        size_t at = grow(n);
        if (n) std::memcpy(out->data() + at, p, n);
    }
    size_t grow(size_t n) {
        size_t at = out->size();
        out->resize(at + n);
        return at;
    }
};

struct Reader {
    const uint8_t *p;
    size_t n;
    size_t at = 0;
    std::string *error;
    const char *message;

    bool need(size_t k, const char *field) {
        if (n - at >= k) return true;
        *error = fmt::format("{}: truncated at field '{}' (needs {} bytes, {} left)", message,
                             field, k, n - at);
        return false;
    }
    bool u8(uint8_t *v, const char *field) {
        if (!need(1, field)) return false;
        *v = p[at++];
        return true;
    }
    bool u16(uint16_t *v, const char *field) {
        if (!need(2, field)) return false;
        *v = get_u16(p + at);
        at += 2;
        return true;
    }
    bool u32(uint32_t *v, const char *field) {
        if (!need(4, field)) return false;
        *v = get_u32(p + at);
        at += 4;
        return true;
    }
    bool u64(uint64_t *v, const char *field) {
        if (!need(8, field)) return false;
        *v = get_u64(p + at);
        at += 8;
        return true;
    }
    bool bytes(void *dst, size_t k, const char *field) {
        if (!need(k, field)) return false;
        if (k) std::memcpy(dst, p + at, k);
        at += k;
        return true;
    }
    bool done() {
        if (at == n) return true;
        *error = fmt::format("{}: {} unexpected trailing bytes", message, n - at);
        return false;
    }
};

// A status on the wire must be one the enum defines: converting any other
// 32-bit value to dp_status_t is undefined, and a caller could not act on it.
bool status_defined(uint32_t wire) {
    const int32_t v = int32_t(wire);
    return v >= int32_t(DP_ERR_IO) && v <= int32_t(DP_INPROGRESS);
}

dp_status_t invalid(std::string *error, std::string text) {
    *error = std::move(text);
    return DP_ERR_INVALID;
}

void write_ranges(Writer &w, const std::vector<StagedRange> &ranges) {
    for (const StagedRange &r : ranges) {
        w.u64(r.addr);
        w.u64(r.bytes.size());
        w.bytes(r.bytes.data(), r.bytes.size());
    }
}

// Reads `count` ranges; their lengths must fit in what is left of the
// message, so a forged length cannot make us allocate more than was sent.
bool read_ranges(Reader &r, uint32_t count, std::vector<StagedRange> *out) {
    if (count > kMaxStagedRanges) {
        *r.error = fmt::format("{}: field 'ranges' = {} (at most {})", r.message, count,
                               kMaxStagedRanges);
        return false;
    }
    out->resize(count);
    for (uint32_t i = 0; i < count; ++i) {
        uint64_t len = 0;
        if (!r.u64(&(*out)[i].addr, "range.addr") || !r.u64(&len, "range.len")) return false;
        if (len > r.n - r.at) {
            *r.error = fmt::format("{}: range {} claims {} bytes, only {} were sent", r.message,
                                   i, len, r.n - r.at);
            return false;
        }
        if ((*out)[i].addr + len < (*out)[i].addr) {
            *r.error = fmt::format("{}: range {} [0x{:x}, +{}) wraps around the address space",
                                   r.message, i, (*out)[i].addr, len);
            return false;
        }
        (*out)[i].bytes.resize(len);
        r.bytes((*out)[i].bytes.data(), len, "range.bytes");
    }
    return true;
}

}  // namespace

void encode(const Attach &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u16(m.version);
    w.u8(uint8_t(m.purpose));
    w.u8(0);
    w.u32(m.ring_size);
    w.u64(m.pool_bytes);
    w.u64(m.proof_addr);
    w.bytes(m.proof.data(), m.proof.size());
    w.u32(uint32_t(m.token.size()));
    w.bytes(m.token.data(), m.token.size());
}

dp_status_t decode(const uint8_t *p, size_t n, Attach *out, std::string *error) {
    Reader r{p, n, 0, error, "ATTACH"};
    uint8_t purpose = 0, reserved = 0;
    uint32_t token_len = 0;
    if (!r.u16(&out->version, "version") || !r.u8(&purpose, "purpose") ||
        !r.u8(&reserved, "reserved") || !r.u32(&out->ring_size, "ring_size") ||
        !r.u64(&out->pool_bytes, "pool_bytes") || !r.u64(&out->proof_addr, "proof_addr") ||
        !r.bytes(out->proof.data(), out->proof.size(), "proof") || !r.u32(&token_len, "token_len"))
        return DP_ERR_INVALID;
    if (purpose > uint8_t(Purpose::kTeamProxy))
        return invalid(error, fmt::format("ATTACH: field 'purpose' = {} (0 attach, 1 info, 2 "
                                          "service, 3 team proxy)",
                                          unsigned(purpose)));
    if (reserved != 0) return invalid(error, "ATTACH: field 'reserved' must be 0");
    if (token_len > kMaxTokenBytes) {
        *error = fmt::format("ATTACH: field 'token_len' = {} (at most {})", token_len,
                             kMaxTokenBytes);
        return DP_ERR_TOO_LARGE;
    }
    out->purpose = Purpose(purpose);
    out->token.resize(token_len);
    if (!r.bytes(out->token.data(), token_len, "token") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const Attached &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(m.client_id);
    w.u32(m.num_engines);
    w.u64(m.agent_pid);
    w.u64(m.segment_bytes);
    w.u64(m.ring_offset);
    w.u32(m.ring_size);
    w.u32(0);
    w.u64(m.pool_offset);
    w.u64(m.pool_bytes);
    w.u64(m.max_transfer);
    w.u64(m.max_staged);
}

dp_status_t decode(const uint8_t *p, size_t n, Attached *out, std::string *error) {
    Reader r{p, n, 0, error, "ATTACHED"};
    uint32_t reserved = 0;
    if (!r.u32(&out->client_id, "client_id") || !r.u32(&out->num_engines, "num_engines") ||
        !r.u64(&out->agent_pid, "agent_pid") || !r.u64(&out->segment_bytes, "segment_bytes") ||
        !r.u64(&out->ring_offset, "ring_offset") || !r.u32(&out->ring_size, "ring_size") ||
        !r.u32(&reserved, "reserved") || !r.u64(&out->pool_offset, "pool_offset") ||
        !r.u64(&out->pool_bytes, "pool_bytes") || !r.u64(&out->max_transfer, "max_transfer") ||
        !r.u64(&out->max_staged, "max_staged") || !r.done())
        return DP_ERR_INVALID;
    if (reserved != 0) return invalid(error, "ATTACHED: field 'reserved' must be 0");
    return DP_OK;
}

void encode(const Register &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u64(m.addr);
    w.u64(m.len);
    w.u32(uint32_t(m.kind));
    w.u32(0);
}

dp_status_t decode(const uint8_t *p, size_t n, Register *out, std::string *error) {
    Reader r{p, n, 0, error, "REGISTER"};
    uint32_t kind = 0, reserved = 0;
    if (!r.u64(&out->addr, "addr") || !r.u64(&out->len, "len") || !r.u32(&kind, "kind") ||
        !r.u32(&reserved, "reserved") || !r.done())
        return DP_ERR_INVALID;
    if (kind > uint32_t(RegionKind::kDirect))
        return invalid(error, fmt::format("REGISTER: field 'kind' = {} (0 segment, 1 direct)", kind));
    if (reserved != 0) return invalid(error, "REGISTER: field 'reserved' must be 0");
    if (out->len == 0) return invalid(error, "REGISTER: field 'len' is 0");
    if (out->addr == 0) return invalid(error, "REGISTER: field 'addr' is 0");
    if (out->addr + out->len < out->addr)
        return invalid(error, fmt::format("REGISTER: [0x{:x}, +{}) wraps around the address space",
                                          out->addr, out->len));
    out->kind = RegionKind(kind);
    return DP_OK;
}

void encode_deregister(uint64_t addr, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u64(addr);
}

dp_status_t decode_deregister(const uint8_t *p, size_t n, uint64_t *addr, std::string *error) {
    Reader r{p, n, 0, error, "DEREGISTER"};
    if (!r.u64(addr, "addr") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const HeapShare &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u64(m.addr);
    w.u64(m.len);
}

dp_status_t decode(const uint8_t *p, size_t n, HeapShare *out, std::string *error) {
    Reader r{p, n, 0, error, "HEAP_SHARE"};
    if (!r.u64(&out->addr, "addr") || !r.u64(&out->len, "len") || !r.done())
        return DP_ERR_INVALID;
    if (out->addr == 0 || out->addr % 4096 != 0)
        return invalid(error, fmt::format("HEAP_SHARE: field 'addr' = 0x{:x} is not a page", out->addr));
    if (out->len == 0 || out->len % 4096 != 0)
        return invalid(error, fmt::format("HEAP_SHARE: field 'len' = {} is not whole pages", out->len));
    if (out->addr + out->len < out->addr)
        return invalid(error, fmt::format("HEAP_SHARE: [0x{:x}, +{}) wraps around the address space",
                                          out->addr, out->len));
    return DP_OK;
}

void encode(const Reply &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(uint32_t(int32_t(m.status)));
    size_t len = std::min(m.reason.size(), kMaxReasonBytes);
    w.u32(uint32_t(len));
    w.bytes(m.reason.data(), len);
}

dp_status_t decode(const uint8_t *p, size_t n, Reply *out, std::string *error) {
    Reader r{p, n, 0, error, "REPLY"};
    uint32_t status = 0, len = 0;
    if (!r.u32(&status, "status") || !r.u32(&len, "reason_len")) return DP_ERR_INVALID;
    if (!status_defined(status))
        return invalid(error, fmt::format("REPLY: field 'status' = {} is not a dp_status_t",
                                          int32_t(status)));
    if (len > kMaxReasonBytes)
        return invalid(error, fmt::format("REPLY: field 'reason_len' = {} (at most {})", len,
                                          kMaxReasonBytes));
    out->status = dp_status_t(int32_t(status));
    out->reason.resize(len);
    if (!r.bytes(out->reason.data(), len, "reason") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const Staged &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.bytes(&m.desc, sizeof(m.desc));
    w.u32(uint32_t(m.sources.size()));
    w.u32(0);
    write_ranges(w, m.sources);
}

dp_status_t decode(const uint8_t *p, size_t n, Staged *out, std::string *error) {
    Reader r{p, n, 0, error, "STAGED"};
    uint32_t count = 0, reserved = 0;
    if (!r.bytes(&out->desc, sizeof(out->desc), "descriptor") || !r.u32(&count, "ranges") ||
        !r.u32(&reserved, "reserved"))
        return DP_ERR_INVALID;
    if (reserved != 0) return invalid(error, "STAGED: field 'reserved' must be 0");
    if (!read_ranges(r, count, &out->sources) || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const StagedResult &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(uint32_t(int32_t(m.status)));
    w.u32(uint32_t(m.writes.size()));
    w.bytes(&m.record, sizeof(m.record));
    write_ranges(w, m.writes);
}

dp_status_t decode(const uint8_t *p, size_t n, StagedResult *out, std::string *error) {
    Reader r{p, n, 0, error, "STAGED_RESULT"};
    uint32_t status = 0, count = 0;
    if (!r.u32(&status, "status") || !r.u32(&count, "ranges") ||
        !r.bytes(&out->record, sizeof(out->record), "record"))
        return DP_ERR_INVALID;
    if (!status_defined(status))
        return invalid(error, fmt::format("STAGED_RESULT: field 'status' = {} is not a dp_status_t",
                                          int32_t(status)));
    out->status = dp_status_t(int32_t(status));
    if (!read_ranges(r, count, &out->writes) || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const ProxyPost &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(m.slot);
    w.bytes(m.post, sizeof(m.post));
    w.u64(m.block_base);
    w.u64(m.block_bytes);
    w.u64(m.in_offset);
    w.u64(m.in_total);
    w.u64(m.in.size());
    w.bytes(m.in.data(), m.in.size());
    w.u64(m.counts.size());
    w.bytes(m.counts.data(), m.counts.size());
    w.u8(m.memory);
    w.u64(m.src_base);
    w.u64(m.src_key);
    w.u64(m.dst_base);
    w.u64(m.dst_key);
}

// A length field must fit in what is left of the message: a forged one
// cannot make us allocate more than was sent.
static bool read_sized(Reader &r, std::vector<uint8_t> *out, const char *len_field,
                       const char *field) {
    uint64_t len = 0;
    if (!r.u64(&len, len_field)) return false;
    if (len > r.n - r.at) {
        *r.error = fmt::format("{}: field '{}' = {} (only {} bytes follow)", r.message, len_field,
                               len, r.n - r.at);
        return false;
    }
    out->resize(len);
    return r.bytes(out->data(), len, field);
}

// A proxy message's request slot: one of a team member's.
static bool read_slot(Reader &r, uint32_t *slot) {
    if (!r.u32(slot, "slot")) return false;
    if (*slot < kProxySlots) return true;
    *r.error = fmt::format("{}: field 'slot' = {} (0..{})", r.message, *slot, kProxySlots - 1);
    return false;
}

dp_status_t decode(const uint8_t *p, size_t n, ProxyPost *out, std::string *error) {
    Reader r{p, n, 0, error, "PROXY_POST"};
    if (!read_slot(r, &out->slot) || !r.bytes(out->post, sizeof(out->post), "post") ||
        !r.u64(&out->block_base, "block_base") || !r.u64(&out->block_bytes, "block_bytes") ||
        !r.u64(&out->in_offset, "in_offset") || !r.u64(&out->in_total, "in_total") ||
        !read_sized(r, &out->in, "in_len", "in") ||
        !read_sized(r, &out->counts, "counts_len", "counts") || !r.u8(&out->memory, "memory") ||
        !r.u64(&out->src_base, "src_base") || !r.u64(&out->src_key, "src_key") ||
        !r.u64(&out->dst_base, "dst_base") || !r.u64(&out->dst_key, "dst_key") || !r.done())
        return DP_ERR_INVALID;
    if (out->memory > kProxyRemoteMemory)
        return invalid(error, fmt::format("PROXY_POST: field 'memory' = {} (0 staged, 1 remote "
                                          "memory)",
                                          out->memory));
    if (out->memory == kProxyRemoteMemory &&
        (out->block_base | out->block_bytes | out->in_offset | out->in_total) != 0)
        return invalid(error, "PROXY_POST: a remote-memory post names a bounce block or carries "
                              "bytes (block_base, block_bytes, in_offset and in_total must be 0)");
    uint64_t in_end = 0;
    if (out->in_total < out->in.size())
        return invalid(error, fmt::format("PROXY_POST: field 'in_total' = {} (below the {} bytes "
                                          "that came)",
                                          out->in_total, out->in.size()));
    if (__builtin_add_overflow(out->in_offset, out->in_total, &in_end) ||
        in_end > out->block_bytes)
        return invalid(error, fmt::format("PROXY_POST: {} bytes at in_offset {} do not fit "
                                          "block_bytes {}",
                                          out->in_total, out->in_offset, out->block_bytes));
    return DP_OK;
}

void encode(const ProxyData &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(m.slot);
    w.u64(m.offset);
    w.u64(m.bytes.size());
    w.bytes(m.bytes.data(), m.bytes.size());
}

dp_status_t decode(const uint8_t *p, size_t n, ProxyData *out, std::string *error) {
    Reader r{p, n, 0, error, "PROXY_DATA"};
    if (!read_slot(r, &out->slot) || !r.u64(&out->offset, "offset") ||
        !read_sized(r, &out->bytes, "bytes_len", "bytes") || !r.done())
        return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const ProxyFabric &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(uint32_t(m.provider.size()));
    w.bytes(m.provider.data(), m.provider.size());
    w.u32(uint32_t(m.address.size()));
    w.bytes(m.address.data(), m.address.size());
}

dp_status_t decode(const uint8_t *p, size_t n, ProxyFabric *out, std::string *error) {
    Reader r{p, n, 0, error, "PROXY_FABRIC"};
    uint32_t len = 0;
    if (!r.u32(&len, "provider_len")) return DP_ERR_INVALID;
    if (len == 0 || len > kMaxProviderName)
        return invalid(error, fmt::format("PROXY_FABRIC: field 'provider_len' = {} (1..{})", len,
                                          kMaxProviderName));
    out->provider.resize(len);
    if (!r.bytes(out->provider.data(), len, "provider")) return DP_ERR_INVALID;
    for (char c : out->provider)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ';')
            return invalid(error, "PROXY_FABRIC: field 'provider' holds a character other than "
                                  "a letter, a digit, '_' or ';'");
    if (!r.u32(&len, "address_len")) return DP_ERR_INVALID;
    if (len == 0 || len > kMaxFabricAddress)
        return invalid(error, fmt::format("PROXY_FABRIC: field 'address_len' = {} (1..{})", len,
                                          kMaxFabricAddress));
    out->address.resize(len);
    if (!r.bytes(out->address.data(), len, "address") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const ProxyDone &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(m.slot);
    w.u8(m.status);
    w.u64(m.bytes_completed);
    w.u32(m.result);
    w.u64(m.value);
    w.u64(m.out_offset);
    w.u64(m.out.size());
    w.bytes(m.out.data(), m.out.size());
}

dp_status_t decode(const uint8_t *p, size_t n, ProxyDone *out, std::string *error) {
    Reader r{p, n, 0, error, "PROXY_DONE"};
    if (!read_slot(r, &out->slot) || !r.u8(&out->status, "status") ||
        !r.u64(&out->bytes_completed, "bytes_completed") || !r.u32(&out->result, "result") ||
        !r.u64(&out->value, "value") || !r.u64(&out->out_offset, "out_offset") ||
        !read_sized(r, &out->out, "out_len", "out") ||
        !r.done())
        return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const TeamJoin &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u64(m.join_id);
    w.u32(m.rank);
    w.u32(m.size);
    w.u32(m.timeout_ms);
    w.u32(m.flags);
    w.u32(uint32_t(m.key.size()));
    w.bytes(m.key.data(), m.key.size());
    w.u32(uint32_t(m.secret.size()));
    w.bytes(m.secret.data(), m.secret.size());
}

dp_status_t decode(const uint8_t *p, size_t n, TeamJoin *out, std::string *error) {
    Reader r{p, n, 0, error, "TEAM_JOIN"};
    uint32_t key_len = 0;
    // The join id first: a join refused for a later field is still
    // answered under its id (agent/client_control.cc).
    if (!r.u64(&out->join_id, "join_id") || !r.u32(&out->rank, "rank") ||
        !r.u32(&out->size, "size") || !r.u32(&out->timeout_ms, "timeout_ms") ||
        !r.u32(&out->flags, "flags") || !r.u32(&key_len, "key_len"))
        return DP_ERR_INVALID;
    if (out->flags & ~kJoinFlags)
        return invalid(error, fmt::format("TEAM_JOIN: field 'flags' = 0x{:x} (known: 0x{:x})",
                                          out->flags, kJoinFlags));
    if (key_len == 0 || key_len > kMaxTokenBytes)
        return invalid(error, fmt::format("TEAM_JOIN: field 'key_len' = {} (1..{})", key_len,
                                          kMaxTokenBytes));
    out->key.resize(key_len);
    uint32_t secret_len = 0;
    if (!r.bytes(out->key.data(), key_len, "key") || !r.u32(&secret_len, "secret_len"))
        return DP_ERR_INVALID;
    if (secret_len == 0 || secret_len > kMaxTokenBytes)
        return invalid(error, fmt::format("TEAM_JOIN: field 'secret_len' = {} (1..{}): joining a "
                                          "team needs the job's secret",
                                          secret_len, kMaxTokenBytes));
    out->secret.resize(secret_len);
    if (!r.bytes(out->secret.data(), secret_len, "secret") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode(const TeamReady &m, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u64(m.join_id);
    w.u32(uint32_t(int32_t(m.status)));
    w.u32(m.team_id);
    size_t len = std::min(m.reason.size(), kMaxReasonBytes);
    w.u32(uint32_t(len));
    w.bytes(m.reason.data(), len);
    w.u64(m.board_bytes);
    w.u32(uint32_t(m.pools.size()));
    for (const PoolView &v : m.pools) {
        w.u64(v.member_base);
        w.u64(v.segment_bytes);
        w.u64(v.pool_offset);
        w.u64(v.pool_bytes);
        w.u64(v.heap_base);
        w.u64(v.heap_bytes);
    }
}

dp_status_t decode(const uint8_t *p, size_t n, TeamReady *out, std::string *error) {
    Reader r{p, n, 0, error, "TEAM_READY"};
    uint32_t status = 0, len = 0;
    if (!r.u64(&out->join_id, "join_id") || !r.u32(&status, "status") ||
        !r.u32(&out->team_id, "team_id") || !r.u32(&len, "reason_len"))
        return DP_ERR_INVALID;
    if (!status_defined(status))
        return invalid(error, fmt::format("TEAM_READY: field 'status' = {} is not a dp_status_t",
                                          int32_t(status)));
    if (len > kMaxReasonBytes)
        return invalid(error, fmt::format("TEAM_READY: field 'reason_len' = {} (at most {})", len,
                                          kMaxReasonBytes));
    out->status = dp_status_t(int32_t(status));
    out->reason.resize(len);
    uint32_t pools = 0;
    if (!r.bytes(out->reason.data(), len, "reason") || !r.u64(&out->board_bytes, "board_bytes") ||
        !r.u32(&pools, "pools"))
        return DP_ERR_INVALID;
    if (pools > kMaxBoardMembers)
        return invalid(error, fmt::format("TEAM_READY: field 'pools' = {} (at most {})", pools,
                                          kMaxBoardMembers));
    out->pools.resize(pools);
    for (PoolView &v : out->pools)
        if (!r.u64(&v.member_base, "member_base") || !r.u64(&v.segment_bytes, "segment_bytes") ||
            !r.u64(&v.pool_offset, "pool_offset") || !r.u64(&v.pool_bytes, "pool_bytes") ||
            !r.u64(&v.heap_base, "heap_base") || !r.u64(&v.heap_bytes, "heap_bytes"))
            return DP_ERR_INVALID;
    if (!r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

void encode_team_leave(uint32_t team_id, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u32(team_id);
}

dp_status_t decode_team_leave(const uint8_t *p, size_t n, uint32_t *team_id, std::string *error) {
    Reader r{p, n, 0, error, "TEAM_LEAVE"};
    if (!r.u32(team_id, "team_id") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

size_t ready_fds(const TeamReady &m) {
    if (m.board_bytes == 0) return 0;
    size_t n = 1 + m.pools.size();
    for (const PoolView &v : m.pools) n += v.heap_bytes != 0;
    return n;
}

void encode_team_views(uint64_t join_id, std::vector<uint8_t> *out) {
    Writer w{out};
    w.u64(join_id);
}

dp_status_t decode_team_views(const uint8_t *p, size_t n, uint64_t *join_id, std::string *error) {
    Reader r{p, n, 0, error, "TEAM_VIEWS"};
    if (!r.u64(join_id, "join_id") || !r.done()) return DP_ERR_INVALID;
    return DP_OK;
}

dp_status_t send_message(int fd, MsgType type, const std::vector<uint8_t> &payload,
                         const int *fds, size_t nfds, int64_t timeout_ns, const char *where) {
    DP_CHECK(check_send_size(payload.size(), kMaxControlMessage, where));
    // One buffer so header and payload leave in one sendmsg (the fds ride on
    // the header's first byte).
    std::vector<uint8_t> frame(kFrameHeaderBytes + payload.size());
    encode_frame_header(frame.data(), type, uint32_t(payload.size()));
    if (!payload.empty()) std::memcpy(frame.data() + kFrameHeaderBytes, payload.data(), payload.size());
    return sock::send_with_fds(fd, frame.data(), frame.size(), fds, nfds, timeout_ns, where);
}

dp_status_t recv_message(int fd, size_t max_payload, MsgType *type, std::vector<uint8_t> *payload,
                         UniqueFd *fds, size_t max_fds, size_t *nfds, int64_t timeout_ns,
                         const char *where) {
    Deadline deadline(timeout_ns);
    uint8_t header[kFrameHeaderBytes];
    size_t got_fds = 0;
    DP_CHECK(sock::recv_with_fds(fd, header, sizeof(header), fds, max_fds, &got_fds, timeout_ns,
                                 where));
    if (nfds) *nfds = got_fds;
    FrameHeader h;
    DP_CHECK(decode_frame_header(header, max_payload, where, &h));
    payload->resize(h.length);
    if (h.length) {
        // A message cut midway breaks the connection: the caller drops it.
        int64_t left = deadline.remaining_ns();
        size_t none = 0;
        dp_status_t s = sock::recv_with_fds(fd, payload->data(), h.length, nullptr, 0, &none,
                                            timeout_ns < 0 ? -1 : (left > 0 ? left : 1), where);
        if (s == DP_ERR_TIMEOUT) s = DP_ERR_IO;
        DP_CHECK(s);
    }
    *type = h.type;
    return DP_OK;
}

}  // namespace deputy::channel::control
