#include "daemon/staging/staged_transfer.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>

namespace hc::staging {
namespace {

using coll::net::NetOp;
using coll::net::NetOpKind;
using coll::net::NetOpPtr;
using coll::net::NetOpSpec;

// The bytes from the front of a transfer that are done, from pieces done in any order.
class Prefix {
 public:
  uint64_t front() const { return front_; }
  void add(uint64_t offset, uint64_t bytes) {
    pending_[offset] = bytes;
    for (auto it = pending_.begin(); it != pending_.end() && it->first == front_;
         it = pending_.erase(it)) {
      front_ += it->second;
    }
  }

 private:
  uint64_t front_ = 0;
  std::map<uint64_t, uint64_t> pending_;  // done pieces beyond front_, by offset
};

class StagedTransfer final : public NetOp {
 public:
  StagedTransfer(const StagedTransferPlan& plan, bool send, size_t minTail)
      : plan_(plan), send_(send), minTail_(minTail) {}

  ~StagedTransfer() override {
    // The owner waits for a final outcome, which waits for every copy; only events are left.
    for (const Copy& c : copies_) (void)plan_.device->releaseEvent(c.event);
  }

  Status init(const NetOpSpec& spec) {
    NetOpSpec inner = spec;
    inner.ringBytes = plan_.ringBytes;
    if (send_) {
      inner.sendReady = [this] { return ready_; };
      if (plan_.ringBytes != 0) {
        inner.onSent = [this](size_t offset, size_t bytes) { sent_.add(offset, bytes); };
      }
    } else {
      inner.onLanded = [this](size_t offset, size_t bytes) { copy(offset, bytes); };
      if (plan_.ringBytes != 0) {
        inner.recvReady = [this] { return copiedIn_.front() + plan_.ringBytes; };
      }
    }
    auto op = coll::net::makeNetOp(inner);
    if (!op.isOk()) return op.status();
    inner_ = std::move(op.value());
    return okStatus();
  }

  Status start() override {
    HC_RETURN_IF_ERROR(inner_->start());
    if (send_) copyOut();
    return okStatus();
  }

  Result<bool> progress() override {
    poll();
    if (send_) copyOut();
    if (!innerDone_) {
      Result<bool> r = inner_->progress();
      if (!r.isOk()) {
        innerDone_ = true;
        innerStatus_ = r.status();
      } else if (*r) {
        innerDone_ = true;
      }
    }
    poll();
    // Copies still in flight read or write the buffers, which are lent until this is final.
    if (!innerDone_ || !copies_.empty()) return false;
    if (!failure_.isOk()) return failure_;
    if (!innerStatus_.isOk()) return innerStatus_;
    return true;
  }

  void abort(Status why) override {
    if (!innerDone_) inner_->abort(std::move(why));
  }
  const char* algorithm() const override { return send_ ? "send_staged" : "recv_staged"; }
  bool pollSoon() const override { return !copies_.empty(); }

 private:
  struct Copy {
    uint64_t offset;
    uint64_t bytes;
    device::EventId event;
  };

  // Sender: enqueues the copies out of the device that the ring has room for (all of them
  // without a ring), in order on one stream, so each wire chunk leaves as soon as its bytes have
  // landed. A copy never leaves a remainder shorter than the transport's shortest message into
  // device memory: the wire's last chunk, which is that much longer, then lies in one copy.
  void copyOut() {
    while (nextCopy_ < plan_.bytes && failure_.isOk()) {
      uint64_t end = std::min(nextCopy_ + plan_.chunkBytes, plan_.bytes);
      if (plan_.bytes - end < minTail_) end = plan_.bytes;
      // Its stretch of the ring still holds the previous lap's chunks until they were sent.
      if (plan_.ringBytes != 0 && end > sent_.front() + plan_.ringBytes) return;
      copy(nextCopy_, end - nextCopy_);
      nextCopy_ = end;
    }
  }

  // Enqueues the copy of [offset, offset + bytes): out of the device (send), into it (recv).
  void copy(uint64_t offset, uint64_t bytes) {
    if (!failure_.isOk()) return;  // after a failure nothing more is copied
    device::Device& d = *plan_.device;
    auto stream = plan_.lanes->stream(&d, !send_);
    if (!stream.isOk()) return fail(stream.status());
    uint8_t* dev = plan_.deviceBytes + offset;
    uint8_t* host = plan_.host + (plan_.ringBytes != 0 ? offset % plan_.ringBytes : offset);
    Status enqueued =
        send_ ? d.copyAsync(*stream, host, dev, bytes) : d.copyAsync(*stream, dev, host, bytes);
    if (!enqueued.isOk()) return fail(enqueued);
    auto event = d.recordEvent(*stream);
    if (!event.isOk()) return fail(event.status());
    copies_.push_back(Copy{offset, bytes, *event});
  }

