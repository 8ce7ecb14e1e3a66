#include "bench/mover/workload.h"

#include <isa-l/crc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "mover/dif.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::bench {
namespace {

namespace k = mover::kernels;

constexpr uint64_t kFillPattern = 0x0123456789abcdefull;

uint64_t address(const void *p) { return reinterpret_cast<uint64_t>(p); }

// xorshift64*: deterministic, cheap, good enough to make every byte matter.
void fill_random(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t v = x * 0x2545F4914F6CDD1Dull;
        std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
    }
}

// Values a reduction can combine without NaNs, so timings stay on the
// ordinary path: small integers in the element type.
void fill_elements(uint8_t *p, size_t n, dp_dtype_t dtype, uint32_t seed) {
    size_t esize = dp_dtype_size(dtype);
    for (size_t i = 0; i + esize <= n; i += esize) {
        uint32_t small = uint32_t((i / esize + seed) % 61) + 1;
        switch (dtype) {
            case DP_FLOAT32: { float v = float(small) * 0.5f; std::memcpy(p + i, &v, 4); break; }
            case DP_FLOAT64: { double v = double(small) * 0.25; std::memcpy(p + i, &v, 8); break; }
            case DP_FLOAT16: { uint16_t v = uint16_t(0x3C00 + small); std::memcpy(p + i, &v, 2); break; }
            case DP_BFLOAT16: { uint16_t v = uint16_t(0x3F80 + small); std::memcpy(p + i, &v, 2); break; }
            default: { uint64_t v = small; std::memcpy(p + i, &v, esize); break; }
        }
    }
}

uint32_t crc32c_isal(uint32_t seed, const void *p, size_t n) {
    // ISA-L's crc32_iscsi takes the running CRC un-inverted; standard
    // CRC32C inverts on entry and exit. Lengths are int: chunk.
    uint32_t crc = ~seed;
    const auto *bytes = static_cast<const unsigned char *>(p);
    while (n > 0) {
        int chunk = int(std::min<size_t>(n, 1u << 30));
        crc = crc32_iscsi(const_cast<unsigned char *>(bytes), chunk, crc);
        bytes += chunk;
        n -= size_t(chunk);
    }
    return ~crc;
}

// A DIF descriptor's work on the CPU, with the mover's kernel.
k::DifOutcome run_dif(const dp_desc_t &d, const void *src, void *dst) {
    const mover::DifShape shape = mover::checked_dif_shape(d);  // checked when the workload was made
    return k::dif(mover::dif_job(d, shape), src, dst, shape.blocks);
}

std::string first_difference(const uint8_t *got, const uint8_t *want, size_t n) {
    size_t at = k::compare(got, want, n);
    if (at == n) return {};
    char text[96];
    std::snprintf(text, sizeof(text), "byte %zu is 0x%02x, expected 0x%02x", at, got[at], want[at]);
    return text;
}

}  // namespace

BenchBuffer::BenchBuffer(size_t bytes, int node) : size_(bytes) {
    if (bytes == 0) return;
    // Bound to a node, the pages must not exist before the binding.
    const int populate = node < 0 ? MAP_POPULATE : 0;
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate,
                   -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<uint8_t *>(p);
    std::string error;
    if (node >= 0 && !bind_to_node(p, bytes, node, &error)) {
        munmap(p, bytes);
        data_ = nullptr;
        throw std::runtime_error(error);
    }
    std::memset(data_, 0, bytes);  // touch every page even where MAP_POPULATE is ignored
}

BenchBuffer::~BenchBuffer() {
    if (data_) munmap(data_, size_);
}

BenchBuffer::BenchBuffer(BenchBuffer &&other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
}

BenchBuffer &BenchBuffer::operator=(BenchBuffer &&other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
}

bool parse_opcode(const std::string &text, dp_opcode_t *opcode) {
    char *end = nullptr;
    unsigned long number = std::strtoul(text.c_str(), &end, 0);
    bool numeric = !text.empty() && end && *end == '\0';
    if (!numeric) return mover::opcode_from_name(text, opcode);
    // A number names an opcode when the mover has a name for it.
    if (number > 0xff || std::strcmp(mover::opcode_name(unsigned(number)), "unknown") == 0)
        return false;
    *opcode = dp_opcode_t(number);
    return true;
}

