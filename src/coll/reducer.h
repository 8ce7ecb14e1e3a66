// The arithmetic of reduce steps, behind an interface so that schedules and
// whoever runs them need not know where it happens: the mover's SIMD kernels
// in-process (KernelReducer), a mover device behind the agent, or a plain
// loop in a test.
//
// Contract, for every dp_dtype_t and dp_op_t: dst[i] = a[i] op b[i] for
// i < count, elementwise, with the semantics of deputy::mover::kernels::reduce
// (integers wrap; float16/bfloat16 computed in float32 and rounded to
// nearest-even; min/max as MINPS/MAXPS). dst may be exactly a or exactly b;
// no other overlap.
//
// Operand order: a op b and b op a give the same bytes except with NaN
// operands (which payload survives; min/max return b when either is NaN)
// and for min/max of +0 and -0. Algorithms in which partners each combine
// the same two values therefore fix the order (lower rank's operand first)
// so that every rank ends with the same bytes.
#pragma once

#include <deputy/mover.h>

#include <cstddef>

namespace deputy::coll {

class Reducer {
  public:
    virtual ~Reducer() = default;
    virtual void reduce(void *dst, const void *a, const void *b, size_t count, dp_dtype_t dtype,
                        dp_op_t op) const = 0;
};

// The mover's software kernels, on the calling thread (best ISA of this CPU).
class KernelReducer final : public Reducer {
  public:
    void reduce(void *dst, const void *a, const void *b, size_t count, dp_dtype_t dtype,
                dp_op_t op) const override;
};

}  // namespace deputy::coll