  // Collects finished copies. A sender's complete in order (one stream), so the bytes ready to
  // send grow as a prefix.
  void poll() {
    for (auto it = copies_.begin(); it != copies_.end();) {
      Result<bool> done = plan_.device->queryEvent(it->event);
      if (done.isOk() && !*done) {
        if (send_) break;
        ++it;
        continue;
      }
      (void)plan_.device->releaseEvent(it->event);
      if (!done.isOk()) {
        fail(done.status());
      } else if (send_) {
        ready_ = it->offset + it->bytes;
      } else {
        copiedIn_.add(it->offset, it->bytes);
      }
      it = copies_.erase(it);
    }
  }

  void fail(const Status& why) {
    if (!failure_.isOk()) return;
    failure_ = Status(Code::DeviceError,
                      std::string("staging copy ") + (send_ ? "out of " : "into ") +
                          device::deviceLabel(plan_.device->info()) + " failed: " + why.message());
    plan_.lanes->drop(plan_.device, !send_);
    if (!innerDone_) inner_->abort(failure_);
  }

  const StagedTransferPlan plan_;
  const bool send_;
  const size_t minTail_;  // the transport's directMinBytes(): the runner's chunks end alike
  NetOpPtr inner_;
  bool innerDone_ = false;
  Status innerStatus_ = okStatus();
  Status failure_ = okStatus();
  std::deque<Copy> copies_;
  // Send: the next copy out's offset; the bytes from the front in host memory; those sent.
  uint64_t nextCopy_ = 0;
  size_t ready_ = 0;
  Prefix sent_;
  // Recv: the bytes from the front copied into the device.
  Prefix copiedIn_;
};

}  // namespace

TransferLanes::~TransferLanes() {
  for (auto& [lane, stream] : streams_) (void)lane.first->destroyStream(stream);
}

Result<device::StreamId> TransferLanes::stream(device::Device* device, bool toDevice) {
  auto it = streams_.find({device, toDevice});
  if (it != streams_.end()) return it->second;
  auto made = device->createStream();
  if (!made.isOk()) return made.status();
  streams_.emplace(std::make_pair(device, toDevice), *made);
  return *made;
}

void TransferLanes::drop(device::Device* device, bool toDevice) {
  auto it = streams_.find({device, toDevice});
  if (it == streams_.end()) return;
  (void)device->destroyStream(it->second);
  streams_.erase(it);
}

StagingGeometry stagingGeometry(uint64_t bytes, uint64_t wireBytes, uint64_t mostBytes,
                                uint64_t minTail) {
  const uint64_t wire = std::max<uint64_t>(wireBytes, 1);
  const uint64_t most = std::max<uint64_t>(mostBytes, 1);
  uint64_t chunk = std::min(most, std::max(bytes / 4, wire));
  chunk = (chunk + wire - 1) / wire * wire;
  const uint64_t ring = 4 * chunk;
  // A ring only where it saves memory, and long enough that a copy plus the longest last chunk
  // never needs the stretch that copy refills.
  if (bytes <= ring + minTail || minTail > 3 * chunk) {
    return StagingGeometry{chunk, 0, std::max<uint64_t>(bytes, 1)};
  }
  return StagingGeometry{chunk, ring, ring + minTail};
}

Result<NetOpPtr> makeStagedTransfer(const NetOpSpec& spec, const StagedTransferPlan& plan) {
  if (spec.kind != NetOpKind::Send && spec.kind != NetOpKind::Recv) {
    return invalidArgument("a staged transfer is a send or a receive");
  }
  if (plan.device == nullptr || plan.lanes == nullptr || plan.chunkBytes == 0 ||
      spec.buffer != plan.host || spec.transport == nullptr) {
    return invalidArgument("a staged transfer needs a device, lanes, a chunk size and its buffer");
  }
  const size_t minTail = spec.transport->directMinBytes();
  const uint64_t needs =
      plan.ringBytes != 0 ? plan.ringBytes + minTail : std::max<uint64_t>(plan.bytes, 1);
  if (plan.hostBytes < needs ||
      (plan.ringBytes != 0 &&
       (plan.ringBytes % plan.chunkBytes != 0 || plan.chunkBytes % spec.options.chunkBytes != 0))) {
    return invalidArgument("staging of " + std::to_string(plan.hostBytes) + " B in copies of " +
                           std::to_string(plan.chunkBytes) + " B (ring " +
                           std::to_string(plan.ringBytes) + " B) does not fit a transfer of " +
                           std::to_string(plan.bytes) + " B in wire chunks of " +
                           std::to_string(spec.options.chunkBytes) + " B");
  }
  auto op = std::make_unique<StagedTransfer>(plan, spec.kind == NetOpKind::Send, minTail);
  HC_RETURN_IF_ERROR(op->init(spec));
  return NetOpPtr(std::move(op));
}

}  // namespace hc::staging
