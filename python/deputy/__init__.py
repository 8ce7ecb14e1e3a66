"""deputy from Python: attach to the node's agent, form teams, post
collectives on NumPy arrays (or anything NumPy views without a copy) and
keep computing while the agent moves and reduces the bytes.

    import numpy as np, deputy
    with deputy.Context(job_secret="...") as ctx, deputy.Team(ctx, "job", rank, size) as team:
        grad = deputy.empty(1 << 20, np.float32)      # in the shared heap: no copy, no registration
        req = team.iallreduce(grad, op="sum")         # in place
        ...                                            # compute
        req.wait()

The C library is libdeputy (include/deputy/*.h); errors are DeputyError
with the dp_status_t. See python/deputy/README.md."""

from deputy.constants import (ANY_SOURCE, ANY_TAG, DType, MemoryMode, Op, Status, WaitMode, NUMPY,
                              dtype_of, op_of)
from deputy.context import Context, empty, zeros
from deputy.errors import DeputyError
from deputy.team import Message, Request, Team

__all__ = ["Context", "Team", "Request", "Message", "DeputyError", "DType", "Op", "Status",
           "MemoryMode", "WaitMode", "NUMPY", "ANY_SOURCE", "ANY_TAG", "dtype_of", "op_of", "empty",
           "zeros"]
