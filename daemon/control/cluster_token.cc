#include "daemon/control/cluster_token.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/unique_fd.h"

namespace hc::control {
namespace {

std::string octalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

ClusterToken::~ClusterToken() { wipe(); }

ClusterToken& ClusterToken::operator=(ClusterToken&& other) noexcept {
  if (this != &other) {
    wipe();
    secret_ = std::move(other.secret_);
  }
  return *this;
}

void ClusterToken::wipe() {
  if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
  secret_.clear();
}

Result<ClusterToken> ClusterToken::fromBytes(std::span<const uint8_t> secret) {
  size_t size = secret.size();
  while (size > 0 && (secret[size - 1] == '\n' || secret[size - 1] == '\r' ||
                      secret[size - 1] == ' ' || secret[size - 1] == '\t')) {
    --size;
  }
  if (size < kMinTokenBytes || size > kMaxTokenBytes) {
    return invalidArgument("cluster token must have " + std::to_string(kMinTokenBytes) + " to " +
                           std::to_string(kMaxTokenBytes) + " bytes, has " + std::to_string(size));
  }
  return ClusterToken(std::vector<uint8_t>(secret.begin(), secret.begin() + size));
}

Result<ClusterToken> ClusterToken::load(const std::string& path) {
  // Check the file we actually read (fstat of the open descriptor), not the path, so a swap
  // between the check and the read cannot slip a readable file in.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return systemError("open cluster token file " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return systemError("stat cluster token file " + path, errno);
  if (!S_ISREG(st.st_mode)) {
    return invalidArgument("cluster token file " + path + " is not a regular file");
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return Status(Code::PermissionDenied,
                  "cluster token file " + path + " has mode " + octalMode(st.st_mode) +
                      ": group or others may access it; make it 0600 (chmod 600 " + path + ")");
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return Status(Code::PermissionDenied, "cluster token file " + path + " belongs to uid " +
                                              std::to_string(st.st_uid) +
                                              ", not to this daemon's user or root");
  }
  if (st.st_size > static_cast<off_t>(kMaxTokenBytes + 2)) {
    return invalidArgument("cluster token file " + path + " is larger than " +
                           std::to_string(kMaxTokenBytes) + " bytes");
  }
  std::vector<uint8_t> bytes(kMaxTokenBytes + 3);
  size_t filled = 0;
  while (filled < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      OPENSSL_cleanse(bytes.data(), bytes.size());
      return systemError("read cluster token file " + path, err);
    }
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  Result<ClusterToken> token = fromBytes(std::span<const uint8_t>(bytes.data(), filled));
  OPENSSL_cleanse(bytes.data(), bytes.size());
  if (!token.isOk()) return invalidArgument(path + ": " + token.status().message());
  return token;
}

}  // namespace hc::control
