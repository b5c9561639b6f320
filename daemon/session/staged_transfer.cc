#include "daemon/session/staged_transfer.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>

namespace hc::session {
namespace {

using coll::net::NetOp;
using coll::net::NetOpKind;
using coll::net::NetOpPtr;
using coll::net::NetOpSpec;

class StagedTransfer final : public NetOp {
 public:
  StagedTransfer(const StagedTransferPlan& plan, bool send) : plan_(plan), send_(send) {}

  ~StagedTransfer() override {
    // The owner waits for a final outcome, which waits for every copy; only events are left.
    for (const Copy& c : copies_) (void)plan_.device->releaseEvent(c.event);
  }

  Status init(const NetOpSpec& spec) {
    NetOpSpec inner = spec;
    if (send_) {
      inner.sendReady = [this] { return ready_; };
    } else {
      inner.onLanded = [this](size_t offset, size_t bytes) { copy(offset, bytes); };
    }
    auto op = coll::net::makeNetOp(inner);
    if (!op.isOk()) return op.status();
    inner_ = std::move(op.value());
    return okStatus();
  }

  Status start() override {
    HC_RETURN_IF_ERROR(inner_->start());
    // Every chunk out of the device at once, in order on one stream: each wire chunk leaves as
    // soon as its bytes have landed.
    if (send_) {
      for (uint64_t off = 0; off < plan_.bytes && failure_.isOk(); off += plan_.chunkBytes) {
        copy(off, std::min(plan_.chunkBytes, plan_.bytes - off));
      }
    }
    return okStatus();
  }

  Result<bool> progress() override {
    poll();
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

  // Enqueues the copy of [offset, offset + bytes): out of the device (send), into it (recv).
  void copy(uint64_t offset, uint64_t bytes) {
    if (!failure_.isOk()) return;  // after a failure nothing more is copied
    device::Device& d = *plan_.device;
    auto stream = plan_.lanes->stream(&d, !send_);
    if (!stream.isOk()) return fail(stream.status());
    uint8_t* dev = plan_.deviceBytes + offset;
    uint8_t* host = plan_.host + offset;
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
  NetOpPtr inner_;
  bool innerDone_ = false;
  Status innerStatus_ = okStatus();
  Status failure_ = okStatus();
  size_t ready_ = 0;  // send: bytes from the front that have landed in host memory
  std::deque<Copy> copies_;
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

Result<NetOpPtr> makeStagedTransfer(const NetOpSpec& spec, const StagedTransferPlan& plan) {
  if (spec.kind != NetOpKind::Send && spec.kind != NetOpKind::Recv) {
    return invalidArgument("a staged transfer is a send or a receive");
  }
  if (plan.device == nullptr || plan.lanes == nullptr || plan.chunkBytes == 0 ||
      spec.buffer != plan.host) {
    return invalidArgument("a staged transfer needs a device, lanes, a chunk size and its buffer");
  }
  auto op = std::make_unique<StagedTransfer>(plan, spec.kind == NetOpKind::Send);
  HC_RETURN_IF_ERROR(op->init(spec));
  return NetOpPtr(std::move(op));
}

}  // namespace hc::session
