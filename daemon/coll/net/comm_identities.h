// CommIdentities: the communicator identities (transport.h, Tag::comm) this daemon has learned, so
// that a message is only ever delivered to the communicator it names.
//
// An identity is claimed when a communicator spanning daemons forms here and retired when it goes.
// The progress thread sorts what arrives with no receive posted by its identity: a live
// communicator's message waits for its receive (the op has not reached it yet); a retired one's is
// stale and dropped; one whose identity is not known yet is held, because the root's answer can
// reach another daemon first and that daemon's first message can arrive before this one formed
// the communicator. Held messages are bounded per peer and in time (NetExecutorOptions).
//
// Identities are 64 random bits drawn by the root daemon (or, for a split child, by a member
// daemon), so two live communicators share one only by a broken random source or a forged table.
// claim() refuses an identity that is live or was retired here, so even then a clash is refused
// at formation, never matched silently.
//
// Threads: any. The IPC thread claims and retires; the progress thread looks up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_set>

#include "common/status.h"

namespace hc::coll::net {

class CommIdentities {
 public:
  // Retired identities are remembered up to this many (the oldest are forgotten first): enough
  // for every communicator a long job creates and destroys within a stray message's lifetime.
  static constexpr size_t kDefaultRetiredCapacity = 1 << 16;

  explicit CommIdentities(size_t retiredCapacity = kDefaultRetiredCapacity)
      : retiredCapacity_(retiredCapacity) {}

  // A communicator forms here with `identity`. InvalidArgument for a reserved identity (below
  // transport::kFirstCommIdentity); Internal when it is live here or was retired here.
  [[nodiscard]] Status claim(uint64_t identity);
  // The communicator is gone here; its later traffic is stale. No effect on an unknown identity.
  void retire(uint64_t identity);

  enum class Known : uint8_t { Reserved, Live, Retired, Unknown };
  Known lookup(uint64_t identity) const;
  size_t live() const;

 private:
  const size_t retiredCapacity_;
  mutable std::mutex mutex_;
  std::unordered_set<uint64_t> live_;     // guarded by mutex_
  std::unordered_set<uint64_t> retired_;  // guarded by mutex_
  std::deque<uint64_t> retiredOrder_;     // guarded by mutex_: oldest first
};

}  // namespace hc::coll::net
