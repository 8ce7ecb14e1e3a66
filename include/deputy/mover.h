/* deputy — the data mover: a software data-streaming accelerator.
 *
 * Shaped like Intel DSA (descriptors, completion records, work queues,
 * engines, groups) so code written for it ports to hardware movers and so the
 * agent can host the same device for other processes. Every address in a
 * descriptor is a 64-bit number the device translates through the submitter's
 * address space: in-process it is a pointer; behind the agent it is checked
 * against what the client registered. Rings therefore never hold pointers that
 * belong to another process.
 *
 * Use: dp_mover_open() -> fill dp_desc_t -> dp_mover_submit() -> poll
 * dp_completion_t.status or dp_mover_wait() -> dp_mover_close(). */
#ifndef DEPUTY_MOVER_H
#define DEPUTY_MOVER_H

#include <deputy/export.h>
#include <deputy/status.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opcodes. Numbers match DSA's where DSA has the operation, so dsa_perf_micros
 * scripts (-o3 = memmove) port unchanged. REDUCE is deputy's own. */
typedef enum dp_opcode {
    DP_OP_NOOP = 0x00,
    DP_OP_BATCH = 0x01,           /* src = address of dp_desc_t[size]; size = member count */
    DP_OP_DRAIN = 0x02,           /* completes after every earlier descriptor of its queue */
    DP_OP_MEMMOVE = 0x03,         /* dst <- src, size bytes, overlap-safe */
    DP_OP_FILL = 0x04,            /* dst <- 8-byte pattern (in pattern) repeated, size bytes */
    DP_OP_COMPARE = 0x05,         /* src vs src2: value = first differing byte offset */
    DP_OP_COMPARE_PATTERN = 0x06, /* src vs pattern repeated: value = first differing offset */
    DP_OP_CREATE_DELTA = 0x07,    /* delta record of src2 against src, written to dst */
    DP_OP_APPLY_DELTA = 0x08,     /* apply delta record at src (delta_size bytes) to dst */
    DP_OP_DUALCAST = 0x09,        /* dst <- src and dst2 <- src */
    DP_OP_CRC32C = 0x10,          /* value = CRC32C(seed, src[0..size)) */
    DP_OP_COPY_CRC32C = 0x11,     /* dst <- src and value = CRC32C(seed, src) */
    DP_OP_DIF_CHECK = 0x12,       /* check src's T10 DIF tuples (see "DIF operations") */
    DP_OP_DIF_INSERT = 0x13,      /* dst <- src's blocks, each followed by a new tuple */
    DP_OP_DIF_STRIP = 0x14,       /* check src's tuples; dst <- the blocks without them */
    DP_OP_DIF_UPDATE = 0x15,      /* check src's tuples; dst <- the blocks with new tuples */
    DP_OP_CACHE_FLUSH = 0x20,     /* write back (and by default evict) dst's cache lines */
    DP_OP_REDUCE = 0x40,          /* dst = src op src2, or dst = dst op src (ACCUMULATE) */
} dp_opcode_t;

/* Descriptor flags. */
enum {
    DP_FLAG_COMPLETION = 1u << 0,  /* write the completion record at .completion */
    DP_FLAG_FENCE = 1u << 1,       /* batch member: start only after every earlier member
                                      finished; if one failed, this and later members are
                                      not executed (status DP_COMP_ABANDONED) */
    DP_FLAG_CACHED = 1u << 2,      /* destination writes stay in cache (regular stores;
                                      CACHE_FLUSH: write back but keep the lines) */
    DP_FLAG_NONTEMPORAL = 1u << 3, /* destination writes bypass the cache (NT stores);
                                      neither flag: the device picks by size */
    DP_FLAG_ACCUMULATE = 1u << 4,  /* REDUCE: dst = dst op src (src2 must be 0) */
};
#define DP_FLAG_ALL 0x1fu

