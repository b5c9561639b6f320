// The per-communicator side table (comm_table.h).
#include "shim/src/comm_table.h"

#include <unordered_map>
#include <utility>

namespace hc::shim {
namespace {

struct Table {
  std::mutex mutex;
  std::unordered_map<ncclComm_t, CommInfoPtr> entries;
};

// Never destroyed: a detached finalize thread or an atexit handler of the program may still look
// a communicator up while static destructors run.
Table& table() {
  static Table* t = new Table;
  return *t;
}

}  // namespace

void rememberComm(ncclComm_t comm, CommInfoPtr info) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.entries[comm] = std::move(info);
}

CommInfoPtr findComm(ncclComm_t comm) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.entries.find(comm);
  return it != t.entries.end() ? it->second : nullptr;
}

CommInfoPtr forgetComm(ncclComm_t comm) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.entries.find(comm);
  if (it == t.entries.end()) return nullptr;
  CommInfoPtr info = std::move(it->second);
  t.entries.erase(it);
  return info;
}

CommLookup::CommLookup(ncclComm_t comm) : lock_(table().mutex) {
  if (comm == nullptr) return;
  auto it = table().entries.find(comm);
  if (it != table().entries.end()) info_ = it->second.get();
}

}  // namespace hc::shim
