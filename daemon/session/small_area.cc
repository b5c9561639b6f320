#include "daemon/session/small_area.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace hc::session {

Result<std::shared_ptr<SmallArea>> SmallArea::create(int nranks, const std::string& name) {
  if (nranks < 1 || nranks > ipc::kAreaMaxRanks) {
    return invalidArgument("a small-operation area holds 1 to " +
                           std::to_string(ipc::kAreaMaxRanks) + " ranks, not " +
                           std::to_string(nranks));
  }
  std::shared_ptr<SmallArea> area(new SmallArea());
  area->bytes_ = ipc::areaBytes(nranks);
  area->fd_.reset(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!area->fd_.valid()) return systemError("memfd_create small area", errno);
  if (::ftruncate(area->fd_.get(), static_cast<off_t>(area->bytes_)) != 0) {
    return systemError("ftruncate small area", errno);
  }
  // The ranks write it, but none can change its size under the others (a shrink would fault
  // their reads with SIGBUS).
  if (::fcntl(area->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return systemError("seal small area", errno);
  }
  void* base =
      ::mmap(nullptr, area->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, area->fd_.get(), 0);
  if (base == MAP_FAILED) return systemError("mmap small area", errno);
  area->view_.base = static_cast<uint8_t*>(base);
  area->view_.nranks = nranks;
  auto* h = new (base) ipc::AreaHeader();
  h->magic = ipc::kAreaMagic;
  h->nranks = static_cast<uint32_t>(nranks);
  h->depth = ipc::kAreaDepth;
  h->slotBytes = ipc::kAreaSlotBytes;
  return area;
}

SmallArea::~SmallArea() {
  if (view_.base != nullptr) ::munmap(view_.base, bytes_);
}

void SmallArea::fail(const Status& why) {
  ipc::AreaHeader* h = view_.header();
  if (h->failed.load(std::memory_order_acquire) != 0) return;
  // The reason first, then the word with release: a rank that sees the word reads the reason.
  h->code = static_cast<int32_t>(why.code());
  const std::string& text = why.message();
  const size_t n = std::min(text.size(), sizeof(h->reason) - 1);
  std::memcpy(h->reason, text.data(), n);
  h->reason[n] = '\0';
  uint32_t expected = 0;
  h->failed.compare_exchange_strong(expected, ipc::kAreaFailedByDaemon, std::memory_order_release);
  ipc::areaPublish(h);
}

std::vector<SmallArea::RankCounters> SmallArea::counters() const {
  std::vector<RankCounters> out(static_cast<size_t>(view_.nranks));
  for (int r = 0; r < view_.nranks; ++r) {
    out[r].issued = view_.line(r)->smallIssued.load(std::memory_order_relaxed);
    out[r].done = view_.line(r)->smallDone.load(std::memory_order_relaxed);
  }
  return out;
}

void SmallArea::addProgress(std::vector<observe::RankProgress>* ranks) const {
  const auto counts = counters();
  for (observe::RankProgress& p : *ranks) {
    if (p.rank < 0 || static_cast<size_t>(p.rank) >= counts.size()) continue;
    p.collectivesPosted += counts[static_cast<size_t>(p.rank)].issued;
    p.collectivesFinished += counts[static_cast<size_t>(p.rank)].done;
  }
}

}  // namespace hc::session