bool parse_dtype(const std::string &text, dp_dtype_t *dtype) {
    for (int d = 0; d < DP_DTYPE_COUNT; ++d) {
        if (text == dp_dtype_name(dp_dtype_t(d))) return *dtype = dp_dtype_t(d), true;
    }
    return false;
}

bool parse_redop(const std::string &text, dp_op_t *op) {
    for (int o = 0; o < DP_OP_COUNT; ++o) {
        if (text == dp_op_name(dp_op_t(o))) return *op = dp_op_t(o), true;
    }
    return false;
}

dp_status_t Workload::create(const WorkloadSpec &spec_in, std::unique_ptr<Workload> *out,
                             std::string *error) {
    WorkloadSpec spec = spec_in;
    const char *name = dp_opcode_name(spec.opcode);
    auto bad = [&](const std::string &message) {
        *error = message;
        return DP_ERR_INVALID;
    };
    if (spec.opcode == DP_OP_BATCH || spec.opcode == DP_OP_DRAIN)
        return bad(std::string("-o ") + name +
                   ": not a data operation (batches come from -b; drains are issued by the device "
                   "user, not benchmarked)");
    if (spec.buffers == 0) return bad("-n must be at least 1");
    if (spec.batch == 0) return bad("-b must be at least 1");
    if (spec.opcode == DP_OP_NOOP) spec.transfer_size = 0;
    else if (spec.transfer_size == 0) return bad("-s 0: transfer size must be at least 1 byte");
    bool delta = spec.opcode == DP_OP_CREATE_DELTA || spec.opcode == DP_OP_APPLY_DELTA;
    if (delta && (spec.transfer_size % 8 != 0 || spec.transfer_size > DP_DELTA_MAX_SIZE))
        return bad("-s " + std::to_string(spec.transfer_size) + ": " + name +
                   " needs a multiple of 8 up to " + std::to_string(DP_DELTA_MAX_SIZE) + " bytes");
    if (spec.opcode == DP_OP_REDUCE && spec.transfer_size % dp_dtype_size(spec.dtype) != 0)
        return bad("-s " + std::to_string(spec.transfer_size) + ": not a multiple of the " +
                   dp_dtype_name(spec.dtype) + " element size");
    const dp_opcode_t op = spec.opcode;
    // -s counts the data (as dsa_perf_micros counts it): a DIF operation
    // reads or writes a tuple more per block.
    uint64_t src_len = spec.transfer_size, dst_len = spec.transfer_size;
    if (mover::is_dif(op)) {
        const uint32_t block = mover::dif_block_bytes(spec.dif_block);
        if (spec.transfer_size % block != 0)
            return bad("-s " + std::to_string(spec.transfer_size) + ": " + name +
                       " needs a whole number of DIF blocks of " + std::to_string(block) +
                       " bytes (--dif-block)");
        const uint64_t with_tuples = spec.transfer_size / block * (block + DP_DIF_TUPLE_SIZE);
        src_len = op == DP_OP_DIF_INSERT ? spec.transfer_size : with_tuples;
        dst_len = op == DP_OP_DIF_CHECK    ? 0
                  : op == DP_OP_DIF_STRIP ? spec.transfer_size
                                          : with_tuples;
    }

    std::unique_ptr<Workload> w(new Workload(spec));
    w->src_len_ = src_len;
    w->dst_len_ = dst_len;
    w->stride_ = (std::max(src_len, dst_len) + 63) / 64 * 64;
    const size_t bytes = std::max<size_t>(w->stride_ * spec.buffers, 64);
    try {
        const BufferNodes &at = spec.nodes;
        bool has_src = op != DP_OP_FILL && op != DP_OP_CACHE_FLUSH && op != DP_OP_NOOP;
        if (has_src) w->src_ = BenchBuffer(bytes, at.src);
        if (op == DP_OP_COMPARE || delta || op == DP_OP_REDUCE) w->src2_ = BenchBuffer(bytes, at.third);
        if (op != DP_OP_COMPARE && op != DP_OP_COMPARE_PATTERN && op != DP_OP_CRC32C &&
            op != DP_OP_NOOP && op != DP_OP_CREATE_DELTA && op != DP_OP_DIF_CHECK)
            w->dst_ = BenchBuffer(bytes, at.dst);
        if (op == DP_OP_DUALCAST) w->dst2_ = BenchBuffer(bytes, at.third);
        if (delta) {
            w->record_stride_ = (spec.transfer_size / 8 * DP_DELTA_ENTRY_SIZE + 63) / 64 * 64;
            w->delta_ = BenchBuffer(w->record_stride_ * spec.buffers,
                                    op == DP_OP_CREATE_DELTA ? at.dst : at.src);
        }
        if (op == DP_OP_REDUCE || op == DP_OP_CACHE_FLUSH || op == DP_OP_CREATE_DELTA ||
            (mover::is_dif(op) && op != DP_OP_DIF_CHECK))
            w->expected_ = BenchBuffer(op == DP_OP_CREATE_DELTA ? w->delta_.size() : bytes);
    } catch (const std::bad_alloc &) {
        *error = "cannot allocate the benchmark's buffers (" + std::to_string(bytes >> 20) +
                 " MiB each): lower -n or -s";
        return DP_ERR_NOMEM;
    } catch (const std::runtime_error &e) {
        *error = std::string("-S: ") + e.what();
        return DP_ERR_UNSUPPORTED;
    }
    w->compute_expected();
    w->build_descriptors();
    *out = std::move(w);
    return DP_OK;
}

