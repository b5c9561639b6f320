// Segment: one client's sealed memfd, mapped in the daemon. Holds the SegmentHeader, both rings
// and the client's host buffers (protocol.h). Sealed against shrinking and growing, so a client
// holding the fd cannot make the daemon's accesses fault.
// Depends on hc_common.
#pragma once

#include <cstdint>
#include <memory>

#include "common/ipc/ring.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::session {

class Segment {
 public:
  // Creates, sizes, seals and maps a segment of `bytes` with `ringEntries` slots per ring, and
  // writes its header.
  static Result<std::shared_ptr<Segment>> create(uint64_t bytes, uint32_t ringEntries,
                                                 const char* name);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int fd() const { return fd_.get(); }
  ipc::SegmentView& view() { return view_; }
  const ipc::SegmentLayout& layout() const { return layout_; }
  uint64_t bytes() const { return view_.bytes; }
  uint8_t* at(uint64_t offset) const { return view_.base + offset; }

  // Allocates the pages of [offset, offset+bytes) now, so no collective pays first touch.
  void prefault(uint64_t offset, uint64_t bytes) const;

 private:
  Segment() = default;
  UniqueFd fd_;
  ipc::SegmentView view_;
  ipc::SegmentLayout layout_{};
};

using SegmentPtr = std::shared_ptr<Segment>;

}  // namespace hc::session
