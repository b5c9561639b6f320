#include "daemon/control/health_service.h"

#include <mutex>

namespace hc::control {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthCheckResponse::ServingStatus toProto(ServingStatus status) {
  switch (status) {
    case ServingStatus::Serving:
      return HealthCheckResponse::SERVING;
    case ServingStatus::NotServing:
      return HealthCheckResponse::NOT_SERVING;
    case ServingStatus::ServiceUnknown:
      return HealthCheckResponse::SERVICE_UNKNOWN;
    case ServingStatus::Unknown:
      break;
  }
  return HealthCheckResponse::UNKNOWN;
}

// One Watch stream. At most one write is in flight; a change that arrives meanwhile is sent when
// it completes, and only the newest status is sent (a watcher wants the state, not the history).
// Lives until OnDone, which unsubscribes it: the board calls it under its own lock, so it is
// never called after unsubscribe() returns.
class WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse>,
                           public HealthWatcher {
 public:
  WatchReactor(HealthBoard& board, const std::string& service, std::atomic<int>* open)
      : board_(board), open_(open) {
    std::optional<ServingStatus> first = board_.subscribe(service, this);
    std::unique_lock lock(mutex_);
    if (!first) {
      closing_ = true;  // the daemon is stopping: end the call at once
    } else if (!seen_) {
      latest_ = *first;
      seen_ = true;
    }
    pump(lock);
  }

  // HealthWatcher: under the board's lock, on the thread that changed it.
  void onStatus(ServingStatus status) override {
    std::unique_lock lock(mutex_);
    latest_ = status;
    seen_ = true;
    pump(lock);
  }
  void onClose() override {
    std::unique_lock lock(mutex_);
    closing_ = true;
    pump(lock);
  }

  // grpc::ServerWriteReactor
  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mutex_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the client went away
    pump(lock);
  }
  void OnCancel() override {
    std::unique_lock lock(mutex_);
    cancelled_ = true;
    pump(lock);
  }
  void OnDone() override {
    board_.unsubscribe(this);
    open_->fetch_sub(1);
    delete this;
  }

 private:
  // Starts the next write or ends the call, whichever is due. Called with mutex_ held; releases
  // it before calling into gRPC, whose completions take it again.
  void pump(std::unique_lock<std::mutex>& lock) {
    if (finished_ || writing_) return;
    if (!cancelled_ && seen_ && (!sentAny_ || latest_ != sent_)) {
      sent_ = latest_;
      sentAny_ = true;
      writing_ = true;
      response_.set_status(toProto(sent_));
      lock.unlock();
      StartWrite(&response_);
      return;
    }
    if (cancelled_ || closing_) {
      finished_ = true;
      lock.unlock();
      Finish(cancelled_ ? grpc::Status::CANCELLED
                        : grpc::Status(grpc::StatusCode::UNAVAILABLE, "hetero-commd is stopping"));
    }
  }

  HealthBoard& board_;
  std::atomic<int>* open_;
  std::mutex mutex_;
  HealthCheckResponse response_;  // owned by gRPC while writing_
  ServingStatus latest_ = ServingStatus::Unknown;
  ServingStatus sent_ = ServingStatus::Unknown;
  bool seen_ = false;
  bool sentAny_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
};

// A Watch beyond the cap: ends at once, holding nothing.
class RefusedWatch final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit RefusedWatch(int cap) {
    Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        std::to_string(cap) + " health Watch streams are open already"));
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::optional<ServingStatus> status = board_.get(request->service());
  if (!status) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    response->set_status(toProto(*status));
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/, const HealthCheckRequest* request) {
  if (watches_.fetch_add(1) >= maxWatches_) {
    watches_.fetch_sub(1);
    return new RefusedWatch(maxWatches_);
  }
  return new WatchReactor(board_, request->service(), &watches_);
}

}  // namespace hc::control