bool Workload::produces_value() const {
    switch (spec_.opcode) {
        case DP_OP_COMPARE:
        case DP_OP_COMPARE_PATTERN:
        case DP_OP_CREATE_DELTA:
        case DP_OP_CRC32C:
        case DP_OP_COPY_CRC32C:
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: return true;  // (DIF: the next block's tags)
        default: return false;
    }
}

dp_desc_t Workload::dif_fields(dp_opcode_t opcode) const {
    // dsa_perf_micros' seeds; an update moves the blocks to other tags.
    constexpr uint64_t kTags = DP_DIF_TAGS(0x87654321, 0, 0xdcba);
    dp_desc_t d{};
    d.opcode = uint8_t(opcode);
    d.op_flags = uint8_t(spec_.dif_block);
    if (opcode == DP_OP_DIF_INSERT) d.aux = kTags;
    else d.src2 = kTags;
    if (opcode == DP_OP_DIF_UPDATE) d.aux = DP_DIF_TAGS(0x1000, 0, 1);
    return d;
}

void Workload::compute_expected() {
    const size_t n = spec_.transfer_size;
    expected_values_.assign(spec_.buffers, 0);
    cpu_values_.assign(spec_.buffers, 0);
    for (uint32_t i = 0; i < spec_.buffers; ++i) {
        uint8_t *src = src_.data() ? slot(src_, i, stride_) : nullptr;
        uint8_t *src2 = src2_.data() ? slot(src2_, i, stride_) : nullptr;
        uint8_t *dst = dst_.data() ? slot(dst_, i, stride_) : nullptr;
        switch (spec_.opcode) {
            case DP_OP_COMPARE_PATTERN: k::fill(src, kFillPattern, n, k::Store::cached); break;
            case DP_OP_REDUCE:
                fill_elements(src, n, spec_.dtype, i);
                fill_elements(src2, n, spec_.dtype, i * 7 + 3);
                k::reduce(slot(expected_, i, stride_), src, src2, n / dp_dtype_size(spec_.dtype),
                          spec_.dtype, spec_.redop);
                break;
            case DP_OP_CACHE_FLUSH:
                fill_random(dst, n, i);
                std::memcpy(slot(expected_, i, stride_), dst, n);
                break;
            case DP_OP_DIF_CHECK:
            case DP_OP_DIF_STRIP:
            case DP_OP_DIF_UPDATE: {
                // A protected source: random blocks with the tuples an insert makes.
                std::vector<uint8_t> data(n);
                fill_random(data.data(), n, i + 1);
                dp_desc_t insert = dif_fields(DP_OP_DIF_INSERT);
                insert.size = n;
                run_dif(insert, data.data(), src);
                break;
            }
            default:
                if (src) fill_random(src, n, i + 1);
                break;
        }
        if (spec_.opcode == DP_OP_COMPARE) std::memcpy(src2, src, n);
        if (spec_.opcode == DP_OP_CREATE_DELTA || spec_.opcode == DP_OP_APPLY_DELTA) {
            // src2 differs from src in one granule of every 16: a realistic
            // sparse update whose record fits comfortably.
            std::memcpy(src2, src, n);
            for (size_t g = 0; g < n / 8; g += 16) src2[g * 8] ^= 0x5a;
            uint8_t *record = slot(delta_, i, record_stride_);
            uint8_t *want = spec_.opcode == DP_OP_CREATE_DELTA ? slot(expected_, i, record_stride_)
                                                               : record;
            expected_values_[i] = k::create_delta(src, src2, n, want, record_stride_);
            if (spec_.opcode == DP_OP_APPLY_DELTA) std::memcpy(dst, src, n);
        }
        if (spec_.opcode == DP_OP_CRC32C || spec_.opcode == DP_OP_COPY_CRC32C)
            expected_values_[i] = crc32c_isal(0, src, n);
        if (mover::is_dif(spec_.opcode)) {
            dp_desc_t d = dif_fields(spec_.opcode);
            d.size = src_len_;
            expected_values_[i] =
                run_dif(d, src, expected_.data() ? slot(expected_, i, stride_) : nullptr).next_tags;
        }
    }
}

