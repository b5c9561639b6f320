#include "common/ipc/small_area.h"

#include <climits>

#include "common/ipc/ring.h"

namespace hc::ipc {

void areaPublish(AreaHeader* header) {
  header->event.fetch_add(1, std::memory_order_release);
  // Pairs with the waiter's fence between adding itself to sleepers and its last check.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header->sleepers.load(std::memory_order_relaxed) != 0) futexWake(&header->event, INT_MAX);
}

}  // namespace hc::ipc