/* Element types and reduction operators of DP_OP_REDUCE (and of collectives). */
typedef enum dp_dtype {
    DP_INT8 = 0, DP_INT16, DP_INT32, DP_INT64,
    DP_UINT8, DP_UINT16, DP_UINT32, DP_UINT64,
    DP_FLOAT16, DP_BFLOAT16, DP_FLOAT32, DP_FLOAT64,
    /* (value, index) pairs, laid out as C's struct { value; index; } with its
     * padding: MPI's MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT (a 64-bit long),
     * MPI_2INT, MPI_SHORT_INT, MPI_2REAL and MPI_2DOUBLE_PRECISION. */
    DP_FLOAT32_INT32, DP_FLOAT64_INT32, DP_INT64_INT32, DP_INT32_INT32, DP_INT16_INT32,
    DP_FLOAT32_FLOAT32, DP_FLOAT64_FLOAT64,
    DP_DTYPE_COUNT
} dp_dtype_t;

/* DP_LAND .. DP_BXOR, MPI's logical and bitwise reductions, apply to the
 * integer types only (DP_INT8 .. DP_UINT64); a logical one gives 1 or 0.
 * DP_MINLOC / DP_MAXLOC apply to the pair types only, and they only: the pair
 * with the smaller (larger) value, and of equal values the one with the lower
 * index (MPI's rule); values that do not compare (a NaN) count as equal. The
 * result is always one of the two pairs, copied whole (its padding too). */
typedef enum dp_op {
    DP_SUM = 0, DP_PROD, DP_MIN, DP_MAX,
    DP_LAND, DP_LOR, DP_LXOR, DP_BAND, DP_BOR, DP_BXOR,
    DP_MINLOC, DP_MAXLOC,
    DP_OP_COUNT
} dp_op_t;

/* A 64-byte work descriptor (one MOVDIR64B/ENQCMD payload on real hardware).
 * Field use per opcode is listed beside each field; unused fields must be 0. */
typedef struct dp_desc {
    uint8_t opcode;      /* dp_opcode_t */
    uint8_t dtype;       /* REDUCE: dp_dtype_t; DIF: source DIF flags (DP_DIF_SRC_*) */
    uint8_t redop;       /* REDUCE: dp_op_t; DIF: destination DIF flags (DP_DIF_DST_*) */
    uint8_t op_flags;    /* DIF: DP_DIF_BLOCK_* | DP_DIF_INVERT_*; otherwise 0 */
    uint32_t flags;      /* DP_FLAG_* */
    uint64_t completion; /* address of a 32-byte aligned dp_completion_t */
    uint64_t src;        /* source (BATCH: descriptor array; APPLY_DELTA: delta record) */
    uint64_t dst;        /* destination (CREATE_DELTA: delta record) */
    uint64_t src2;       /* COMPARE/CREATE_DELTA/REDUCE: second source; DUALCAST: 2nd dest;
                            FILL/COMPARE_PATTERN: the 8-byte pattern; CRC ops: seed;
                            DIF CHECK/STRIP/UPDATE: source tags, DP_DIF_TAGS(...) */
    uint64_t size;       /* bytes (BATCH: member count; APPLY_DELTA: bytes of dst;
                            DIF: bytes of src, tuples included but for INSERT) */
    uint64_t aux;        /* CREATE_DELTA: max delta record bytes; APPLY_DELTA: record bytes
                            (a multiple of 10, at most one entry per 8 bytes of dst);
                            DIF INSERT/UPDATE: destination tags, DP_DIF_TAGS(...) */
    uint64_t user;       /* opaque, copied to the completion record */
} dp_desc_t;

/* Completion record status. 0 means "not yet": poll until non-zero. */
typedef enum dp_comp_status {
    DP_COMP_PENDING = 0,
    DP_COMP_SUCCESS = 1,
    DP_COMP_FALSE_PREDICATE = 2, /* COMPARE*: buffers differ; CREATE_DELTA: delta not empty */
    DP_COMP_INVALID_OPCODE = 3,
    DP_COMP_INVALID_SIZE = 4,    /* 0 where not allowed, above max, or not a multiple */
    DP_COMP_INVALID_FLAGS = 5,   /* unknown or contradictory flags, reserved bits set */
    DP_COMP_INVALID_FIELD = 6,   /* dtype, redop, alignment, non-zero unused field */
    DP_COMP_BATCH_FAILED = 7,    /* batch: result = number of members that failed */
    DP_COMP_OVERLAP = 8,         /* buffers overlap where the operation forbids it */
    DP_COMP_DELTA_OVERFLOW = 9,  /* CREATE_DELTA: record would exceed max (aux) bytes */
    DP_COMP_ADDRESS_DENIED = 10, /* a range is outside the submitter's address space */
    DP_COMP_ABANDONED = 11,      /* batch member skipped after a fence saw a failure */
    DP_COMP_INVALID_BATCH = 12,  /* batch: count 0 or above max_batch_size, nested batch */
    DP_COMP_PAGE_FAULT = 13,     /* behind an agent, direct memory: writing a destination
                                    faulted part-way (a page not writable); value = the
                                    client address of the first byte not written. Bytes
                                    below it in that destination (and in the destinations
                                    written before it) hold the result; the rest is untouched */
    DP_COMP_DIF_ERROR = 14,      /* DIF: a tuple failed its check; result = DP_DIF_ERR_* */
    DP_COMP_STATUS_COUNT
} dp_comp_status_t;