void Workload::build_descriptors() {
    const uint32_t count = spec_.buffers;
    const uint32_t units = (count + spec_.batch - 1) / spec_.batch;
    const bool batched = spec_.batch > 1;
    unit_descs_.assign(units, dp_desc_t{});
    unit_records_.assign(units, dp_completion_t{});
    if (batched) members_.assign(size_t(units) * spec_.batch, dp_desc_t{});
    if (batched && produces_value()) member_records_.assign(count, dp_completion_t{});

    for (uint32_t i = 0; i < count; ++i) {
        dp_desc_t d = mover::is_dif(spec_.opcode) ? dif_fields(spec_.opcode) : dp_desc_t{};
        d.opcode = uint8_t(spec_.opcode);
        d.flags = spec_.store_flags;
        d.size = src_len_;
        d.user = i;
        const size_t n = spec_.transfer_size;
        auto at = [&](const BenchBuffer &b) { return address(slot(b, i, stride_)); };
        switch (spec_.opcode) {
            case DP_OP_NOOP: d.flags = 0; break;
            case DP_OP_MEMMOVE: d.src = at(src_); d.dst = at(dst_); break;
            case DP_OP_FILL: d.dst = at(dst_); d.src2 = kFillPattern; break;
            case DP_OP_COMPARE: d.src = at(src_); d.src2 = at(src2_); break;
            case DP_OP_COMPARE_PATTERN: d.src = at(src_); d.src2 = kFillPattern; break;
            case DP_OP_CREATE_DELTA:
                d.src = at(src_); d.src2 = at(src2_);
                d.dst = address(slot(delta_, i, record_stride_));
                d.aux = n / 8 * DP_DELTA_ENTRY_SIZE;
                break;
            case DP_OP_APPLY_DELTA:
                d.src = address(slot(delta_, i, record_stride_));
                d.aux = expected_values_[i];
                d.dst = at(dst_);
                break;
            case DP_OP_DUALCAST: d.src = at(src_); d.dst = at(dst_); d.src2 = at(dst2_); break;
            case DP_OP_CRC32C: d.src = at(src_); break;
            case DP_OP_COPY_CRC32C: d.src = at(src_); d.dst = at(dst_); break;
            case DP_OP_DIF_CHECK: d.src = at(src_); break;
            case DP_OP_DIF_INSERT:
            case DP_OP_DIF_STRIP:
            case DP_OP_DIF_UPDATE: d.src = at(src_); d.dst = at(dst_); break;
            case DP_OP_CACHE_FLUSH: d.dst = at(dst_); d.flags &= DP_FLAG_CACHED; break;
            case DP_OP_REDUCE:
                d.src = at(src_); d.src2 = at(src2_); d.dst = at(dst_);
                d.dtype = uint8_t(spec_.dtype); d.redop = uint8_t(spec_.redop);
                break;
            default: break;
        }
        uint32_t unit = i / spec_.batch;
        if (!batched) {
            d.flags |= DP_FLAG_COMPLETION;
            d.completion = address(&unit_records_[unit]);
            unit_descs_[unit] = d;
        } else {
            if (produces_value()) {
                d.flags |= DP_FLAG_COMPLETION;
                d.completion = address(&member_records_[i]);
            }
            members_[i] = d;
        }
    }
    if (!batched) return;
    for (uint32_t u = 0; u < units; ++u) {
        dp_desc_t &b = unit_descs_[u];
        b = dp_desc_t{};
        b.opcode = DP_OP_BATCH;
        b.flags = DP_FLAG_COMPLETION;
        b.src = address(&members_[size_t(u) * spec_.batch]);
        b.size = std::min(spec_.batch, count - u * spec_.batch);
        b.completion = address(&unit_records_[u]);
        b.user = u;
    }
}

