// The cluster token: a secret every daemon of the cluster shares, read from a file that only its
// owner may read (mode 0600 or 0400). It never travels: daemons prove they hold it with an HMAC
// over a nonce (membership_proof.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace hc::control {

constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxTokenBytes = 4096;

class ClusterToken {
 public:
  // Reads the token from `path`, following symlinks (Kubernetes mounts secrets that way).
  // Refuses with PermissionDenied a file that group or others may read or write, or that belongs
  // to another user than the daemon's (root's files are accepted), and with InvalidArgument one
  // that is not a regular file or whose token, without trailing whitespace, is shorter than
  // kMinTokenBytes or longer than kMaxTokenBytes.
  [[nodiscard]] static Result<ClusterToken> load(const std::string& path);
  // For tests and tools that hold the secret already.
  [[nodiscard]] static Result<ClusterToken> fromBytes(std::span<const uint8_t> secret);

  ClusterToken(ClusterToken&&) noexcept = default;
  ClusterToken& operator=(ClusterToken&& other) noexcept;
  ClusterToken(const ClusterToken&) = delete;
  ClusterToken& operator=(const ClusterToken&) = delete;
  ~ClusterToken();  // wipes the secret

  std::span<const uint8_t> secret() const { return secret_; }

 private:
  explicit ClusterToken(std::vector<uint8_t> secret) : secret_(std::move(secret)) {}
  void wipe();

  std::vector<uint8_t> secret_;
};

}  // namespace hc::control