/* A 32-byte completion record. The device writes every field, then status
 * last with release ordering: a reader that sees status != 0 (acquire) sees
 * the rest. */
typedef struct dp_completion {
    volatile uint8_t status; /* dp_comp_status_t */
    uint8_t waiter;          /* internal: non-zero while a waiter sleeps on the record */
    uint16_t reserved;
    uint32_t result;          /* COMPARE*: 0 equal, 1 differ; CREATE_DELTA: 0 none, 1 some;
                                 BATCH: members failed; DIF error: DP_DIF_ERR_* */
    uint64_t bytes_completed; /* bytes processed (BATCH: members completed) */
    uint64_t value;           /* CRC value, delta record bytes, first differing offset,
                                 or DIF: the next block's tags */
    uint64_t user;            /* the descriptor's user field */
} __attribute__((aligned(32))) dp_completion_t;

/* Delta record entry (CREATE_DELTA / APPLY_DELTA), DSA layout: the index of an
 * 8-byte granule followed by the 8 bytes of src2 at that granule. 10 bytes, no
 * padding: records are arrays of these. The 16-bit index limits delta
 * operations to DP_DELTA_MAX_SIZE bytes. */
#define DP_DELTA_ENTRY_SIZE 10
#define DP_DELTA_MAX_SIZE (65536u * 8u)

/* DIF operations: T10 protection information, DSA's operations and fields.
 * Data travels in blocks of 512, 520, 4096 or 4104 bytes; with protection,
 * each block is followed by an 8-byte tuple, big-endian on the medium:
 * guard (CRC16 T10-DIF of the block), application tag (16 bits), reference
 * tag (32 bits). size is the source's bytes: a whole number of blocks for
 * INSERT, of blocks-with-tuples for CHECK, STRIP and UPDATE; the destination
 * holds size / block * (block + 8) bytes (INSERT), size / (block + 8) *
 * block (STRIP) or size (UPDATE); CHECK has none (dst = 0).
 *
 * Tags: the seeds of the first block's tags, packed as DSA packs them
 * (reference tag in bits 0-31, application tag mask in 32-47, application
 * tag in 48-63). A tag of type "incrementing" is its seed plus the block's
 * index; a fixed one is its seed in every block. When checking, the bits set
 * in the application tag mask are not compared (0xffff compares none); a
 * destination's mask is carried unchanged and has no effect.
 *
 * Completion: success, or DP_COMP_DIF_ERROR at the first block whose tuple
 * failed, with result = the DP_DIF_ERR_* bits of what failed and
 * bytes_completed = the source bytes of the blocks before it (their output
 * is written; nothing of the failing block or after it is). value = the tags
 * of the next block to process (the failing one, or the one after the last)
 * in DP_DIF_TAGS form: the source's for CHECK, STRIP and UPDATE, the
 * destination's for INSERT, so a long stream continues where one descriptor
 * stopped. (Behind an agent that reaches a client's ordinary memory by
 * copies, memory mode "direct" or "staged", a DIF error writes nothing.) */
#define DP_DIF_TUPLE_SIZE 8
#define DP_DIF_TAGS(ref_tag, app_tag_mask, app_tag) \
    ((uint64_t)(uint32_t)(ref_tag) | ((uint64_t)(uint16_t)(app_tag_mask) << 32) | \
     ((uint64_t)(uint16_t)(app_tag) << 48))

/* op_flags of a DIF descriptor (DSA's "DIF flags"): the block size in bits
 * 0-1, and how the guard's CRC starts and ends. */
