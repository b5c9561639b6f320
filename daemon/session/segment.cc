#include "daemon/session/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace hc::session {

Result<std::shared_ptr<Segment>> Segment::create(uint64_t bytes, uint32_t ringEntries,
                                                 const char* name) {
  std::shared_ptr<Segment> seg(new Segment());
  seg->fd_.reset(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!seg->fd_.valid()) return systemError("memfd_create", errno);
  if (::ftruncate(seg->fd_.get(), static_cast<off_t>(bytes)) != 0) {
    return systemError("ftruncate segment", errno);
  }
  if (::fcntl(seg->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return systemError("seal segment", errno);
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd_.get(), 0);
  if (base == MAP_FAILED) return systemError("mmap segment", errno);
  seg->view_ = ipc::SegmentView::over(base, bytes, ringEntries);
  seg->layout_ = ipc::segmentLayout(bytes, ringEntries);
  // The header and rings are touched on every operation: fault them in now.
  seg->prefault(0, seg->layout_.heapOffset);
  auto* h = new (base) ipc::SegmentHeader();
  h->magic = ipc::kSegmentMagic;
  h->major = ipc::kProtocolMajor;
  h->minor = ipc::kProtocolMinor;
  h->segmentBytes = bytes;
  h->ringEntries = ringEntries;
  return seg;
}

Segment::~Segment() {
  if (view_.base != nullptr) ::munmap(view_.base, view_.bytes);
}

void Segment::prefault(uint64_t offset, uint64_t bytes) const {
  if (bytes == 0) return;
  if (::madvise(view_.base + offset, bytes, MADV_POPULATE_WRITE) == 0) return;
  // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch one byte per page instead.
  for (uint64_t o = 0; o < bytes; o += 4096) {
    reinterpret_cast<volatile uint8_t*>(view_.base + offset)[o] = 0;
  }
}

}  // namespace hc::session
