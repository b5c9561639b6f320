// The UCX backend's wire parsers (daemon/transport/ucx/ucx_wire.h): the same bytes as a control
// message from another daemon (parseControl: hello, inline message, header) and as a Peer
// address (decodeAddress). What the parsers promise is checked too: an inline payload is the
// tail of the bytes with the header's length, a hello and a header are exactly their size, an
// address's worker part is the rest of the bytes. Compiled from ucx_wire.cc alone: the parsers
// need no UCX library.
// Input: the bytes as they arrive, as they are.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "daemon/transport/ucx/ucx_wire.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "ucx_wire: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hc::transport::ucx;
  const std::span<const uint8_t> bytes(data, size);
  if (auto message = parseControl(bytes)) {
    switch (message->kind) {
      case ControlKind::Hello:
        require(size == sizeof(HelloMessage), "a hello of another size was accepted");
        break;
      case ControlKind::Inline:
        require(message->payload.size() == message->header.bytes,
                "an inline payload disagrees with its header's length");
        require(message->payload.data() + message->payload.size() == data + size,
                "an inline payload is not the tail of the message");
        require(message->header.headerBytes >= sizeof(MessageHeader) &&
                    message->header.headerBytes <= kMaxHeaderBytes,
                "a header length out of bounds was accepted");
        break;
      case ControlKind::Header:
        require(message->payload.empty() && message->header.headerBytes == size,
                "a header message carried bytes after its header");
        break;
      default:
        require(false, "a control message of unknown kind was accepted");
    }
    (void)tagOf(message->header);
  }
  if (auto address = decodeAddress(bytes)) {
    require(address->uuid != 0, "an address with uuid 0 was accepted");
    require(
        !address->worker.empty() && address->worker.data() + address->worker.size() == data + size,
        "an address's worker part is not the rest of its bytes");
  }
  return 0;
}
