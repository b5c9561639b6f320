#include "daemon/coll/net/comm_identities.h"

#include <cstdio>
#include <string>

#include "daemon/transport/transport.h"

namespace hc::coll::net {
namespace {

std::string hex(uint64_t identity) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(identity));
  return text;
}

}  // namespace

Status CommIdentities::claim(uint64_t identity) {
  if (identity < transport::kFirstCommIdentity) {
    return invalidArgument("communicator identity " + hex(identity) +
                           " is reserved for traffic between daemons");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_.count(identity) != 0 || retired_.count(identity) != 0) {
    return internalError("communicator identity " + hex(identity) +
                         " already names another communicator on this daemon; refusing it so "
                         "that the two never take each other's messages");
  }
  live_.insert(identity);
  return okStatus();
}

void CommIdentities::retire(uint64_t identity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_.erase(identity) == 0) return;
  retired_.insert(identity);
  retiredOrder_.push_back(identity);
  while (retiredOrder_.size() > retiredCapacity_) {
    retired_.erase(retiredOrder_.front());
    retiredOrder_.pop_front();
  }
}

CommIdentities::Known CommIdentities::lookup(uint64_t identity) const {
  if (identity < transport::kFirstCommIdentity) return Known::Reserved;
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_.count(identity) != 0) return Known::Live;
  if (retired_.count(identity) != 0) return Known::Retired;
  return Known::Unknown;
}

size_t CommIdentities::live() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.size();
}

}  // namespace hc::coll::net
