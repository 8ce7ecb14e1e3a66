// Intel DSA's descriptor and completion record, as the device reads and
// writes them. The layouts are the kernel's (<linux/idxd.h>, the uapi every
// DSA user builds against); the offsets below are the DSA specification's
// (Intel Data Streaming Accelerator Architecture Specification, "Descriptor
// Format" and "Completion Record Format"), checked here so that a header
// that ever disagreed with the device would not build. The opcode and flag
// bit-fields of the first 8 bytes cannot be named by offsetof: their
// placement is checked byte by byte in tests/mover/idxd_abi_test.cc.
#pragma once

#include <linux/idxd.h>

#include <cstddef>
#include <cstdint>

namespace deputy::mover::idxd {

inline constexpr size_t kDescBytes = 64;
inline constexpr size_t kRecordBytes = 32;
// The device requires 32-byte aligned completion records (64 with some
// options: we always use 64) and 64-byte aligned batch descriptor lists.
inline constexpr size_t kRecordAlign = 64;
inline constexpr size_t kDescListAlign = 64;

static_assert(sizeof(dsa_hw_desc) == kDescBytes);
static_assert(offsetof(dsa_hw_desc, completion_addr) == 8);
static_assert(offsetof(dsa_hw_desc, src_addr) == 16);      // also pattern, desc_list_addr
static_assert(offsetof(dsa_hw_desc, dst_addr) == 24);      // also src2_addr, comp_pattern
static_assert(offsetof(dsa_hw_desc, xfer_size) == 32);     // also desc_count
static_assert(offsetof(dsa_hw_desc, int_handle) == 36);
static_assert(offsetof(dsa_hw_desc, expected_res) == 40);  // compare, compare pattern
static_assert(offsetof(dsa_hw_desc, delta_addr) == 40);    // create delta
static_assert(offsetof(dsa_hw_desc, max_delta_size) == 48);
static_assert(offsetof(dsa_hw_desc, expected_res_mask) == 56);
static_assert(offsetof(dsa_hw_desc, delta_rec_size) == 40);  // apply delta
static_assert(offsetof(dsa_hw_desc, dest2) == 40);           // dualcast
static_assert(offsetof(dsa_hw_desc, crc_seed) == 40);        // CRC generation, copy with CRC
static_assert(offsetof(dsa_hw_desc, seed_addr) == 48);
// Where each DIF opcode's tags start: reference tag, application tag mask,
// application tag, as mover.h's DP_DIF_TAGS packs them.
inline constexpr size_t kDifSourceTags = 48, kDifDestinationTags = 56;
static_assert(offsetof(dsa_hw_desc, src_dif_flags) == 40);  // DIF check, strip
static_assert(offsetof(dsa_hw_desc, dif_chk_flags) == 42);
static_assert(offsetof(dsa_hw_desc, chk_ref_tag_seed) == 48);
static_assert(offsetof(dsa_hw_desc, chk_app_tag_mask) == 52);
static_assert(offsetof(dsa_hw_desc, chk_app_tag_seed) == 54);
static_assert(offsetof(dsa_hw_desc, dest_dif_flag) == 41);  // DIF insert
static_assert(offsetof(dsa_hw_desc, dif_ins_flags) == 42);
static_assert(offsetof(dsa_hw_desc, ins_ref_tag_seed) == 56);
static_assert(offsetof(dsa_hw_desc, ins_app_tag_mask) == 60);
static_assert(offsetof(dsa_hw_desc, ins_app_tag_seed) == 62);
static_assert(offsetof(dsa_hw_desc, src_upd_flags) == 40);  // DIF update
static_assert(offsetof(dsa_hw_desc, upd_dest_flags) == 41);
static_assert(offsetof(dsa_hw_desc, dif_upd_flags) == 42);
static_assert(offsetof(dsa_hw_desc, src_ref_tag_seed) == 48);
static_assert(offsetof(dsa_hw_desc, src_app_tag_mask) == 52);
static_assert(offsetof(dsa_hw_desc, src_app_tag_seed) == 54);
static_assert(offsetof(dsa_hw_desc, dest_ref_tag_seed) == 56);
static_assert(offsetof(dsa_hw_desc, dest_app_tag_mask) == 60);
static_assert(offsetof(dsa_hw_desc, dest_app_tag_seed) == 62);

static_assert(sizeof(dsa_completion_record) == kRecordBytes);
static_assert(offsetof(dsa_completion_record, result) == 1);
static_assert(offsetof(dsa_completion_record, bytes_completed) == 4);
static_assert(offsetof(dsa_completion_record, fault_addr) == 8);
static_assert(offsetof(dsa_completion_record, crc_val) == 16);
static_assert(offsetof(dsa_completion_record, delta_rec_size) == 16);

// The status byte: bits 6:0 the status code, bit 7 (on a page fault) set
// when the faulting access was a write.
inline uint8_t status_code(uint8_t status) { return status & DSA_COMP_STATUS_MASK; }
inline bool fault_on_write(uint8_t status) { return (status & DSA_COMP_STATUS_WRITE) != 0; }

// Result byte of a memory move that completed partially: the device copied
// from the end (overlapping buffers, destination above source), so what is
// left is the first size - bytes_completed bytes.
inline constexpr uint8_t kMoveDescending = 1;
// Result byte of a create delta record: what the device found.
inline constexpr uint8_t kDeltaNone = 0, kDeltaSome = 1, kDeltaOverflow = 2;

// Flags every descriptor the mover submits carries: a completion record at
// a valid address, written on success too.
inline constexpr uint32_t kRecordFlags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;

}  // namespace deputy::mover::idxd
