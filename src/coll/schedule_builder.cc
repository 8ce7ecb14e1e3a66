#include "coll/schedule_builder.h"

#include <algorithm>

namespace deputy::coll {

ScheduleBuilder::ScheduleBuilder(const CollectiveArgs &args, const char *algorithm)
    : args_(args),
      element_bytes_(dp_dtype_size(args.dtype)),
      next_send_tag_(static_cast<size_t>(args.size), 0),
      next_recv_tag_(static_cast<size_t>(args.size), 0) {
    schedule_.rank = args.rank;
    schedule_.size = args.size;
    schedule_.algorithm = algorithm;
    schedule_.buffer_bytes[static_cast<int>(BufferId::source)] = source_bytes(args);
    schedule_.buffer_bytes[static_cast<int>(BufferId::destination)] = destination_bytes(args);
}

void ScheduleBuilder::need_scratch(size_t bytes) {
    size_t &scratch = schedule_.buffer_bytes[static_cast<int>(BufferId::scratch)];
    scratch = std::max(scratch, bytes);
}

StepId ScheduleBuilder::add(Step step, std::span<const StepId> after) {
    const auto id = static_cast<StepId>(schedule_.steps.size());
    Region reads[2];
    size_t read_count = 0;
    Region writes[1];
    size_t write_count = 0;
    switch (step.kind) {
        case StepKind::send:
            reads[read_count++] = step.src;
            break;
        case StepKind::recv:
            writes[write_count++] = step.dst;
            break;
        case StepKind::reduce:
            reads[read_count++] = step.src;
            reads[read_count++] = step.src2;
            writes[write_count++] = step.dst;
            break;
        case StepKind::copy:
            reads[read_count++] = step.src;
            writes[write_count++] = step.dst;
            break;
    }
    deps_.assign(after.begin(), after.end());
    tracker_.access(id, {reads, read_count}, {writes, write_count}, deps_);
    std::sort(deps_.begin(), deps_.end());
    deps_.erase(std::unique(deps_.begin(), deps_.end()), deps_.end());

    step.first_dependency = static_cast<uint32_t>(schedule_.dependency_list.size());
    step.dependency_count = static_cast<uint32_t>(deps_.size());
    schedule_.dependency_list.insert(schedule_.dependency_list.end(), deps_.begin(), deps_.end());
    schedule_.steps.push_back(step);
    return id;
}

StepId ScheduleBuilder::send(int peer, Region src, std::span<const StepId> after) {
    Step s;
    s.kind = StepKind::send;
    s.peer = peer;
    s.tag = next_send_tag_[static_cast<size_t>(peer)]++;
    s.src = src;
    return add(s, after);
}

StepId ScheduleBuilder::recv(int peer, Region dst, std::span<const StepId> after) {
    Step s;
    s.kind = StepKind::recv;
    s.peer = peer;
    s.tag = next_recv_tag_[static_cast<size_t>(peer)]++;
    s.dst = dst;
    return add(s, after);
}

StepId ScheduleBuilder::reduce(Region dst, Region a, Region b) {
    Step s;
    s.kind = StepKind::reduce;
    s.dtype = args_.dtype;
    s.op = args_.op;
    s.dst = dst;
    s.src = a;
    s.src2 = b;
    return add(s, std::span<const StepId>{});
}

StepId ScheduleBuilder::copy(Region dst, Region src) {
    Step s;
    s.kind = StepKind::copy;
    s.dst = dst;
    s.src = src;
    return add(s, std::span<const StepId>{});
}

size_t ScheduleBuilder::piece_bytes(size_t total) const {
    if (args_.chunk_bytes == 0 || args_.chunk_bytes >= total) return total;
    return std::max(element_bytes_, args_.chunk_bytes / element_bytes_ * element_bytes_);
}

void ScheduleBuilder::send_pieces(int peer, Region src) {
    const size_t piece = piece_bytes(src.bytes);
    for (size_t at = 0; at < src.bytes; at += piece) {
        send(peer, src.sub(at, std::min(piece, src.bytes - at)));
    }
}

void ScheduleBuilder::recv_pieces(int peer, Region dst) {
    const size_t piece = piece_bytes(dst.bytes);
    for (size_t at = 0; at < dst.bytes; at += piece) {
        recv(peer, dst.sub(at, std::min(piece, dst.bytes - at)));
    }
}

void ScheduleBuilder::recv_reduce_pieces(int peer, Region dst, Region mine, Region landing,
                                         bool incoming_first) {
    const size_t piece = piece_bytes(dst.bytes);
    for (size_t at = 0; at < dst.bytes; at += piece) {
        const size_t n = std::min(piece, dst.bytes - at);
        const Region in = landing.sub(at, n);
        recv(peer, in);
        if (incoming_first) {
            reduce(dst.sub(at, n), in, mine.sub(at, n));
        } else {
            reduce(dst.sub(at, n), mine.sub(at, n), in);
        }
    }
}

void ScheduleBuilder::copy_pieces(Region dst, Region src) {
    const size_t piece = piece_bytes(dst.bytes);
    for (size_t at = 0; at < dst.bytes; at += piece) {
        const size_t n = std::min(piece, dst.bytes - at);
        copy(dst.sub(at, n), src.sub(at, n));
    }
}

Schedule ScheduleBuilder::finish() {
    return std::move(schedule_);
}

}  // namespace deputy::coll
