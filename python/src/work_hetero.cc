#include "python/src/work_hetero.h"

#include <stdexcept>

namespace hc::torchext {

WorkHetero::WorkHetero(int rank, c10d::OpType type, std::string name,
                       std::vector<at::Tensor> outputs,
                       std::chrono::steady_clock::time_point deadline)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      deadline_(deadline),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

WorkHetero::~WorkHetero() {
  // Requests are only left here when the group never handed the work to its completion thread
  // (an issue that failed half way); hc_wait frees each.
  for (auto& r : requests) {
    if (r != nullptr) (void)hc_wait(&r);
  }
}

bool WorkHetero::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [this] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
    // Only this wait gives up; the operation stays pending and the group carries on.
    throw std::runtime_error("hetero: " + name_ + " (op " + std::to_string(seq_) +
                             " of this group) is not complete after Work.wait(" +
                             std::to_string(timeout.count()) +
                             " ms); it stays pending and the group is not aborted");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkHetero::succeed() {
  std::exception_ptr error;
  try {
    for (auto& copy : afterSuccess) copy();
  } catch (...) {
    error = std::current_exception();
  }
  keepAlive.clear();
  if (error) {
    finish(error);
    future_->setError(error);
    return;
  }
  finish();
  future_->markCompleted(c10::IValue(outputs_));
}

void WorkHetero::failWith(const std::string& text) {
  auto error = std::make_exception_ptr(std::runtime_error(text));
  keepAlive.clear();
  finish(error);
  future_->setError(error);
}

}  // namespace hc::torchext