uint32_t Workload::unit_ops(uint32_t unit) const {
    return spec_.batch > 1 ? uint32_t(unit_descs_[unit].size) : 1;
}

void Workload::run_cpu(uint32_t i) {
    const size_t n = spec_.transfer_size;
    const k::Store store = spec_.store_flags & DP_FLAG_NONTEMPORAL ? k::Store::nontemporal
                                                                   : k::Store::cached;
    uint8_t *src = src_.data() ? slot(src_, i, stride_) : nullptr;
    uint8_t *src2 = src2_.data() ? slot(src2_, i, stride_) : nullptr;
    uint8_t *dst = dst_.data() ? slot(dst_, i, stride_) : nullptr;
    switch (spec_.opcode) {
        case DP_OP_NOOP: break;
        case DP_OP_MEMMOVE: std::memmove(dst, src, n); break;
        case DP_OP_FILL: k::fill(dst, kFillPattern, n, store); break;
        case DP_OP_COMPARE:
            cpu_values_[i] = std::memcmp(src, src2, n) == 0 ? n : k::compare(src, src2, n);
            break;
        case DP_OP_COMPARE_PATTERN: cpu_values_[i] = k::compare_pattern(src, kFillPattern, n); break;
        case DP_OP_CREATE_DELTA:
            cpu_values_[i] = k::create_delta(src, src2, n, slot(delta_, i, record_stride_),
                                             n / 8 * DP_DELTA_ENTRY_SIZE);
            break;
        case DP_OP_APPLY_DELTA:
            k::apply_delta(dst, n, slot(delta_, i, record_stride_), expected_values_[i]);
            break;
        case DP_OP_DUALCAST:
            std::memcpy(dst, src, n);
            std::memcpy(slot(dst2_, i, stride_), src, n);
            break;
        case DP_OP_CRC32C: cpu_values_[i] = crc32c_isal(0, src, n); break;
        case DP_OP_COPY_CRC32C:
            std::memcpy(dst, src, n);
            cpu_values_[i] = crc32c_isal(0, src, n);
            break;
        case DP_OP_CACHE_FLUSH: k::cache_flush(dst, n, spec_.store_flags & DP_FLAG_CACHED); break;
        case DP_OP_REDUCE:
            k::reduce(dst, src, src2, n / dp_dtype_size(spec_.dtype), spec_.dtype, spec_.redop);
            break;
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: {
            dp_desc_t d = dif_fields(spec_.opcode);
            d.size = src_len_;
            cpu_values_[i] = run_dif(d, src, dst).next_tags;
            break;
        }
        default: break;
    }
}

void Workload::flush_buffers() {
    for (const BenchBuffer *b : {&src_, &src2_, &dst_, &dst2_, &delta_})
        if (b->data()) k::cache_flush(b->data(), b->size(), /*keep=*/false);
}