enum {
    DP_DIF_BLOCK_512 = 0,
    DP_DIF_BLOCK_520 = 1,
    DP_DIF_BLOCK_4096 = 2,
    DP_DIF_BLOCK_4104 = 3,
    DP_DIF_INVERT_CRC_SEED = 1u << 2,   /* the CRC starts at 0xffff, not 0 */
    DP_DIF_INVERT_CRC_RESULT = 1u << 3, /* the guard is the CRC's complement */
};
#define DP_DIF_FLAGS_ALL 0x0fu

/* dtype of CHECK, STRIP and UPDATE (DSA's "source DIF flags"): how the
 * source's tuples are checked. A block whose tags match an enabled F-detect
 * condition is not checked (an escape, as T10 defines it). */
enum {
    DP_DIF_SRC_ALL_F_ERROR = 1u << 0,     /* with ALL_F_DETECT: an all-ones tuple fails */
    DP_DIF_SRC_ALL_F_DETECT = 1u << 1,    /* all 8 tuple bytes 0xff: escape */
    DP_DIF_SRC_APP_F_DETECT = 1u << 2,    /* application tag 0xffff: escape */
    DP_DIF_SRC_APP_REF_F_DETECT = 1u << 3, /* app tag 0xffff and ref tag 0xffffffff: escape */
    DP_DIF_SRC_APP_TAG_INCREMENT = 1u << 4, /* application tag incrementing (default fixed) */
    DP_DIF_SRC_GUARD_CHECK_OFF = 1u << 5,
    DP_DIF_SRC_REF_TAG_CHECK_OFF = 1u << 6,
    DP_DIF_SRC_REF_TAG_FIXED = 1u << 7,   /* reference tag fixed (default incrementing) */
};

/* redop of INSERT and UPDATE (DSA's "destination DIF flags"): how the
 * destination's tuples are made. The pass-through bits (UPDATE only) copy
 * the field from the source's tuple instead. */
enum {
    DP_DIF_DST_APP_TAG_PASS = 1u << 3,
    DP_DIF_DST_APP_TAG_INCREMENT = 1u << 4, /* application tag incrementing (default fixed) */
    DP_DIF_DST_GUARD_PASS = 1u << 5,
    DP_DIF_DST_REF_TAG_PASS = 1u << 6,
    DP_DIF_DST_REF_TAG_FIXED = 1u << 7,   /* reference tag fixed (default incrementing) */
};
#define DP_DIF_DST_FLAGS_ALL 0xf8u

/* result of a DP_COMP_DIF_ERROR: what failed in the block. */
enum {
    DP_DIF_ERR_GUARD = 1u << 0,
    DP_DIF_ERR_APP_TAG = 1u << 1,
    DP_DIF_ERR_REF_TAG = 1u << 2,
    DP_DIF_ERR_ALL_F = 1u << 3,
};

typedef enum dp_wq_mode { DP_WQ_DEDICATED = 0, DP_WQ_SHARED = 1 } dp_wq_mode_t;

/* How a caller waits for a completion record. */
typedef enum dp_wait_mode {
    DP_WAIT_SPIN = 0,  /* tight load loop: lowest latency, one busy core */
    DP_WAIT_PAUSE = 1, /* load loop with PAUSE (Arm: YIELD): the SMT sibling gets the core */
    DP_WAIT_YIELD = 2, /* sched_yield between loads: other threads get the core */
    DP_WAIT_BLOCK = 3, /* sleep on a futex: no CPU while waiting, a wake-up's latency */
    DP_WAIT_DEFAULT = 255 /* the device's default (config "wait_mode") */
} dp_wait_mode_t;

/* Simple configuration: one group holding num_wqs queues and num_engines
 * engines. Richer layouts (several groups, per-queue priority) use the
 * accel-config-shaped JSON of dp_mover_open_json(). */
typedef struct dp_mover_config {
    size_t size;                /* sizeof(dp_mover_config_t), for ABI growth */
    uint32_t num_engines;       /* 1..DP_MOVER_MAX_ENGINES */
    uint32_t num_wqs;           /* 1..DP_MOVER_MAX_WQS */
    uint32_t wq_size;           /* descriptors per queue, power of two, 1..65536 */
    uint32_t wq_mode;           /* dp_wq_mode_t */
    uint32_t max_batch_size;    /* members per batch descriptor, 1..4096 */
    uint64_t max_transfer_size; /* bytes per descriptor */
    uint64_t nt_threshold;      /* destination writes at or above this use NT stores; 0 = measured default */
    uint32_t wait_mode;         /* dp_wait_mode_t default for dp_mover_wait */
    const char *cpu_list;       /* engines pinned round-robin on these CPUs ("2,3" or "0-3"); NULL = no pinning */
} dp_mover_config_t;

