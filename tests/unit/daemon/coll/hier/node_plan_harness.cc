#include "tests/unit/daemon/coll/hier/node_plan_harness.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <sstream>

#include "tests/unit/daemon/coll/net/net_test_harness.h"

namespace hc::coll::hier::testing {
namespace {

using net::testing::kBfloat16;
using net::testing::kFloat16;
using net::testing::kFloat32;
using net::testing::kFloat64;
using net::testing::kInt64;
using net::testing::kInt8;
using net::testing::sizeOf;

std::string hexOf(const uint8_t* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (size_t i = n; i-- > 0;) {  // little-endian: most significant byte last
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string showElement(uint8_t dtype, const uint8_t* bytes) {
  std::ostringstream out;
  auto as = [bytes](auto value) {
    std::memcpy(&value, bytes, sizeof value);
    return value;
  };
  switch (dtype) {
    case kInt8:
      out << int{as(int8_t{})};
      break;
    case kInt64:
      out << as(int64_t{});
      break;
    case kFloat16:
      out << static_cast<float>(as(_Float16{}));
      break;
    case kFloat32:
      out << as(float{});
      break;
    case kFloat64:
      out << as(double{});
      break;
    case kBfloat16:
      out << std::bit_cast<float>(uint32_t{as(uint16_t{})} << 16);
      break;
  }
  out << " [" << hexOf(bytes, sizeOf(dtype)) << "]";
  return out.str();
}

RankMemory::RankMemory(uint8_t dtype, const BufferShape& shape, const std::vector<uint8_t>& input,
                       uint64_t scalar)
    : dtype_(dtype), scalar_(scalar) {
  const size_t esz = sizeOf(dtype);
  auto add = [&](const char* name, uint64_t elems) -> Region& {
    regions_.push_back(Region{name, std::make_unique<Guarded>(elems * esz), {}});
    return regions_.back();
  };
  if (shape.inPlace) {
    const bool sendLarger = shape.sendElems >= shape.recvElems;
    Region& one = add("buffer", std::max(shape.sendElems, shape.recvElems));
    uint8_t* base = one.memory->data();
    send_ = base + (sendLarger ? 0 : shape.offset * esz);
    recv_ = base + (sendLarger ? shape.offset * esz : 0);
    recvRegion_ = 0;
    recvAt_ = static_cast<size_t>(recv_ - base);
    inPlace_ = true;
  } else {
    if (shape.hasSend) send_ = add("send", shape.sendElems).memory->data();
    if (shape.hasRecv) {
      recvRegion_ = regions_.size();
      recv_ = add("recv", shape.recvElems).memory->data();
    }
  }
  if (send_ != nullptr) {
    EXPECT_EQ(input.size(), shape.sendElems * esz) << "test bug: input of the wrong size";
    if (!input.empty()) std::memcpy(const_cast<uint8_t*>(send_), input.data(), input.size());
  }
  for (Region& r : regions_) r.want.assign(r.memory->data(), r.memory->data() + r.memory->size());
}

void RankMemory::expectAtRecv(const std::vector<uint8_t>& bytes) {
  ASSERT_NE(recv_, nullptr) << "test bug: an output expected of a rank without a receive buffer";
  std::vector<uint8_t>& want = regions_[recvRegion_].want;
  ASSERT_LE(recvAt_ + bytes.size(), want.size()) << "test bug: output larger than the buffer";
  std::copy(bytes.begin(), bytes.end(), want.begin() + static_cast<std::ptrdiff_t>(recvAt_));
}

Mismatch RankMemory::compare() const {
  const size_t esz = sizeOf(dtype_);
  Mismatch m;
  for (size_t k = 0; k < regions_.size(); ++k) {
    const Region& r = regions_[k];
    const uint8_t* got = r.memory->data();
    if (!r.memory->guardsIntact()) {
      ++m.wrong;
      if (m.first.empty()) m.first = std::string(r.name) + ": a guard zone was overwritten";
    }
    for (size_t at = 0; at + esz <= r.want.size(); at += esz) {
      if (std::memcmp(got + at, r.want.data() + at, esz) == 0) continue;
      ++m.wrong;
      if (!m.first.empty()) continue;
      // Name the element by the receive buffer when it lies there, else by its region.
      std::string where = std::string(r.name) + " element " + std::to_string(at / esz);
      if (k == recvRegion_ && recv_ != nullptr && at >= recvAt_) {
        where = "recv element " + std::to_string((at - recvAt_) / esz);
        if (inPlace_) where += " (in place)";
      }
      m.first = where + ": got " + showElement(dtype_, got + at) + ", want " +
                showElement(dtype_, r.want.data() + at);
    }
  }
  return m;
}

void Checker::check(const std::string& label, int rank, const RankMemory& memory) {
  const Mismatch m = memory.compare();
  if (m.wrong == 0) return;
  wrongElements_ += m.wrong;
  if (label != lastBadCase_) {
    ++badCases_;
    lastBadCase_ = label;
  }
  if (first_.empty()) {
    first_ = label + ", rank " + std::to_string(rank) + ": " + m.first + " (" +
             std::to_string(m.wrong) + " wrong on this rank)";
  }
}

void Checker::runFailed(const std::string& label) {
  ++badCases_;
  lastBadCase_ = label;
  if (first_.empty()) first_ = label;
}

void Checker::report() const {
  EXPECT_EQ(badCases_, 0u) << "#wrong elements: " << wrongElements_ << " in " << badCases_ << " of "
                           << cases_ << " cases; first: " << first_;
  EXPECT_GT(cases_, 0u) << "no case ran";
}

HierWorld::HierWorld(const Placement& placement) {
  for (uint32_t node = 0; node < placement.size(); ++node) {
    Result<NodeLayout> layout = NodeLayout::make(node, placement);
    HC_CHECK(layout.isOk());
    layouts_.push_back(std::move(layout.value()));
    pools_.push_back(std::make_unique<ScratchPool>());
  }
}

Status HierWorld::run(const std::vector<std::optional<NodeWork>>& work,
                      const net::NetOpOptions& options) {
  const size_t n = nodes();
  HC_CHECK(work.size() == n);
  net::testing::Cluster cluster(n);  // first: the ops borrow its endpoints
  std::vector<std::unique_ptr<NodePlan>> plans(n);
  for (size_t node = 0; node < n; ++node) {
    if (!work[node]) continue;
    auto plan =
        NodePlan::make(work[node]->op, layouts_[node], work[node]->local, pools_[node].get());
    if (!plan.isOk()) {
      return internalError("node " + std::to_string(node) +
                           ": NodePlan::make: " + plan.status().toString());
    }
    plans[node] = std::move(plan.value());
  }
  for (auto& plan : plans) {
    if (plan) plan->before();
  }
  std::vector<net::NetOpPtr> ops(n);  // after the plans: destroyed before the buffers they use
  std::vector<net::NetOp*> raw(n, nullptr);
  for (size_t node = 0; node < n; ++node) {
    if (!plans[node]) continue;
    net::NetOpSpec spec = plans[node]->spec();
    if (spec.self != node) {
      return internalError("node " + std::to_string(node) + ": spec().self is " +
                           std::to_string(spec.self));
    }
    const net::NetOpSpec wiring = cluster.spec(node, spec.kind);
    spec.transport = wiring.transport;
    spec.peers = wiring.peers;
    spec.comm = wiring.comm;
    spec.seq = wiring.seq;
    spec.options = options;
    Result<net::NetOpPtr> op = net::makeNetOp(spec);
    if (!op.isOk()) {
      return internalError("node " + std::to_string(node) +
                           ": makeNetOp: " + op.status().toString());
    }
    ops[node] = std::move(op.value());
    raw[node] = ops[node].get();
  }
  const std::vector<net::testing::Outcome> outcomes = cluster.run(raw);
  for (size_t node = 0; node < n; ++node) {
    if (raw[node] != nullptr && !outcomes[node].status.isOk()) {
      return internalError("node " + std::to_string(node) + ": NetOp " +
                           outcomes[node].status.toString());
    }
  }
  for (auto& plan : plans) {
    if (plan) plan->after();
  }
  return okStatus();
}

Status HierWorld::runCollective(const LocalOp& op, const std::vector<RankBuffers>& byRank,
                                const net::NetOpOptions& options) {
  std::vector<std::optional<NodeWork>> work(nodes());
  for (size_t node = 0; node < nodes(); ++node) {
    work[node] = NodeWork{op, {}};
    for (uint32_t rank : layouts_[node].ranksOfNode[node]) {
      work[node]->local.push_back(byRank[rank]);
    }
  }
  return run(work, options);
}

}  // namespace hc::coll::hier::testing
