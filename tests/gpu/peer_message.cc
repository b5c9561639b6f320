// Messages between the two processes of a CUDA primitive, with an fd passed by SCM_RIGHTS: the
// way a client hands the daemon a VMM allocation, and a sealed segment the other way.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "tests/gpu/probe.h"

namespace hc::gpuprobe {

std::string sendPeer(int sock, const PeerMessage& message, int fd) {
  iovec iov{const_cast<PeerMessage*>(&message), sizeof(message)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return "sendmsg: " + errnoText(errno);
  if (static_cast<size_t>(n) != sizeof(message)) return "sendmsg: short message";
  return "";
}

std::string receivePeer(int sock, PeerMessage* message, int* fd) {
  if (fd != nullptr) *fd = -1;
  iovec iov{message, sizeof(*message)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return "recvmsg: " + errnoText(errno);
  if (n == 0) return "closed";
  int received = -1;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
      std::memcpy(&received, CMSG_DATA(cmsg), sizeof(int));
    }
  }
  if (fd != nullptr) {
    *fd = received;
  } else if (received >= 0) {
    ::close(received);
  }
  if (static_cast<size_t>(n) != sizeof(*message)) return "recvmsg: short message";
  if ((msg.msg_flags & MSG_CTRUNC) != 0) return "recvmsg: the passed descriptor was cut off";
  message->text[sizeof(message->text) - 1] = '\0';
  return "";
}

void setPeerText(PeerMessage* message, const std::string& text) {
  std::snprintf(message->text, sizeof(message->text), "%s", text.c_str());
}

}  // namespace hc::gpuprobe
