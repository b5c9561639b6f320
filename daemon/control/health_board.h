// HealthBoard: the serving status of each health service name ("" is the daemon itself), the
// one place the IPC thread writes and the gRPC Health service reads. Watchers (the Watch streams)
// hear of every change of the name they watch.
// Depends on the standard library only: no gRPC, so it is tested on its own.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hc::control {

// grpc.health.v1's ServingStatus, as the daemon uses it. ServiceUnknown is what Watch reports for
// a name nobody registered; Check answers NOT_FOUND instead.
enum class ServingStatus { Unknown, Serving, NotServing, ServiceUnknown };

const char* servingStatusName(ServingStatus status);

// The names the daemon reports (DESIGN.md, conventions A1).
inline constexpr std::string_view kDaemonHealthName = "";
inline constexpr std::string_view kCollectivesHealthName = "hetero_comm.v1.Collectives";
inline constexpr std::string_view kPeersHealthName = "hetero_comm.v1.Peers";

// Told about the name it subscribed to. Both calls run with the board's lock held, on whatever
// thread changed the board: they must not block and must not call back into the board.
class HealthWatcher {
 public:
  virtual ~HealthWatcher() = default;
  virtual void onStatus(ServingStatus status) = 0;
  // The board closed (the daemon is stopping): no further calls follow.
  virtual void onClose() = 0;
};

// Threads: every method may be called from any thread.
class HealthBoard {
 public:
  // Sets `service`'s status, adding the name if it is new, and tells its watchers when it
  // changed. Ignored after close().
  void set(std::string_view service, ServingStatus status);
  // Every registered name to NOT_SERVING at once: the drain on SIGTERM.
  void setAllNotServing();
  // nullopt for a name never set.
  std::optional<ServingStatus> get(std::string_view service) const;

  // Adds `watcher` under `service` and returns the status to send first (ServiceUnknown for an
  // unregistered name), or nullopt when the board is closed (the watcher was not added).
  // Borrowed: the watcher stays valid until unsubscribe() returns.
  std::optional<ServingStatus> subscribe(std::string_view service, HealthWatcher* watcher);
  void unsubscribe(HealthWatcher* watcher);
  size_t watcherCount() const;

  // Calls onClose on every watcher and refuses new ones. Idempotent.
  void close();

 private:
  struct Subscription {
    std::string service;
    HealthWatcher* watcher;
  };
  void notifyLocked(const std::string& service, ServingStatus status);

  mutable std::mutex mutex_;
  std::map<std::string, ServingStatus, std::less<>> statuses_;
  std::vector<Subscription> watchers_;
  bool closed_ = false;
};

}  // namespace hc::control