#define DP_MOVER_MAX_ENGINES 64
#define DP_MOVER_MAX_WQS 64
#define DP_MOVER_CONFIG_INITIALIZER                                                         \
    {                                                                                       \
        sizeof(dp_mover_config_t), 1, 1, 128, DP_WQ_DEDICATED, 64, (2ull << 30), 0, DP_WAIT_SPIN, \
            NULL                                                                            \
    }

typedef struct dp_mover dp_mover_t;

/* Opens a device with its engines running. NULL config = defaults. */
DP_API dp_status_t dp_mover_open(const dp_mover_config_t *config, dp_mover_t **mover);

/* Opens a device from accel-config-shaped JSON text (see docs/mover.md).
 * On DP_ERR_INVALID, *error (if non-NULL) points to a message naming the
 * offending key; it stays valid until the next call on this thread. */
DP_API dp_status_t dp_mover_open_json(const char *json_text, dp_mover_t **mover,
                                      const char **error);

/* Stops the engines after they finish what was submitted, frees the device. */
DP_API dp_status_t dp_mover_close(dp_mover_t *mover);

/* Queues one descriptor on work queue wq (its index in configuration order).
 * Copies the 64 bytes: the caller may reuse desc at once (a BATCH's member
 * array must stay until the batch completes). DP_ERR_RETRY when the queue is
 * full; DP_ERR_INVALID for a wq that does not exist. Field checks happen on
 * the device and are reported in the completion record. A dedicated queue
 * takes one producer thread at a time; a shared queue takes any number. */
DP_API dp_status_t dp_mover_submit(dp_mover_t *mover, uint32_t wq, const dp_desc_t *desc);

/* Non-zero once the record is complete (a single acquire load). */
static inline int dp_mover_poll(const dp_completion_t *comp) {
    return __atomic_load_n(&comp->status, __ATOMIC_ACQUIRE) != DP_COMP_PENDING;
}

/* Waits until comp is complete or timeout_ns passes (<0: forever), in the
 * given mode (DP_WAIT_DEFAULT: the device's). Block mode sleeps on a futex in
 * the record; the device wakes it, across processes too. Returns DP_OK,
 * DP_ERR_TIMEOUT or DP_ERR_INVALID. */
DP_API dp_status_t dp_mover_wait(dp_mover_t *mover, dp_completion_t *comp, dp_wait_mode_t mode,
                                 int64_t timeout_ns);

/* Readable names: "memmove", "success", "float32", "sum", "dedicated", "spin". */
DP_API const char *dp_opcode_name(dp_opcode_t op);
DP_API const char *dp_comp_status_name(dp_comp_status_t status);
DP_API const char *dp_dtype_name(dp_dtype_t dtype);
DP_API const char *dp_op_name(dp_op_t op);
DP_API size_t dp_dtype_size(dp_dtype_t dtype); /* 0 for an unknown dtype */
/* 1 when reduction `op` applies to `dtype` (sum .. bxor to the integer types;
 * sum, prod, min and max to the floating ones; minloc and maxloc to the pair
 * types), else 0. */
DP_API int dp_op_applies(dp_dtype_t dtype, dp_op_t op);

/* Device counters, for `deputy info` and benchmarks. */
typedef struct dp_mover_stats {
    size_t size;
    uint64_t submitted;  /* descriptors accepted by submit */
    uint64_t completed;  /* descriptors (and batch members) completed */
    uint64_t failed;     /* completed with an error status */
    uint64_t retries;    /* submits refused with DP_ERR_RETRY */
    uint64_t bytes;      /* bytes processed */
    uint32_t num_engines;
    uint32_t num_wqs;
} dp_mover_stats_t;

/* Counters of the device so far. An engine counts a descriptor just after
 * publishing its completion record, so right after a record completes the
 * counters may not include it yet. */
DP_API dp_status_t dp_mover_get_stats(dp_mover_t *mover, dp_mover_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_MOVER_H */
