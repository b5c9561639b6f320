// hc::Status and hc::Result<T>: the project's one error type.
// Depends on the C++ standard library only. Codes map one to one onto hc_status_t (client/include/
// hetero_comm/hc.h), onto ncclResult_t in the shim, and onto gRPC codes in the control plane.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hc {

// Values equal hc_status_t; never renumber.
enum class Code : int32_t {
  Ok = 0,
  InProgress = 1,       // not an error: call again after progress
  NoResource = 2,       // back-pressure: retry after progress
  InvalidArgument = 3,  // the caller's input is wrong
  NotFound = 4,
  PermissionDenied = 5,
  Unavailable = 6,  // a party went away (client, daemon, peer) or the object was aborted
  Timeout = 7,
  RemoteError = 8,  // another rank failed or disagreed
  DeviceError = 9,
  TransportError = 10,
  Internal = 11,
  Unsupported = 12,  // a valid call this build cannot carry out (a stream being graph-captured)
};
constexpr int32_t kNumCodes = 13;

std::string_view codeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool isOk() const { return code_ == Code::Ok; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: count overflows the buffer"
  std::string toString() const;

 private:
  Code code_ = Code::Ok;
  std::string message_;
};

inline Status okStatus() { return {}; }
inline Status invalidArgument(std::string m) { return {Code::InvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {Code::NotFound, std::move(m)}; }
inline Status unavailable(std::string m) { return {Code::Unavailable, std::move(m)}; }
inline Status internalError(std::string m) { return {Code::Internal, std::move(m)}; }
// errno-based failure of a system call, e.g. systemError("bind /run/x.sock")
Status systemError(std::string_view what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT
  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }
  Status status() const { return isOk() ? Status{} : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hc

// Returns early with the status when it is not Ok.
#define HC_RETURN_IF_ERROR(expr)        \
  do {                                  \
    ::hc::Status hc_status_ = (expr);   \
    if (!hc_status_.isOk()) return hc_status_; \
  } while (0)

// Broken invariant: fatal in every build.
#define HC_CHECK(cond) \
  do {                 \
    if (!(cond)) ::hc::detail::checkFailed(#cond, __FILE__, __LINE__); \
  } while (0)

namespace hc::detail {
[[noreturn]] void checkFailed(const char* cond, const char* file, int line);
}