bool Workload::verify(bool cpu_mode, std::string *error) const {
    const size_t n = spec_.transfer_size;
    const bool batched = spec_.batch > 1;
    auto fail = [&](uint32_t i, const std::string &what) {
        *error = "buffer " + std::to_string(i) + ": " + what;
        return false;
    };
    // mover.h: a non-empty delta record completes with "false predicate"
    // (its size is checked against the expected one below).
    auto bad_status = [&](uint8_t status) {
        return status != DP_COMP_SUCCESS &&
               !(spec_.opcode == DP_OP_CREATE_DELTA && status == DP_COMP_FALSE_PREDICATE);
    };
    if (!cpu_mode) {
        for (uint32_t u = 0; u < units(); ++u) {
            uint8_t status = unit_records_[u].status;
            if (bad_status(status))
                return fail(u * spec_.batch, std::string("completion status ") +
                                                 dp_comp_status_name(dp_comp_status_t(status)));
        }
    }
    for (uint32_t i = 0; i < spec_.buffers; ++i) {
        const dp_completion_t *record = nullptr;
        if (!cpu_mode && produces_value())
            record = batched ? &member_records_[i] : &unit_records_[i];
        uint64_t value = record ? record->value : cpu_values_[i];
        if (record && bad_status(record->status))
            return fail(i, std::string("member status ") +
                               dp_comp_status_name(dp_comp_status_t(record->status)));
        const uint8_t *src = src_.data() ? slot(src_, i, stride_) : nullptr;
        const uint8_t *dst = dst_.data() ? slot(dst_, i, stride_) : nullptr;
        std::string diff;
        switch (spec_.opcode) {
            case DP_OP_MEMMOVE:
            case DP_OP_COPY_CRC32C: diff = first_difference(dst, src, n); break;
            case DP_OP_DUALCAST:
                diff = first_difference(dst, src, n);
                if (diff.empty()) diff = first_difference(slot(dst2_, i, stride_), src, n);
                break;
            case DP_OP_FILL:
                if (size_t at = k::compare_pattern(dst, kFillPattern, n); at != n)
                    diff = "byte " + std::to_string(at) + " is not the fill pattern";
                break;
            case DP_OP_APPLY_DELTA: diff = first_difference(dst, slot(src2_, i, stride_), n); break;
            case DP_OP_REDUCE:
            case DP_OP_CACHE_FLUSH: diff = first_difference(dst, slot(expected_, i, stride_), n); break;
            case DP_OP_DIF_INSERT:
            case DP_OP_DIF_STRIP:
            case DP_OP_DIF_UPDATE:
                diff = first_difference(dst, slot(expected_, i, stride_), dst_len_);
                [[fallthrough]];
            case DP_OP_DIF_CHECK:
                if (value != expected_values_[i])
                    return fail(i, "next tags " + std::to_string(value) + ", expected " +
                                       std::to_string(expected_values_[i]));
                break;
            case DP_OP_CREATE_DELTA:
                if (value != expected_values_[i])
                    return fail(i, "delta record is " + std::to_string(value) + " bytes, expected " +
                                       std::to_string(expected_values_[i]));
                diff = first_difference(slot(delta_, i, record_stride_),
                                        slot(expected_, i, record_stride_), value);
                break;
            case DP_OP_COMPARE:
            case DP_OP_COMPARE_PATTERN:
                if (record ? record->result != 0 : value != n)
                    return fail(i, "equal buffers reported different at " + std::to_string(value));
                break;
            default: break;
        }
        if ((spec_.opcode == DP_OP_CRC32C || spec_.opcode == DP_OP_COPY_CRC32C) &&
            value != expected_values_[i]) {
            char text[80];
            std::snprintf(text, sizeof(text), "CRC32C 0x%08x, expected 0x%08x", unsigned(value),
                          unsigned(expected_values_[i]));
            return fail(i, text);
        }
        if (!diff.empty()) return fail(i, diff);
    }
    return true;
}

}  // namespace deputy::bench
