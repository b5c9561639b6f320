// WorkHetero: one operation of ProcessGroupHetero, from issue to completion. Holds the hc
// requests, keeps the tensors alive while the daemon may touch them, copies staged results back
// into non-contiguous or list outputs, and completes through a future, since DDP's reducer waits
// on the future rather than on wait().
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "hetero_comm/hc.h"

namespace hc::torchext {

class WorkHetero : public c10d::Work {
 public:
  WorkHetero(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
             std::chrono::steady_clock::time_point deadline);
  ~WorkHetero() override;

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  const std::string& name() const { return name_; }
  // This operation's number in its group (from 1, in issue order), named in errors.
  uint64_t seq() const { return seq_; }
  void setSeq(uint64_t seq) { seq_ = seq; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

  // Issue side: requests to wait for, tensors to keep alive, and copies to make once done.
  std::vector<hc_request_t> requests;
  std::vector<at::Tensor> keepAlive;
  std::vector<std::function<void()>> afterSuccess;
  std::chrono::milliseconds limit{0};  // the timeout the deadline came from
  int peer = -1;                       // a send's or recv's other rank
  uint64_t collective = 0;             // a collective's number among the group's collectives

  // Completion side: runs the copies and marks the work and its future done, or failed with text.
  void succeed();
  void failWith(const std::string& text);

 private:
  std::string name_;
  uint64_t seq_ = 0;
  std::vector<at::Tensor> outputs_;
  std::chrono::steady_clock::time_point deadline_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace hc::torchext
