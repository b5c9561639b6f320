// NetExecutor: start/stop, and the Mailbox through which other threads reach the progress thread.
#include "daemon/coll/net/net_executor.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "daemon/coll/net/net_executor_loop.h"

namespace hc::coll::net {
namespace detail {
namespace {

void signal(int fd) {
  uint64_t one = 1;
  // Only EAGAIN can fail here (the counter is saturated), and then the fd is readable anyway.
  (void)!::write(fd, &one, sizeof(one));
}

void drain(int fd) {
  uint64_t counter;
  (void)!::read(fd, &counter, sizeof(counter));
}

Status shuttingDown() { return unavailable("shutting down"); }

}  // namespace

void Mailbox::post(Command command) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    // The progress thread takes no more commands: answer a job here, drop an abort.
    if (auto* job = std::get_if<NetJob>(&command)) {
      postResultLocked(NetJobResult{job->id, shuttingDown(), ""});
    }
    return;
  }
  commands_.push_back(std::move(command));
  signal(wakeFd_.get());
}

void Mailbox::requestStop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  signal(wakeFd_.get());
}

std::vector<Mailbox::Command> Mailbox::take(bool* stopping) {
  // Drain the wakeup first: a command posted after the swap below signals again.
  drain(wakeFd_.get());
  std::lock_guard<std::mutex> lock(mutex_);
  *stopping = stopping_;
  return std::exchange(commands_, {});
}

void Mailbox::postResult(NetJobResult result) {
  std::lock_guard<std::mutex> lock(mutex_);
  postResultLocked(std::move(result));
}

void Mailbox::postResultLocked(NetJobResult result) {
  results_.push_back(std::move(result));
  signal(doneFd_.get());
}

std::vector<NetJobResult> Mailbox::takeResults() {
  std::lock_guard<std::mutex> lock(mutex_);
  drain(doneFd_.get());  // the queue empties with it: readable iff results wait
  return std::exchange(results_, {});
}

}  // namespace detail

namespace {

UniqueFd makeEventFd() { return UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)); }

Status validate(const transport::Transport* transport, const NetExecutorOptions& o) {
  if (transport == nullptr) return invalidArgument("net executor: no transport");
  if (o.maxSleep.count() < 1) return invalidArgument("net executor: maxSleep must be >= 1 ms");
  if (o.heartbeatInterval.count() < 1) {
    return invalidArgument("net executor: heartbeatInterval must be >= 1 ms");
  }
  if (o.silenceTimeout.count() < 0 ||
      (o.silenceTimeout.count() > 0 && o.silenceTimeout < 4 * o.heartbeatInterval)) {
    return invalidArgument(
        "net executor: silenceTimeout must be 0 (off) or at least 4 heartbeat "
        "intervals (" +
        std::to_string(4 * o.heartbeatInterval.count()) + " ms)");
  }
  if (o.holdUnknownFor.count() < 1 || o.heldMessagesPerPeer < 1) {
    return invalidArgument(
        "net executor: messages of unknown communicators must be held at least 1 ms, and "
        "at least one per peer");
  }
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<NetExecutor>> NetExecutor::start(
    std::unique_ptr<transport::Transport> transport, NetExecutorOptions options) {
  HC_RETURN_IF_ERROR(validate(transport.get(), options));
  UniqueFd wakeFd = makeEventFd();
  if (!wakeFd.valid()) return systemError("net executor: eventfd", errno);
  UniqueFd doneFd = makeEventFd();
  if (!doneFd.valid()) return systemError("net executor: eventfd", errno);
  UniqueFd epollFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epollFd.valid()) return systemError("net executor: epoll_create1", errno);
  for (int fd : {wakeFd.get(), transport->eventFd()}) {
    if (fd < 0) continue;  // a transport without an event fd is polled
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (::epoll_ctl(epollFd.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
      return systemError("net executor: epoll_ctl", errno);
    }
  }

  transport::PeerAddress address = transport->address();
  auto mailbox = std::make_unique<detail::Mailbox>(std::move(wakeFd), std::move(doneFd));
  auto identities = std::make_shared<CommIdentities>();
  auto loop = std::make_unique<detail::ProgressLoop>(std::move(transport), options, *mailbox,
                                                     std::move(epollFd), identities);
  std::unique_ptr<NetExecutor> executor(
      new NetExecutor(std::move(address), std::move(mailbox), std::move(identities)));
  try {
    // The thread owns the loop; the loop destroys the transport before the thread ends.
    executor->thread_ = std::thread([loop = std::move(loop)]() mutable {
      loop->run();
      loop.reset();
    });
  } catch (const std::system_error& e) {  // control path: the one place a thread is made
    return systemError("net executor: thread", e.code().value());
  }
  return executor;
}

NetExecutor::NetExecutor(transport::PeerAddress address, std::unique_ptr<detail::Mailbox> mailbox,
                         std::shared_ptr<CommIdentities> identities)
    : address_(std::move(address)),
      identities_(std::move(identities)),
      mailbox_(std::move(mailbox)) {}

NetExecutor::~NetExecutor() { stop(); }

void NetExecutor::stop() {
  std::lock_guard<std::mutex> lock(stopMutex_);
  if (!thread_.joinable()) return;
  mailbox_->requestStop();
  thread_.join();
}

void NetExecutor::submit(NetJob job) { mailbox_->post(std::move(job)); }

void NetExecutor::abortComm(uint64_t comm, Status why) {
  if (why.isOk()) why = unavailable("communicator aborted");
  mailbox_->post(detail::Mailbox::Abort{comm, std::move(why)});
}

int NetExecutor::doneFd() const { return mailbox_->doneFd(); }

std::vector<NetJobResult> NetExecutor::takeResults() { return mailbox_->takeResults(); }

}  // namespace hc::coll::net
