// The buffers and descriptors of one benchmark configuration, the CPU
// baseline of each operation, and the check of every destination afterwards.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/mover/numa_nodes.h"

namespace deputy::bench {

struct WorkloadSpec {
    dp_opcode_t opcode = DP_OP_MEMMOVE;
    uint64_t transfer_size = 4096;
    uint32_t buffers = 32;
    uint32_t batch = 1;
    uint32_t store_flags = 0;  // DP_FLAG_CACHED, DP_FLAG_NONTEMPORAL or 0
    dp_dtype_t dtype = DP_FLOAT32;
    dp_op_t redop = DP_SUM;
    unsigned dif_block = DP_DIF_BLOCK_512;  // DIF operations: op_flags' block-size code
    BufferNodes nodes;  // -S: NUMA node of each buffer (unset: where first touched)
};

// Memory the benchmark owns: page-aligned, pre-faulted at allocation so
// first-touch page faults never land in a timed region.
class BenchBuffer {
public:
    BenchBuffer() = default;
    // On NUMA node `node` (its pages bound there before the first touch;
    // std::runtime_error when they cannot be), or where first touched (-1).
    explicit BenchBuffer(size_t bytes, int node = -1);
    ~BenchBuffer();
    BenchBuffer(BenchBuffer &&other) noexcept;
    BenchBuffer &operator=(BenchBuffer &&other) noexcept;
    uint8_t *data() const { return data_; }
    size_t size() const { return size_; }

private:
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
};

class Workload {
public:
    // Checks the spec (sizes the operation allows) and prepares every buffer,
    // descriptor and expected result. DP_ERR_INVALID with *error naming the flag.
    static dp_status_t create(const WorkloadSpec &spec, std::unique_ptr<Workload> *out,
                              std::string *error);

    // A unit is what one submit carries: one descriptor, or a batch of
    // `batch` descriptors.
    uint32_t units() const { return uint32_t(unit_descs_.size()); }
    const dp_desc_t &unit_desc(uint32_t unit) const { return unit_descs_[unit]; }
    dp_completion_t &unit_record(uint32_t unit) { return unit_records_[unit]; }
    uint32_t unit_ops(uint32_t unit) const;
    // Operations and bytes of one pass over every buffer.
    uint64_t ops_per_pass() const { return spec_.buffers; }
    uint64_t bytes_per_pass() const { return spec_.transfer_size * spec_.buffers; }

    // The calling core performs the operation on buffer i (the -m baseline):
    // libc for memmove/dualcast/compare, ISA-L directly for CRC, the mover's
    // kernels where libc has no equivalent.
    void run_cpu(uint32_t buffer);

    // Writes every buffer back to memory and evicts it (-zF).
    void flush_buffers();

    // After a run: every destination and completion value against what was
    // computed at setup. cpu_mode: values come from run_cpu, not records.
    bool verify(bool cpu_mode, std::string *error) const;

private:
    explicit Workload(const WorkloadSpec &spec) : spec_(spec) {}
    void build_descriptors();
    void compute_expected();
    uint8_t *slot(const BenchBuffer &buffer, uint32_t i, size_t stride) const {
        return buffer.data() + size_t(i) * stride;
    }
    bool produces_value() const;
    // The DIF fields of every descriptor of a DIF workload (no addresses).
    dp_desc_t dif_fields(dp_opcode_t opcode) const;

    WorkloadSpec spec_;
    size_t stride_ = 0;         // bytes between buffers (transfer size rounded up to 64)
    size_t record_stride_ = 0;  // delta record bytes per buffer
    uint64_t src_len_ = 0;      // bytes a descriptor reads from src (-s, but for DIF)
    uint64_t dst_len_ = 0;      // bytes it writes to dst
    BenchBuffer src_, src2_, dst_, dst2_, delta_, expected_;
    std::vector<dp_desc_t> unit_descs_;
    std::vector<dp_desc_t> members_;  // batch member arrays, `batch` per unit
    std::vector<dp_completion_t> unit_records_;
    std::vector<dp_completion_t> member_records_;  // one per buffer when values matter
    std::vector<uint64_t> expected_values_;        // CRC or delta size per buffer
    std::vector<uint64_t> cpu_values_;
};

// Resolves -o: "memmove", "crc32c", or a DSA opcode number ("3", "0x10").
bool parse_opcode(const std::string &text, dp_opcode_t *opcode);
bool parse_dtype(const std::string &text, dp_dtype_t *dtype);
bool parse_redop(const std::string &text, dp_op_t *op);

}  // namespace deputy::bench
